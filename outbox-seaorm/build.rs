//! One name for "either log relay": the module `relay::log`, its tables, slots and dead
//! letters, and their commands are built with `log-relay` (PostgreSQL) or
//! `log-relay-mariadb` (MariaDB's binary log), each without the other's client library.

fn main() {
    cfg_aliases::cfg_aliases! {
        log_relay: { any(feature = "log-relay", feature = "log-relay-mariadb") },
    }
}
