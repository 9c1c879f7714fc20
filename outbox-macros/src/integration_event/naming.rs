//! The names a contract declares: its event type and its aggregate type.
//!
//! Both follow the grammar of the `outbox-names` crate, which `outbox-kernel` applies at run
//! time: an event type is checked with [`EventType::parse`], an aggregate type must be one
//! segment of that grammar.

use proc_macro2::Span;
use syn::LitStr;

use outbox_names::{EventType, EventTypeError};

/// A valid versioned event type, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventTypeParts {
    /// The whole event type, e.g. `bookstore.ordering.order-placed.v1`.
    pub(crate) full: String,
    /// Without the version segment, e.g. `bookstore.ordering.order-placed`.
    pub(crate) name: String,
    /// The version, e.g. `1`.
    pub(crate) version: u32,
}

/// Validates `name = "..."`.
///
/// # Errors
/// On the literal, saying which rule of the grammar is broken and stating the grammar.
pub(crate) fn event_type(lit: &LitStr) -> syn::Result<EventTypeParts> {
    let value = lit.value();
    match EventType::parse(&value) {
        Ok(parsed) => Ok(EventTypeParts {
            full: parsed.as_str().to_owned(),
            name: parsed.name().to_owned(),
            version: parsed.version(),
        }),
        Err(error) => Err(syn::Error::new(
            lit.span(),
            format!("invalid event type `{value}`: {error}"),
        )),
    }
}

/// Why `value` is not a valid aggregate type (one lowercase kebab-case segment of the
/// event-type grammar), or `None` when it is valid.
pub(crate) fn aggregate_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some("is empty".to_owned());
    }
    if value.contains('.') {
        return Some("must be a single segment, without dots".to_owned());
    }
    // Reuse the segment rule of the grammar: the aggregate type in first position of an
    // otherwise valid event type. Without dots, it is the only segment that can be wrong.
    match EventType::parse(&format!("{value}.aggregate.check.v1")) {
        Ok(_) => None,
        Err(EventTypeError::InvalidSegment { reason, .. }) => Some(reason.to_owned()),
        Err(other) => Some(other.to_string()),
    }
}

/// The rule stated in aggregate-type errors.
const AGGREGATE_RULE: &str = "an aggregate type is one lowercase kebab-case segment: a \
lowercase ASCII letter, then lowercase letters, digits and single hyphens, not ending with a \
hyphen, e.g. `order` or `book-copy`";

/// Validates `aggregate = "..."`.
///
/// # Errors
/// On the literal, saying what is wrong.
pub(crate) fn aggregate_override(lit: &LitStr) -> syn::Result<String> {
    let value = lit.value();
    match aggregate_problem(&value) {
        None => Ok(value),
        Some(problem) => Err(syn::Error::new(
            lit.span(),
            format!("invalid aggregate type `{value}`: it {problem}; {AGGREGATE_RULE}"),
        )),
    }
}

/// The aggregate type derived from the key field's name: without a trailing `_id`, with
/// underscores turned into hyphens (`order_id` → `order`, `book_copy_id` → `book-copy`,
/// `isbn` → `isbn`). A field named just `id` stays `id`.
pub(crate) fn default_aggregate(key_field: &str) -> String {
    key_field
        .strip_suffix("_id")
        .filter(|stem| !stem.is_empty())
        .unwrap_or(key_field)
        .replace('_', "-")
}

/// The default aggregate type of `key_field`, validated.
///
/// # Errors
/// At `span` (the key), when the derived name is not a valid aggregate type, asking for an
/// explicit `aggregate = "..."`.
pub(crate) fn default_aggregate_checked(key_field: &str, span: Span) -> syn::Result<String> {
    let derived = default_aggregate(key_field);
    match aggregate_problem(&derived) {
        None => Ok(derived),
        Some(problem) => Err(syn::Error::new(
            span,
            format!(
                "cannot derive the aggregate type from the key field `{key_field}`: `{derived}` \
                 {problem}; {AGGREGATE_RULE}. Set it explicitly with `aggregate = \"...\"`"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_aggregate_strips_id_and_kebab_cases() {
        for (key, aggregate) in [
            ("order_id", "order"),
            ("book_copy_id", "book-copy"),
            ("isbn", "isbn"),
            ("id", "id"),
            ("customer", "customer"),
            ("shipment_line_id", "shipment-line"),
            ("identity", "identity"),
            ("order_ids", "order-ids"),
            ("_id", "-id"),
        ] {
            assert_eq!(default_aggregate(key), aggregate, "key field `{key}`");
        }
    }

    #[test]
    fn default_aggregate_is_validated() {
        let span = Span::call_site();
        assert_eq!(
            default_aggregate_checked("book_copy_id", span).unwrap(),
            "book-copy"
        );
        for key in [
            "orderId",
            "_id",
            "order__id",
            "_order_id",
            "order2_",
            "ord\u{e9}r_id",
        ] {
            let error = default_aggregate_checked(key, span).expect_err(key);
            let message = error.to_string();
            assert!(
                message.contains(&format!("key field `{key}`"))
                    && message.contains("Set it explicitly with `aggregate = \"...\"`"),
                "{key}: {message}"
            );
        }
    }

    #[test]
    fn aggregate_rule() {
        for valid in ["order", "book-copy", "a1", "x-2-y"] {
            assert_eq!(aggregate_problem(valid), None, "{valid}");
        }
        for (invalid, problem) in [
            ("", "is empty"),
            ("Order", "must start with a lowercase ASCII letter"),
            ("1order", "must start with a lowercase ASCII letter"),
            (
                "book_copy",
                "may hold only lowercase ASCII letters, digits and hyphens",
            ),
            (
                "bookCopy",
                "may hold only lowercase ASCII letters, digits and hyphens",
            ),
            ("order-", "must not end with a hyphen"),
            ("book--copy", "must not contain two hyphens in a row"),
            ("ordering.order", "must be a single segment, without dots"),
        ] {
            assert_eq!(
                aggregate_problem(invalid).as_deref(),
                Some(problem),
                "{invalid:?}"
            );
        }
    }

    #[test]
    fn event_type_parts() {
        let lit = LitStr::new("bookstore.ordering.order-placed.v12", Span::call_site());
        assert_eq!(
            event_type(&lit).unwrap(),
            EventTypeParts {
                full: "bookstore.ordering.order-placed.v12".to_owned(),
                name: "bookstore.ordering.order-placed".to_owned(),
                version: 12,
            }
        );
        let lit = LitStr::new("Bookstore.Ordering.OrderPlaced", Span::call_site());
        let message = event_type(&lit).unwrap_err().to_string();
        assert!(
            message.starts_with("invalid event type `Bookstore.Ordering.OrderPlaced`: "),
            "{message}"
        );
        assert!(message.contains(outbox_names::GRAMMAR), "{message}");
    }
}
