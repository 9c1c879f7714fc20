//! What a log relay checks and sets up before it streams: the server can decode logically
//! (`wal_level`), the role may replicate, a slot is free (or ours exists and is usable), and
//! the publication covers the outbox's inserts. Each problem is a [`LogRelayError`] that
//! says what to do.

use sea_orm::DbErr;

use super::config::LogRelayConfig;
use super::error::LogRelayError;
use crate::sql::Store;
use crate::sql::log::{Preflight, SlotRow};
use crate::transaction::Pool;

/// `duplicate_object`: another relay created the publication between our check and our
/// `CREATE`.
const DUPLICATE_OBJECT: &str = "42710";

/// Checks the server and the slot, creates the publication when missing.
pub(super) async fn prepare(
    db: &Pool,
    store: &Store,
    config: &LogRelayConfig,
) -> Result<(), LogRelayError> {
    let preflight = store.log_preflight(db).await?;
    let slot = store.slot(db, &config.slot).await?;
    check(
        &preflight,
        slot.as_ref(),
        config,
        &preflight.database,
        &preflight.role,
    )?;
    ensure_publication(db, store, config, preflight.server_major).await
}

/// The checks of [`prepare`] on facts already read.
pub(super) fn check(
    preflight: &Preflight,
    slot: Option<&SlotRow>,
    config: &LogRelayConfig,
    database: &str,
    role: &str,
) -> Result<(), LogRelayError> {
    if preflight.wal_level != "logical" {
        return Err(LogRelayError::WalLevel {
            found: preflight.wal_level.clone(),
        });
    }
    if !preflight.can_replicate {
        return Err(LogRelayError::NoReplicationPrivilege {
            role: role.to_owned(),
        });
    }
    match slot {
        None if preflight.used_slots >= i64::from(preflight.max_slots) => {
            Err(LogRelayError::NoFreeSlot {
                used: preflight.used_slots,
                max: preflight.max_slots,
            })
        }
        None => Ok(()),
        Some(slot) => check_slot(slot, config, database),
    }
}

fn check_slot(
    slot: &SlotRow,
    config: &LogRelayConfig,
    database: &str,
) -> Result<(), LogRelayError> {
    let foreign = |detail: String| LogRelayError::ForeignSlot {
        slot: config.slot.clone(),
        detail,
    };
    if slot.slot_type != "logical" || slot.plugin.as_deref() != Some("pgoutput") {
        return Err(foreign(format!(
            "a {} slot of plugin {}",
            slot.slot_type,
            slot.plugin.as_deref().unwrap_or("none")
        )));
    }
    if slot.database.as_deref() != Some(database) {
        return Err(foreign(format!(
            "it decodes database {}",
            slot.database.as_deref().unwrap_or("none")
        )));
    }
    if slot.wal_status.as_deref() == Some("lost") {
        return Err(LogRelayError::SlotInvalidated {
            slot: config.slot.clone(),
            detail: "pg_replication_slots.wal_status = 'lost'".into(),
        });
    }
    Ok(())
}

async fn ensure_publication(
    db: &Pool,
    store: &Store,
    config: &LogRelayConfig,
    server_major: i32,
) -> Result<(), LogRelayError> {
    let name = &config.publication;
    let state = match store.publication(db, name).await? {
        Some(state) => state,
        None => {
            match store.create_publication(db, name, server_major).await {
                Ok(()) => tracing::info!(publication = %name, "log relay created its publication"),
                Err(error) if sqlstate(&error).as_deref() == Some(DUPLICATE_OBJECT) => {}
                Err(error) => return Err(error.into()),
            }
            store
                .publication(db, name)
                .await?
                .ok_or_else(|| DbErr::Custom(format!("publication {name} vanished")))?
        }
    };
    // Message mode has no table: logical messages stream whatever the publication holds.
    let messages = store.outbox().write_mode().message_prefix().is_some();
    if !messages && (!state.publishes_inserts || !(state.has_outbox || state.all_tables)) {
        return Err(LogRelayError::Publication {
            publication: name.clone(),
            table: store_table(store),
        });
    }
    Ok(())
}

fn store_table(store: &Store) -> String {
    store.outbox().outbox_table().to_string()
}

/// The SQLSTATE of a database error, when the server sent one.
fn sqlstate(error: &DbErr) -> Option<String> {
    let (DbErr::Exec(sea_orm::RuntimeErr::SqlxError(error))
    | DbErr::Query(sea_orm::RuntimeErr::SqlxError(error))) = error
    else {
        return None;
    };
    error
        .as_database_error()
        .and_then(|error| error.code())
        .map(|code| code.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preflight() -> Preflight {
        Preflight {
            wal_level: "logical".into(),
            can_replicate: true,
            max_slots: 10,
            used_slots: 0,
            server_major: 15,
            database: "shop".into(),
            role: "relay".into(),
        }
    }

    fn config() -> LogRelayConfig {
        LogRelayConfig::for_slot("s")
    }

    #[test]
    fn start_up_checks_say_what_is_missing() {
        let mut facts = preflight();
        assert!(check(&facts, None, &config(), "db", "me").is_ok());
        facts.wal_level = "replica".into();
        assert!(matches!(
            check(&facts, None, &config(), "db", "me"),
            Err(LogRelayError::WalLevel { found }) if found == "replica"
        ));
        let mut facts = preflight();
        facts.can_replicate = false;
        assert!(matches!(
            check(&facts, None, &config(), "db", "me"),
            Err(LogRelayError::NoReplicationPrivilege { role }) if role == "me"
        ));
        let mut facts = preflight();
        facts.used_slots = 10;
        assert!(matches!(
            check(&facts, None, &config(), "db", "me"),
            Err(LogRelayError::NoFreeSlot { used: 10, max: 10 })
        ));
        let slot = SlotRow {
            slot_type: "logical".into(),
            plugin: Some("pgoutput".into()),
            database: Some("db".into()),
            active: false,
            wal_status: Some("reserved".into()),
            lag_bytes: Some(0),
            confirmed_flush: None,
        };
        // Our slot exists: no free slot is needed.
        assert!(check(&facts, Some(&slot), &config(), "db", "me").is_ok());
        assert!(matches!(
            check(&facts, Some(&slot), &config(), "other", "me"),
            Err(LogRelayError::ForeignSlot { .. })
        ));
        let lost = SlotRow {
            wal_status: Some("lost".into()),
            ..slot
        };
        assert!(matches!(
            check(&facts, Some(&lost), &config(), "db", "me"),
            Err(LogRelayError::SlotInvalidated { .. })
        ));
    }
}
