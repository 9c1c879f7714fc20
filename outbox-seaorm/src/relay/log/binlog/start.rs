//! What a binlog relay checks before it reads MariaDB's binlog: the server is MariaDB (not
//! MySQL), the binlog is on, in row format with full row images and full row metadata
//! (column names), the user may read it (`REPLICATION SLAVE`, `BINLOG MONITOR`), and the
//! relay's replica server id is not the server's own; and that a stored position is this
//! server's. Each problem is a [`LogRelayError`] that says what to run.

use super::super::config::LogRelayConfig;
use super::super::error::LogRelayError;
use crate::gtid::GtidPosition;
use crate::sql::log::BinlogPreflight;

/// The server is MariaDB (`VERSION()` as `10.11.6-MariaDB…`), not MySQL.
pub(crate) fn check_server(version: &str) -> Result<(), LogRelayError> {
    if version.to_ascii_lowercase().contains("mariadb") {
        Ok(())
    } else {
        Err(LogRelayError::NotMariaDb {
            version: version.to_owned(),
        })
    }
}

/// The checks on facts already read; `grants` as `SHOW GRANTS` printed them.
pub(crate) fn check(
    preflight: &BinlogPreflight,
    grants: &[String],
    config: &LogRelayConfig,
) -> Result<(), LogRelayError> {
    if preflight.log_bin != 1 {
        return Err(LogRelayError::BinlogSetting {
            variable: "log_bin",
            found: "OFF".into(),
            needed: "ON",
            option: "log-bin",
        });
    }
    for (variable, found, option) in [
        ("binlog_format", &preflight.binlog_format, "binlog-format"),
        (
            "binlog_row_image",
            &preflight.binlog_row_image,
            "binlog-row-image",
        ),
        (
            "binlog_row_metadata",
            &preflight.binlog_row_metadata,
            "binlog-row-metadata",
        ),
    ] {
        let needed = if variable == "binlog_format" {
            "ROW"
        } else {
            "FULL"
        };
        if !found.eq_ignore_ascii_case(needed) {
            return Err(LogRelayError::BinlogSetting {
                variable,
                found: found.clone(),
                needed,
                option,
            });
        }
    }
    let missing = missing_privileges(grants);
    if !missing.is_empty() {
        return Err(LogRelayError::NoBinlogPrivilege {
            user: preflight.user.clone(),
            missing: missing.join(" and "),
        });
    }
    let id = config.replica_server_id();
    if i64::from(id) == preflight.server_id {
        return Err(LogRelayError::ReplicaServerId { id });
    }
    Ok(())
}

/// Checks that the stored position `stored` of `slot` is in the history of a server at
/// `server` (`@@gtid_binlog_pos`): each of its domains is the server's, at a sequence number
/// the server reached. A position from another server is refused: MariaDB would accept it
/// and stream nothing of the outbox's.
pub(crate) fn check_position(
    slot: &str,
    stored: &GtidPosition,
    server: &str,
) -> Result<(), LogRelayError> {
    let foreign = || LogRelayError::ForeignPosition {
        slot: slot.to_owned(),
        position: stored.to_string(),
        server: server.to_owned(),
    };
    let reached = GtidPosition::parse(server).map_err(|_| foreign())?;
    let known = stored.gtids().all(|gtid| {
        reached
            .gtids()
            .any(|at| at.domain == gtid.domain && at.sequence >= gtid.sequence)
    });
    if known { Ok(()) } else { Err(foreign()) }
}

/// The privileges of the binlog dump that `grants` (global ones, `ON *.*`) do not give.
fn missing_privileges(grants: &[String]) -> Vec<&'static str> {
    let global: Vec<String> = grants
        .iter()
        .map(|grant| grant.to_ascii_uppercase())
        .filter(|grant| grant.contains(" ON *.* "))
        .collect();
    let has = |names: &[&str]| {
        global.iter().any(|grant| {
            grant.contains("ALL PRIVILEGES") || names.iter().any(|name| grant.contains(name))
        })
    };
    let mut missing = Vec::new();
    // MariaDB 10.5 renamed REPLICATION SLAVE to REPLICATION REPLICA (both are printed
    // depending on the version) and split BINLOG MONITOR from REPLICATION CLIENT / SUPER.
    if !has(&["REPLICATION SLAVE", "REPLICATION REPLICA"]) {
        missing.push("REPLICATION SLAVE");
    }
    if !has(&["BINLOG MONITOR", "REPLICATION CLIENT", "SUPER"]) {
        missing.push("BINLOG MONITOR");
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preflight() -> BinlogPreflight {
        BinlogPreflight {
            log_bin: 1,
            binlog_format: "ROW".into(),
            binlog_row_image: "FULL".into(),
            binlog_row_metadata: "FULL".into(),
            server_id: 1,
            database: Some("shop".into()),
            user: "relay@%".into(),
            binlog_position: "0-1-42".into(),
        }
    }

    fn grants(text: &str) -> Vec<String> {
        vec![text.to_owned()]
    }

    #[test]
    fn each_missing_setting_names_itself_and_its_option() {
        let config = LogRelayConfig::for_slot("orders");
        let all = grants("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION");
        assert!(check(&preflight(), &all, &config).is_ok());
        let off = BinlogPreflight {
            log_bin: 0,
            ..preflight()
        };
        assert!(matches!(
            check(&off, &all, &config),
            Err(LogRelayError::BinlogSetting {
                variable: "log_bin",
                ..
            })
        ));
        let mixed = BinlogPreflight {
            binlog_format: "MIXED".into(),
            ..preflight()
        };
        let error = check(&mixed, &all, &config).unwrap_err().to_string();
        assert!(error.contains("binlog_format = MIXED"), "{error}");
        assert!(error.contains("--binlog-format=ROW"), "{error}");
        let minimal = BinlogPreflight {
            binlog_row_metadata: "MINIMAL".into(),
            ..preflight()
        };
        assert!(matches!(
            check(&minimal, &all, &config),
            Err(LogRelayError::BinlogSetting {
                variable: "binlog_row_metadata",
                ..
            })
        ));
    }

    #[test]
    fn privileges_are_read_from_the_global_grants() {
        let config = LogRelayConfig::for_slot("orders");
        let both =
            grants("GRANT SELECT, INSERT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `relay`@`%`");
        assert!(check(&preflight(), &both, &config).is_ok());
        let on_db = vec![
            "GRANT USAGE ON *.* TO `relay`@`%`".to_owned(),
            "GRANT ALL PRIVILEGES ON `shop`.* TO `relay`@`%`".to_owned(),
        ];
        let error = check(&preflight(), &on_db, &config).unwrap_err();
        assert!(
            matches!(&error, LogRelayError::NoBinlogPrivilege { missing, .. }
                if missing == "REPLICATION SLAVE and BINLOG MONITOR"),
            "{error}"
        );
        let replica_only = grants("GRANT REPLICATION SLAVE ON *.* TO `relay`@`%`");
        assert!(matches!(
            check(&preflight(), &replica_only, &config),
            Err(LogRelayError::NoBinlogPrivilege { missing, .. }) if missing == "BINLOG MONITOR"
        ));
    }

    #[test]
    fn mysql_is_refused_by_its_version() {
        assert!(check_server("10.11.19-MariaDB-0+deb12u1-log").is_ok());
        assert!(check_server("11.4.2-MariaDB").is_ok());
        let error = check_server("8.0.36").unwrap_err();
        assert!(
            matches!(&error, LogRelayError::NotMariaDb { version } if version == "8.0.36"),
            "{error}"
        );
        assert!(error.to_string().contains("polling relay"), "{error}");
    }

    #[test]
    fn the_replica_id_may_not_be_the_servers() {
        let all = grants("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`");
        let mut config = LogRelayConfig::for_slot("orders");
        config.replica_server_id = Some(1);
        assert!(matches!(
            check(&preflight(), &all, &config),
            Err(LogRelayError::ReplicaServerId { id: 1 })
        ));
        config.replica_server_id = None;
        let derived = config.replica_server_id();
        assert!(derived >= 0x8000_0000, "{derived:#x}");
        assert_eq!(
            derived,
            LogRelayConfig::for_slot("orders").replica_server_id(),
            "stable"
        );
        assert_ne!(
            derived,
            LogRelayConfig::for_slot("billing").replica_server_id()
        );
    }

    #[test]
    fn a_position_from_another_server_is_refused() {
        let position = |text: &str| GtidPosition::parse(text).unwrap();
        assert!(check_position("s", &position("0-1-40"), "0-1-42").is_ok());
        assert!(check_position("s", &position("0-1-42,1-2-3"), "0-1-50,1-2-3").is_ok());
        assert!(check_position("s", &position(""), "0-1-42").is_ok());
        for (stored, server) in [
            ("7-99-12345", "0-1-42"),
            ("0-1-43", "0-1-42"),
            ("0-1-1", ""),
            ("0-1-5,2-1-1", "0-1-42"),
        ] {
            let error = check_position("s", &position(stored), server).unwrap_err();
            assert!(
                matches!(&error, LogRelayError::ForeignPosition { position, .. } if position == stored),
                "{stored} on {server}: {error}"
            );
            assert!(error.to_string().contains("outbox log-reset s"), "{error}");
        }
    }
}
