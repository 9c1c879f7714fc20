//! `[relay.broker]`: where a relay publishes, with the settings of `outbox-brokers`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::broker_kind::BrokerKind;
use super::env::Overrides;
use super::file::FileBroker;
use super::problem::Problems;
use super::route::{RouteSettings, check_route};
use super::secret::Secret;
use super::stream::{StreamSettings, check_stream};
use super::value::{choice, positive_duration};

/// The broker of one relay.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerSettings {
    /// Which broker.
    pub kind: BrokerKind,
    /// Its URL (Kafka: the bootstrap servers).
    pub url: Secret,
    /// Where each event goes.
    pub route: RouteSettings,
    /// RabbitMQ: the exchange.
    pub exchange: Option<String>,
    /// NATS: the stream to ensure.
    pub stream: Option<StreamSettings>,
    /// How long the broker may take to confirm a message (NATS ack, RabbitMQ confirm,
    /// Kafka delivery).
    pub ack_timeout: Option<Duration>,
    /// Kafka: librdkafka producer properties.
    pub options: BTreeMap<String, String>,
    /// Redis: the approximate `MAXLEN` of each stream.
    pub max_len: Option<usize>,
}

/// Checks `relay[i].broker` (at `path`).
pub(crate) fn check(
    file: Option<&FileBroker>,
    path: &str,
    overrides: &Overrides,
    problems: &mut Problems,
) -> Option<BrokerSettings> {
    let Some(file) = file else {
        problems.add(
            path,
            "missing: the broker to publish to ([relay.broker] with `kind` and `url`)",
        );
        return None;
    };
    let before = problems.len();
    let kind = match &file.kind {
        Some(text) => choice(
            problems,
            &format!("{path}.kind"),
            text,
            &[
                ("nats", BrokerKind::Nats),
                ("rabbitmq", BrokerKind::RabbitMq),
                ("kafka", BrokerKind::Kafka),
                ("redis", BrokerKind::Redis),
            ],
        ),
        None => {
            problems.add(
                format!("{path}.kind"),
                "missing: `nats`, `rabbitmq`, `kafka` or `redis`",
            );
            None
        }
    }?;
    if !kind.compiled() {
        problems.add(
            format!("{path}.kind"),
            format!(
                "this build has no `{0}` client (cargo feature `{0}` of outbox-server)",
                kind.as_str()
            ),
        );
    }
    let at = overrides.at(&format!("{path}.url"));
    let url = match &file.url {
        Some(url) => {
            if let Some(problem) = url_problem(kind, url) {
                problems.add(at.name(), problem);
            }
            Some(Secret::new(url.clone()))
        }
        None => {
            problems.add(
                at.name(),
                "missing: the broker's URL (or OUTBOX_RELAY_<NAME>_BROKER_URL)",
            );
            None
        }
    };
    let route = check_route(
        file.route.as_ref(),
        kind,
        &format!("{path}.route"),
        problems,
    );
    let only = |problems: &mut Problems, key: &str, present: bool, broker: BrokerKind| {
        if present && kind != broker {
            problems.add(
                format!("{path}.{key}"),
                format!("only for `kind = \"{}\"`", broker.as_str()),
            );
        }
    };
    only(
        problems,
        "exchange",
        file.exchange.is_some(),
        BrokerKind::RabbitMq,
    );
    only(problems, "stream", file.stream.is_some(), BrokerKind::Nats);
    only(
        problems,
        "options",
        file.options.is_some(),
        BrokerKind::Kafka,
    );
    only(
        problems,
        "max_len",
        file.max_len.is_some(),
        BrokerKind::Redis,
    );
    if kind == BrokerKind::RabbitMq {
        match &file.exchange {
            Some(exchange) if exchange.is_empty() => problems.add(
                format!("{path}.exchange"),
                "empty: RabbitMQ's default exchange routes by queue name; name the exchange",
            ),
            Some(_) => {}
            None => problems.add(
                format!("{path}.exchange"),
                "missing: the exchange to publish to",
            ),
        }
    }
    let stream = file
        .stream
        .as_ref()
        .and_then(|stream| check_stream(stream, &format!("{path}.stream"), problems));
    let ack_timeout = file
        .ack_timeout
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.ack_timeout"), text));
    if file.max_len == Some(0) {
        problems.add(format!("{path}.max_len"), "must be at least 1");
    }
    if problems.len() > before {
        return None;
    }
    Some(BrokerSettings {
        kind,
        url: url?,
        route: route?,
        exchange: file.exchange.clone(),
        stream,
        ack_timeout,
        options: file.options.clone().unwrap_or_default(),
        max_len: file.max_len,
    })
}

/// What is wrong with `url` for `kind`, if anything.
fn url_problem(kind: BrokerKind, url: &str) -> Option<String> {
    if kind == BrokerKind::Kafka {
        let bad: Vec<&str> = url
            .split(',')
            .map(str::trim)
            .filter(|server| {
                server
                    .rsplit_once(':')
                    .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
            })
            .collect();
        return (!bad.is_empty()).then(|| {
            format!(
                "`{}` is not a list of Kafka bootstrap servers (`host:9092,host:9092`)",
                super::secret::redacted_url(url)
            )
        });
    }
    let schemes: &[&str] = match kind {
        BrokerKind::Nats => &["nats", "tls"],
        BrokerKind::RabbitMq => &["amqp", "amqps"],
        BrokerKind::Redis => &["redis", "rediss"],
        BrokerKind::Kafka => &[],
    };
    match url::Url::parse(url) {
        Ok(parsed) if schemes.contains(&parsed.scheme()) && parsed.host().is_some() => None,
        Ok(parsed) if schemes.contains(&parsed.scheme()) => Some("has no host".to_owned()),
        Ok(parsed) => Some(format!(
            "scheme `{}` is not one of {} for `kind = \"{}\"`",
            parsed.scheme(),
            schemes
                .iter()
                .map(|s| format!("`{s}://`"))
                .collect::<Vec<_>>()
                .join(", "),
            kind.as_str()
        )),
        Err(error) => Some(format!(
            "`{}` is not a URL ({error})",
            super::secret::redacted_url(url)
        )),
    }
}
