//! `outbox-soak run`: sets a soak up, starts its processes, brings chaos, waits until quiet,
//! verifies, prints the report and cleans up (also after a failure or Ctrl-C: it always
//! kills what it started and restarts nothing it leaves behind).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use outbox_brokers::nats::{self, NatsStream};
use outbox_seaorm::Outbox;
use outbox_seaorm::cli::parse_duration;
use outbox_tests::binlog_mariadb::BinlogMariaDb;

use crate::broker::BrokerServer;
use crate::chaos;
use crate::databases::{Databases, connect};
use crate::error::SoakError;
use crate::plan::{Broker, Plan, RelayMethod};
use crate::process::{Kind, Processes};
use crate::report::{Partitioned, Report};
use crate::takeover::Takeovers;
use crate::verify;

/// The partitions of each share's Kafka topic: more than one, so that the consumers'
/// order holds per partition, as it does in production.
const KAFKA_PARTITIONS: u32 = 3;

/// `tansu` on `PATH`, else `~/.cargo/bin/tansu` (where `cargo install` puts it).
fn default_tansu() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("tansu"))
            .find(|candidate| candidate.is_file())
    });
    let home = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo/bin/tansu"));
    on_path.or(home).unwrap_or_else(|| PathBuf::from("tansu"))
}

/// `outbox-soak run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The broker (a server of the soak's own).
    #[arg(long, value_enum, default_value_t = Broker::Nats)]
    broker: Broker,
    /// How the relays read the outbox.
    #[arg(long, value_enum, default_value_t = RelayMethod::Polling)]
    relay: RelayMethod,
    /// How long the chaos lasts (`90s`, `10m`; 10 s to 24 h).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Orders the producer places at most (default: rate × duration).
    #[arg(long)]
    orders: Option<u64>,
    /// Orders per second the producer places at most (1 to 5 000).
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// Customers (aggregates) the orders are spread over (1 to 100 000).
    #[arg(long, default_value_t = 40)]
    customers: u32,
    /// Relay processes (1 to 8).
    #[arg(long, default_value_t = 3)]
    relays: u32,
    /// Consumer processes, each consuming its share of the aggregates (1 to 8); with
    /// `--partitions`, instances of one partitioned consumer.
    #[arg(long, default_value_t = 2)]
    consumers: u32,
    /// Partitioned mode: the relays route each customer to one of this many
    /// partitions (1 to 64) and every consumer process takes the partitions it holds leases
    /// for; a killed consumer's partitions are taken over by the others (takeover times in
    /// the report). 0: the share mode, one consumer process per share of the customers.
    #[arg(long, default_value_t = 0)]
    partitions: u32,
    /// Seed of the chaos schedule (default: from the clock; the report prints it).
    #[arg(long)]
    seed: Option<u64>,
    /// How long to wait at most, after the chaos, for the system to be quiet.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    quiesce_timeout: Duration,
    /// The PostgreSQL server (no database: the soak makes its own).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    postgres: String,
    /// The MariaDB server (no database: the soak makes its own).
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306")]
    mariadb: String,
    /// The `nats-server` binary (`--broker nats`).
    #[arg(long, default_value = "/usr/sbin/nats-server")]
    nats_server: PathBuf,
    /// The `redis-server` binary (`--broker redis`).
    #[arg(long, default_value = "/usr/bin/redis-server")]
    redis_server: PathBuf,
    /// The `rabbitmq-server` script (`--broker rabbitmq`): the one that `exec`s the Erlang
    /// VM, so that a `SIGKILL` reaches the node.
    #[arg(long, default_value = "/usr/lib/rabbitmq/bin/rabbitmq-server")]
    rabbitmq_server: PathBuf,
    /// The `tansu` binary (`--broker kafka`), built with SQLite storage (its `libsql`
    /// feature): a broker restart must keep what it acknowledged.
    #[arg(long, default_value_os_t = default_tansu())]
    tansu: PathBuf,
    /// Leave the broker server alone (no kills and restarts of the broker), e.g. to tell a
    /// finding that needs broker restarts from one that does not. The report says so.
    #[arg(long)]
    no_broker_restarts: bool,
    /// Print the report as JSON too (one line, after the table).
    #[arg(long)]
    json: bool,
    /// Keep the databases and the run folder (logs, broker store) afterwards.
    #[arg(long)]
    keep: bool,
}

impl RunArgs {
    fn check(&self) -> Result<(), SoakError> {
        let bad = |what: &str| Err(SoakError::Setup(what.to_owned()));
        if self.duration < Duration::from_secs(10) || self.duration > Duration::from_secs(86_400) {
            return bad("--duration must be between 10s and 24h");
        }
        if !(1..=5_000).contains(&self.rate) {
            return bad("--rate must be between 1 and 5000");
        }
        if !(1..=100_000).contains(&self.customers) {
            return bad("--customers must be between 1 and 100000");
        }
        if !(1..=8).contains(&self.relays) || !(1..=8).contains(&self.consumers) {
            return bad("--relays and --consumers must be between 1 and 8");
        }
        if self.partitions > 64 {
            return bad("--partitions must be between 0 (the share mode) and 64");
        }
        if self.orders.is_some_and(|orders| orders > 10_000_000) {
            return bad("--orders must be at most 10000000");
        }
        Ok(())
    }
}

/// Runs a soak; the exit code says whether it passed (0), failed (1) or could not run (2).
///
/// # Errors
/// When the soak cannot be set up.
pub async fn run(args: RunArgs) -> Result<ExitCode, SoakError> {
    args.check()?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let id = format!(
        "soak_{}_{}",
        std::process::id(),
        now.as_millis() % 1_000_000_000
    );
    let seed = args.seed.unwrap_or(now.as_nanos() as u64);
    let dir = std::env::temp_dir().join(format!("outbox-{id}"));
    std::fs::create_dir_all(&dir)?;
    // The log relay reads MariaDB's binary log: the producer's database goes to a MariaDB
    // of the soak's own with it on (stopped when the soak ends).
    let binlog_server = match args.relay {
        RelayMethod::Polling => None,
        RelayMethod::Log => Some(
            BinlogMariaDb::dedicated("outbox-soak --relay log", &[])
                .await
                .ok_or_else(|| {
                    SoakError::Setup(
                        "MariaDB's server binaries (mariadb-install-db, mariadbd) are not \
                         installed"
                            .to_owned(),
                    )
                })?,
        ),
    };
    let producer_server = binlog_server.as_ref().map_or_else(
        || args.postgres.clone(),
        |server| format!("mysql://root@127.0.0.1:{}", server.port()),
    );
    let databases = Databases::new(&producer_server, &args.mariadb, &id);
    let outbox = Outbox::default();
    say(&format!("soak {id}: logs in {}", dir.display()));

    let binary = match args.broker {
        Broker::Nats => &args.nats_server,
        Broker::Redis => &args.redis_server,
        Broker::Rabbitmq => &args.rabbitmq_server,
        Broker::Kafka => &args.tansu,
    };
    let mut broker = BrokerServer::start(args.broker, binary, &dir).await?;
    databases.create(&outbox).await?;
    let outcome = tokio::select! {
        outcome = soak(&args, &id, seed, &dir, &databases, &mut broker) => outcome,
        _ = tokio::signal::ctrl_c() => Err(SoakError::Setup("interrupted".to_owned())),
    };
    // Whatever happened: nothing of the soak keeps running.
    broker.kill().await?;
    let keep = args.keep || !matches!(&outcome, Ok(report) if report.passed());
    if keep {
        say(&format!("kept: databases `{id}`, folder {}", dir.display()));
    } else {
        databases.drop_all().await?;
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = outcome?;
    say(&report.to_string());
    if args.json {
        say(&serde_json::to_string(&report).unwrap_or_default());
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The soak itself, between set-up and clean-up.
async fn soak(
    args: &RunArgs,
    id: &str,
    seed: u64,
    dir: &std::path::Path,
    databases: &Databases,
    broker: &mut BrokerServer,
) -> Result<Report, SoakError> {
    let plan = Plan {
        producer_url: databases.producer_url(),
        relay: args.relay,
        mariadb_url: databases.mariadb_url(),
        broker: args.broker,
        broker_url: broker.url(),
        stream: id.to_ascii_uppercase(),
        subject_prefix: id.replace('_', "-"),
        customers: args.customers,
        orders: args
            .orders
            .unwrap_or(u64::from(args.rate) * args.duration.as_secs()),
        rate: args.rate,
        shares: args.consumers,
        partitions: args.partitions,
    };
    if plan.broker == Broker::Nats {
        let client = nats::connect(&plan.broker_url)
            .await
            .map_err(|error| SoakError::Broker(error.to_string()))?;
        NatsStream::new(plan.stream.clone(), [format!("{}.>", plan.subject_prefix)])
            .ensure(&client)
            .await
            .map_err(|error| SoakError::Broker(error.to_string()))?;
    }
    if plan.broker == Broker::Kafka && plan.partitions > 0 {
        broker
            .create_topic(&plan.partitioned_queue(), plan.partitions)
            .await?;
    } else if plan.broker == Broker::Kafka {
        for share in 0..plan.shares {
            broker
                .create_topic(&plan.share_name(share), KAFKA_PARTITIONS)
                .await?;
        }
    }

    let exe = std::env::current_exe()?;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let mut processes = Processes::new(exe, plan.to_json(), dir.to_owned(), filter);
    let outcome = chaos_then_verify(args, seed, &plan, databases, broker, &mut processes).await;
    processes.kill_all().await;
    outcome
}

async fn chaos_then_verify(
    args: &RunArgs,
    seed: u64,
    plan: &Plan,
    databases: &Databases,
    broker: &mut BrokerServer,
    processes: &mut Processes,
) -> Result<Report, SoakError> {
    for share in 0..args.consumers {
        processes.add(Kind::Consumer(share))?;
    }
    for instance in 1..=args.relays {
        processes.add(Kind::Relay(instance))?;
    }
    processes.add(Kind::Producer)?;
    let admin = connect(&databases.producer_admin_url(), 1).await?;
    let started = Instant::now();
    say(&format!(
        "chaos for {:?}: {} orders at most, {} per second, over {} customers; seed {seed}",
        args.duration, plan.orders, plan.rate, plan.customers
    ));
    let faults = chaos::Faults {
        broker_restarts: !args.no_broker_restarts,
        consumer_pauses: plan.partitions > 0 && plan.broker != Broker::Kafka,
    };
    // Kafka's partitions follow the group's assignment, not leases: nothing to watch.
    let takeovers = Takeovers::new(if plan.partitions > 0 && plan.broker != Broker::Kafka {
        Some(connect(&plan.mariadb_url, 2).await?)
    } else {
        None
    });
    let window = chaos::Window {
        until: started + args.duration,
        seed,
        faults,
    };
    let counts = chaos::run(
        window,
        processes,
        broker,
        &admin,
        databases.name(),
        &takeovers,
    )
    .await?;
    let chaos_time = started.elapsed();
    admin.close().await?;

    // The producer stops where it is; everything else runs until quiet.
    processes.kill(Kind::Producer).await?;
    if !broker.is_running() {
        broker.restart().await?;
    }
    processes.reap()?;
    say("chaos over; waiting until quiet");
    let producer = connect(&plan.producer_url, 2).await?;
    let consumer = connect(&plan.mariadb_url, 2).await?;
    let quiet = {
        let waiting = verify::quiesce(&producer, &consumer, plan.relay, args.quiesce_timeout);
        tokio::pin!(waiting);
        // Children that die now are started again, too.
        loop {
            tokio::select! {
                quiet = &mut waiting => break quiet?,
                () = tokio::time::sleep(Duration::from_millis(200)) => processes.reap()?,
            }
        }
    };
    // Late duplicates, if any, show up meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let verdict = verify::verify(
        &producer,
        &consumer,
        plan.relay,
        &outbox_seaorm::inbox::dead_letter::table(&Outbox::default()).to_string(),
    )
    .await?;
    producer.close().await?;
    consumer.close().await?;
    let mut report = Report::new(
        args.broker.name(),
        plan.relay.name(),
        faults,
        seed,
        chaos_time,
        quiet,
        counts,
        processes.unexpected_exits,
        verdict,
    );
    if plan.partitions > 0 {
        report.partitioned = Some(Partitioned {
            partitions: plan.partitions,
            consumers: plan.shares,
            takeovers: (plan.broker != Broker::Kafka).then(|| takeovers.stats()),
        });
    }
    Ok(report)
}

/// A line on standard output (the report is the binary's output; logs go to stderr).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}
