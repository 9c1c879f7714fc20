//! The byte layout of a fuzzed broker message: header lines, an empty line, the body — the
//! way a message is written down, so that corpus files read like messages.
//!
//! ```text
//! ce-specversion: 1.0
//! ce-id: 01936f0e-0000-7000-8000-000000000000
//!
//! {"order_id": "…"}
//! ```

/// A broker message: header names (text) and values (any bytes), and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Header names and values, in order (duplicates kept).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Message {
    /// Splits `data` at its first empty line (`\n\n`): the lines before it are headers
    /// (`name: value`, the name up to the first `:`, one space after it dropped; a line
    /// without `:` is a name with an empty value), the rest is the body. Without an empty
    /// line, everything is headers and the body is empty.
    pub fn parse(data: &[u8]) -> Self {
        let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
            Some(at) => (&data[..at], &data[at + 2..]),
            None => (data, &[][..]),
        };
        let headers = head
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| {
                let (name, value) = match line.iter().position(|b| *b == b':') {
                    Some(at) => (&line[..at], &line[at + 1..]),
                    None => (line, &[][..]),
                };
                let value = value.strip_prefix(b" ").unwrap_or(value);
                (String::from_utf8_lossy(name).into_owned(), value.to_vec())
            })
            .collect();
        Self {
            headers,
            body: body.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_then_an_empty_line_then_the_body() {
        let message = Message::parse(b"ce-id: 1\nx-a:b\nflag\n\n{\"a\":\n\n1}");
        assert_eq!(
            message.headers,
            [
                ("ce-id".to_owned(), b"1".to_vec()),
                ("x-a".to_owned(), b"b".to_vec()),
                ("flag".to_owned(), Vec::new()),
            ]
        );
        assert_eq!(message.body, b"{\"a\":\n\n1}");
        assert_eq!(Message::parse(b"a: 1").body, b"");
    }
}
