//! The names of the outbox framework: versioned event types (e.g.
//! `bookstore.ordering.order-placed.v1`), consumer names and worker keys.
//!
//! An event type is at least three lowercase kebab-case segments separated by dots (the
//! name), then a final `v<N>` segment with `N ≥ 1` and no leading zero (the version). A
//! kebab-case segment starts with a lowercase ASCII letter, holds lowercase letters, digits
//! and single hyphens, and does not end with a hyphen.
//!
//! This crate is the one statement of the grammar: `outbox-macros` applies it at compile
//! time (`#[derive(IntegrationEvent)]`, `#[inbox_handler]`) and `outbox-core` at run time, to
//! names read from a broker or a table, so both sides agree. Use it through
//! `outbox_core::name`, which re-exports it.
//!
//! ```
//! use outbox_names::EventType;
//!
//! let parsed = EventType::parse("bookstore.ordering.order-placed.v1")?;
//! assert_eq!(parsed.name(), "bookstore.ordering.order-placed");
//! assert_eq!(parsed.version(), 1);
//! assert!(EventType::parse("Bookstore.Ordering.OrderPlaced").is_err());
//! # Ok::<(), outbox_names::EventTypeError>(())
//! ```

use std::fmt;

/// The grammar, as stated in error messages.
pub const GRAMMAR: &str = "an event type is at least three lowercase kebab-case segments \
separated by dots, then a version segment `v<N>` (N >= 1, no leading zero), \
e.g. `bookstore.ordering.order-placed.v1`";

/// Minimum number of name segments before the version.
pub const MIN_NAME_SEGMENTS: usize = 3;

/// A parsed, valid event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventType<'a> {
    full: &'a str,
    name_len: usize,
    version: u32,
}

/// Why a string is not a valid event type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventTypeError {
    /// The string is empty.
    Empty,
    /// Fewer than [`MIN_NAME_SEGMENTS`] name segments before the version.
    TooFewSegments {
        /// How many name segments were found.
        found: usize,
    },
    /// A name segment is not lowercase kebab-case.
    InvalidSegment {
        /// The offending segment.
        segment: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The last segment is not `v<N>` with `N ≥ 1` and no leading zero.
    InvalidVersion {
        /// The offending segment.
        segment: String,
    },
}

impl fmt::Display for EventTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the event type is empty; {GRAMMAR}"),
            Self::TooFewSegments { found } => write!(
                f,
                "the event type has {found} name segment(s) before the version, at least \
                 {MIN_NAME_SEGMENTS} are required; {GRAMMAR}"
            ),
            Self::InvalidSegment { segment, reason } => {
                write!(f, "segment `{segment}` {reason}; {GRAMMAR}")
            }
            Self::InvalidVersion { segment } => write!(
                f,
                "the last segment `{segment}` is not a version `v<N>` (N >= 1, no leading \
                 zero); {GRAMMAR}"
            ),
        }
    }
}

impl std::error::Error for EventTypeError {}

fn check_segment(segment: &str) -> Result<(), EventTypeError> {
    let fail = |reason: &'static str| {
        Err(EventTypeError::InvalidSegment {
            segment: segment.to_owned(),
            reason,
        })
    };
    let Some(first) = segment.chars().next() else {
        return fail("is empty (two dots in a row, or a leading or trailing dot)");
    };
    if !first.is_ascii_lowercase() {
        return fail("must start with a lowercase ASCII letter");
    }
    if segment.ends_with('-') {
        return fail("must not end with a hyphen");
    }
    if segment.contains("--") {
        return fail("must not contain two hyphens in a row");
    }
    if segment
        .chars()
        .any(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    {
        return fail("may hold only lowercase ASCII letters, digits and hyphens");
    }
    Ok(())
}

fn parse_version(segment: &str) -> Option<u32> {
    let digits = segment.strip_prefix('v')?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl<'a> EventType<'a> {
    /// Parses and validates an event type.
    ///
    /// # Errors
    /// An [`EventTypeError`] saying which rule of the grammar is broken.
    pub fn parse(full: &'a str) -> Result<Self, EventTypeError> {
        if full.is_empty() {
            return Err(EventTypeError::Empty);
        }
        let (name, version_segment) = match full.rsplit_once('.') {
            Some(split) => split,
            None => ("", full),
        };
        let version =
            parse_version(version_segment).ok_or_else(|| EventTypeError::InvalidVersion {
                segment: version_segment.to_owned(),
            })?;
        let segments: Vec<&str> = if name.is_empty() {
            Vec::new()
        } else {
            name.split('.').collect()
        };
        for segment in &segments {
            check_segment(segment)?;
        }
        if segments.len() < MIN_NAME_SEGMENTS {
            return Err(EventTypeError::TooFewSegments {
                found: segments.len(),
            });
        }
        Ok(Self {
            full,
            name_len: name.len(),
            version,
        })
    }

    /// The whole event type.
    pub fn as_str(&self) -> &'a str {
        self.full
    }

    /// The name: everything before the version segment.
    pub fn name(&self) -> &'a str {
        &self.full[..self.name_len]
    }

    /// The version number.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The segments of the name that precede the event's own name (the bounded context),
    /// e.g. `bookstore.ordering` for `bookstore.ordering.order-placed.v1`.
    pub fn context(&self) -> &'a str {
        let name = self.name();
        name.rsplit_once('.').map_or(name, |(context, _)| context)
    }
}

impl fmt::Display for EventType<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.full)
    }
}

/// The grammar of consumer names, as stated in error messages.
pub const CONSUMER_GRAMMAR: &str = "a consumer name is one or more lowercase kebab-case \
segments separated by dots, at most 255 characters, e.g. `inventory.reserve-stock`";

/// Longest consumer name, in characters (the inbox `consumer` column is `varchar(255)`).
pub const MAX_CONSUMER_CHARS: usize = 255;

/// Why a string is not a valid consumer name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumerNameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_CONSUMER_CHARS`].
    TooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// A segment is not lowercase kebab-case.
    InvalidSegment {
        /// The offending segment.
        segment: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl fmt::Display for ConsumerNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the consumer name is empty; {CONSUMER_GRAMMAR}"),
            Self::TooLong { chars } => write!(
                f,
                "the consumer name has {chars} characters, at most {MAX_CONSUMER_CHARS} are \
                 allowed; {CONSUMER_GRAMMAR}"
            ),
            Self::InvalidSegment { segment, reason } => {
                write!(f, "segment `{segment}` {reason}; {CONSUMER_GRAMMAR}")
            }
        }
    }
}

impl std::error::Error for ConsumerNameError {}

/// Checks a consumer name (the inbox's dedup scope, e.g. `inventory.reserve-stock`): one or
/// more lowercase kebab-case segments separated by dots, at most [`MAX_CONSUMER_CHARS`]
/// characters. `#[inbox_handler]` applies it at compile time, the consumer at run time.
///
/// # Errors
/// A [`ConsumerNameError`] saying which rule is broken.
pub fn check_consumer_name(name: &str) -> Result<(), ConsumerNameError> {
    if name.is_empty() {
        return Err(ConsumerNameError::Empty);
    }
    let chars = name.chars().count();
    if chars > MAX_CONSUMER_CHARS {
        return Err(ConsumerNameError::TooLong { chars });
    }
    for segment in name.split('.') {
        if let Err(EventTypeError::InvalidSegment { segment, reason }) = check_segment(segment) {
            return Err(ConsumerNameError::InvalidSegment { segment, reason });
        }
    }
    Ok(())
}

/// The grammar of worker keys, as stated in error messages.
pub const WORKER_KEY_GRAMMAR: &str = "a worker key is 1 to 100 characters: lowercase ASCII \
letters, digits, `.`, `-` and `_`, starting with a letter or a digit, e.g. `payments` or \
`notifications.email`";

/// Longest worker key, in characters (the outbox `worker_key` column is `varchar(100)`).
pub const MAX_WORKER_KEY_CHARS: usize = 100;

/// Why a string is not a valid worker key.
///
/// A worker key routes an outbox row to the relays that may claim it (job-queue mode, see
/// `outbox_seaorm::job`): `[a-z0-9][a-z0-9._-]*`, at most [`MAX_WORKER_KEY_CHARS`]
/// characters. The grammar is deliberately narrow so that a key reads the same in a
/// configuration file, a lease name, a metric label and a SQL literal.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerKeyError {
    /// The key is empty.
    Empty,
    /// The key is longer than [`MAX_WORKER_KEY_CHARS`].
    TooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// The first character is not a lowercase ASCII letter or a digit.
    InvalidStart {
        /// The character found.
        character: char,
    },
    /// A character other than a lowercase ASCII letter, a digit, `.`, `-` or `_`.
    InvalidCharacter {
        /// The character found.
        character: char,
        /// Its position (in characters).
        position: usize,
    },
}

impl fmt::Display for WorkerKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the worker key is empty; {WORKER_KEY_GRAMMAR}"),
            Self::TooLong { chars } => write!(
                f,
                "the worker key has {chars} characters, at most {MAX_WORKER_KEY_CHARS} are \
                 allowed; {WORKER_KEY_GRAMMAR}"
            ),
            Self::InvalidStart { character } => write!(
                f,
                "the worker key starts with {character:?}; {WORKER_KEY_GRAMMAR}"
            ),
            Self::InvalidCharacter {
                character,
                position,
            } => write!(
                f,
                "character {character:?} at position {position} of the worker key; \
                 {WORKER_KEY_GRAMMAR}"
            ),
        }
    }
}

impl std::error::Error for WorkerKeyError {}

/// Checks a worker key (job-queue mode): `[a-z0-9][a-z0-9._-]*`, 1 to
/// [`MAX_WORKER_KEY_CHARS`] characters.
///
/// ```
/// use outbox_names::{WorkerKeyError, check_worker_key};
///
/// assert_eq!(check_worker_key("payments"), Ok(()));
/// assert_eq!(check_worker_key("notifications.email_v2"), Ok(()));
/// assert!(matches!(check_worker_key("Payments"), Err(WorkerKeyError::InvalidStart { .. })));
/// assert!(matches!(check_worker_key("pay ments"), Err(WorkerKeyError::InvalidCharacter { .. })));
/// ```
///
/// # Errors
/// A [`WorkerKeyError`] saying which rule is broken.
pub fn check_worker_key(key: &str) -> Result<(), WorkerKeyError> {
    let mut chars = key.chars();
    let Some(first) = chars.next() else {
        return Err(WorkerKeyError::Empty);
    };
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Err(WorkerKeyError::InvalidStart { character: first });
    }
    for (index, character) in key.chars().enumerate().skip(1) {
        if !(character.is_ascii_lowercase()
            || character.is_ascii_digit()
            || matches!(character, '.' | '-' | '_'))
        {
            return Err(WorkerKeyError::InvalidCharacter {
                character,
                position: index,
            });
        }
    }
    // All ASCII from here on: bytes are characters.
    if key.len() > MAX_WORKER_KEY_CHARS {
        return Err(WorkerKeyError::TooLong { chars: key.len() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_names() {
        for ok in ["inventory", "inventory.reserve-stock", "a.b2.c-d"] {
            assert_eq!(check_consumer_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_consumer_name(""), Err(ConsumerNameError::Empty));
        for bad in [
            "Inventory",
            "inventory.",
            ".x",
            "a..b",
            "a b",
            "a.-b",
            "a_b",
            "a.b-",
        ] {
            assert!(
                matches!(
                    check_consumer_name(bad),
                    Err(ConsumerNameError::InvalidSegment { .. })
                ),
                "{bad}"
            );
        }
        let long = format!("a{}", ".b".repeat(200));
        assert!(matches!(
            check_consumer_name(&long),
            Err(ConsumerNameError::TooLong { chars: 401 })
        ));
    }

    #[test]
    fn worker_keys() {
        for ok in [
            "payments",
            "notifications.email",
            "a",
            "0",
            "a-b_c.d9",
            &"k".repeat(100),
        ] {
            assert_eq!(check_worker_key(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_worker_key(""), Err(WorkerKeyError::Empty));
        assert_eq!(
            check_worker_key(&"k".repeat(101)),
            Err(WorkerKeyError::TooLong { chars: 101 })
        );
        for (bad, start) in [
            ("Payments", 'P'),
            ("-x", '-'),
            (".x", '.'),
            ("_x", '_'),
            (" x", ' '),
        ] {
            assert_eq!(
                check_worker_key(bad),
                Err(WorkerKeyError::InvalidStart { character: start }),
                "{bad}"
            );
        }
        for (bad, character, position) in [
            ("pay ments", ' ', 3),
            ("payMents", 'M', 3),
            ("pay'; --", '\'', 3),
            ("payé", 'é', 3),
            ("a/b", '/', 1),
            ("a,b", ',', 1),
        ] {
            assert_eq!(
                check_worker_key(bad),
                Err(WorkerKeyError::InvalidCharacter {
                    character,
                    position
                }),
                "{bad}"
            );
        }
        assert!(
            check_worker_key("X")
                .unwrap_err()
                .to_string()
                .contains(WORKER_KEY_GRAMMAR)
        );
    }

    #[test]
    fn accepts_valid_event_types() {
        for (input, name, version) in [
            (
                "bookstore.ordering.order-placed.v1",
                "bookstore.ordering.order-placed",
                1,
            ),
            ("a.b.c.v10", "a.b.c", 10),
            (
                "acme.billing.sub.invoice-2-paid.v3",
                "acme.billing.sub.invoice-2-paid",
                3,
            ),
            ("x1.y2.z3.v4294967295", "x1.y2.z3", u32::MAX),
        ] {
            let parsed = EventType::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(parsed.name(), name);
            assert_eq!(parsed.version(), version);
            assert_eq!(parsed.as_str(), input);
        }
        assert_eq!(
            EventType::parse("bookstore.ordering.order-placed.v1")
                .unwrap()
                .context(),
            "bookstore.ordering"
        );
    }

    #[test]
    fn rejects_each_rule() {
        type Check = fn(&EventTypeError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| matches!(e, EventTypeError::Empty)),
            (
                "Bookstore.Ordering.OrderPlaced",
                |e| matches!(e, EventTypeError::InvalidVersion { segment } if segment == "OrderPlaced"),
            ),
            (
                "Bookstore.ordering.order-placed.v1",
                |e| matches!(e, EventTypeError::InvalidSegment { segment, .. } if segment == "Bookstore"),
            ),
            (
                "bookstore.ordering.orderPlaced.v1",
                |e| matches!(e, EventTypeError::InvalidSegment { segment, .. } if segment == "orderPlaced"),
            ),
            ("bookstore.ordering.order_placed.v1", |e| {
                matches!(e, EventTypeError::InvalidSegment { .. })
            }),
            ("bookstore.ordering.-placed.v1", |e| {
                matches!(e, EventTypeError::InvalidSegment { .. })
            }),
            ("bookstore.ordering.placed-.v1", |e| {
                matches!(e, EventTypeError::InvalidSegment { .. })
            }),
            ("bookstore.ordering.order--placed.v1", |e| {
                matches!(e, EventTypeError::InvalidSegment { .. })
            }),
            (
                "bookstore..order-placed.v1",
                |e| matches!(e, EventTypeError::InvalidSegment { segment, .. } if segment.is_empty()),
            ),
            ("1bookstore.ordering.order-placed.v1", |e| {
                matches!(e, EventTypeError::InvalidSegment { .. })
            }),
            ("ordering.order-placed.v1", |e| {
                matches!(e, EventTypeError::TooFewSegments { found: 2 })
            }),
            ("v1", |e| {
                matches!(e, EventTypeError::TooFewSegments { found: 0 })
            }),
            ("bookstore.ordering.order-placed.v0", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.order-placed.v01", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.order-placed.V1", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.order-placed.v", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.order-placed.v1x", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.order-placed.v99999999999", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.order-placed.v1.", |e| {
                matches!(e, EventTypeError::InvalidVersion { .. })
            }),
            ("bookstore.ordering.ordér.v1", |e| {
                matches!(e, EventTypeError::InvalidSegment { .. })
            }),
        ];
        for (input, check) in cases {
            let err = EventType::parse(input).expect_err(input);
            assert!(check(&err), "{input}: unexpected {err:?}");
            assert!(err.to_string().contains(GRAMMAR), "{input}: {err}");
        }
    }
}
