//! An event type (`bookstore.ordering.order-placed.v1`) read by [`EventType::parse`]: what
//! a broker header, an envelope document or a baseline folder names, and what the macros
//! check at compile time.

use outbox_names::{EventType, MIN_NAME_SEGMENTS};

/// Parses `data` (when it is UTF-8) as an event type.
///
/// # Panics
/// When an accepted event type is not `<name>.v<N>` with `N ≥ 1`, at least
/// [`MIN_NAME_SEGMENTS`] lowercase kebab-case segments in the name and the context a
/// prefix of the name.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = EventType::parse(text) else {
        return;
    };
    assert_eq!(parsed.as_str(), text);
    assert!(parsed.version() >= 1);
    assert_eq!(format!("{}.v{}", parsed.name(), parsed.version()), text);
    let segments: Vec<&str> = parsed.name().split('.').collect();
    assert!(segments.len() >= MIN_NAME_SEGMENTS);
    for segment in &segments {
        assert!(
            segment.starts_with(|c: char| c.is_ascii_lowercase()),
            "{segment}"
        );
        assert!(
            !segment.ends_with('-') && !segment.contains("--"),
            "{segment}"
        );
        assert!(
            segment
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{segment}"
        );
    }
    let context = parsed.context();
    assert_eq!(
        format!("{context}.{}", segments[segments.len() - 1]),
        parsed.name()
    );
}
