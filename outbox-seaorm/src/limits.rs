//! How much of a text from outside is stored: every column that takes bytes a broker, a
//! handler or an operator produced is bounded here before it is written, so that a row —
//! above all a dead letter — can always be written (MariaDB refuses a `text` value over
//! 64 KiB and a statement over `max_allowed_packet`, 16 MiB by default).

/// The longest error text kept (`last_error`, a dead letter's `error`), in characters; a
/// longer one keeps its start and ends with `…`.
pub const MAX_ERROR_CHARS: usize = 2_000;

/// The longest operator name (`--actor`) accepted, in characters (a `varchar(255)` column).
pub const MAX_ACTOR_CHARS: usize = 255;

/// The longest operator reason (`--reason`) accepted, in characters.
pub const MAX_REASON_CHARS: usize = 2_000;

/// The largest message body a consumer dead letter stores whole, in bytes: a larger body
/// is stored as its first `MAX_STORED_BODY_BYTES` bytes, with its full size and SHA-256
/// digest (see [`RawMessage`](crate::inbox::dead_letter::RawMessage)).
pub const MAX_STORED_BODY_BYTES: usize = 256 * 1024;

/// The most transport headers a consumer dead letter stores; the rest are counted.
pub const MAX_STORED_HEADERS: usize = 64;

/// The longest header name or value a consumer dead letter stores, in bytes; a longer one
/// keeps its start and ends with `…`.
pub const MAX_STORED_HEADER_BYTES: usize = 1_024;

/// The latest due time a scheduled row may have: the end of year 9999, the last instant
/// every backend's timestamp column holds (MariaDB's `datetime(6)`, SQLite's fixed-width
/// text). A later one is refused at commit.
pub const MAX_DUE: chrono::DateTime<chrono::Utc> = {
    match chrono::NaiveDate::from_ymd_opt(9999, 12, 31) {
        Some(date) => match date.and_hms_micro_opt(23, 59, 59, 999_999) {
            Some(at) => at.and_utc(),
            None => chrono::DateTime::<chrono::Utc>::MIN_UTC,
        },
        None => chrono::DateTime::<chrono::Utc>::MIN_UTC,
    }
};

/// `text` cut to at most `max` characters, ending with `…` when it was cut.
pub(crate) fn chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// An error text as stored: at most [`MAX_ERROR_CHARS`] characters.
pub(crate) fn error_text(text: &str) -> String {
    chars(text, MAX_ERROR_CHARS)
}

/// The longest prefix of `text` that is at most `max` bytes and ends on a character
/// boundary.
pub(crate) fn byte_prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// `text` cut to at most `max` bytes (on a character boundary), ending with `…` when it
/// was cut.
pub(crate) fn bytes(text: &str, max: usize) -> String {
    let prefix = byte_prefix(text, max);
    if prefix.len() == text.len() {
        text.to_owned()
    } else {
        format!("{prefix}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_on_character_boundaries() {
        assert_eq!(chars("short", 10), "short");
        assert_eq!(chars("çççç", 2), "çç…");
        assert_eq!(
            error_text(&"x".repeat(5_000)).chars().count(),
            MAX_ERROR_CHARS + 1
        );
        assert_eq!(byte_prefix("aç", 2), "a", "ç is two bytes");
        assert_eq!(byte_prefix("aç", 3), "aç");
        assert_eq!(bytes("abcdef", 3), "abc…");
        assert_eq!(bytes("abc", 3), "abc");
    }
}
