//! [`Secret`]: a value that never shows in logs or debug output.

use std::fmt;

/// A token or a URL with a password: `Debug` and `Display` print `***`; the value is read
/// with [`Secret::expose`] where it is used.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// `url` with its password, if any, replaced by `***`: what logs and pages show of a
/// database or broker URL.
pub fn redacted_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Setting a password fails only on URLs that cannot have one.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        // Kafka's bootstrap list is not a URL and carries no password.
        Err(_) => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_passwords_do_not_show() {
        let token = Secret::new("s3cr3t-t0ken");
        assert_eq!(format!("{token:?} {token}"), "Secret(***) ***");
        assert_eq!(
            redacted_url("postgres://app:hunter2@db:5432/orders"),
            "postgres://app:***@db:5432/orders"
        );
        assert_eq!(
            redacted_url("nats://127.0.0.1:4222"),
            "nats://127.0.0.1:4222"
        );
        assert_eq!(redacted_url("k1:9092,k2:9092"), "k1:9092,k2:9092");
    }
}
