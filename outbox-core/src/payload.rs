//! The [`Payload`] of an envelope: the contract as JSON text, validated once and then carried
//! as it is.
//!
//! A relay reads the payload from the outbox table and hands it to the broker as the message
//! body; a consumer reads the body and decodes the contract from it. None of them needs the
//! JSON as a tree, so a payload keeps the text: it is checked to be one JSON value when it is
//! built ([`Payload::from_json`], [`Payload::from_slice`]) and then copied, never parsed and
//! serialized again. Decoding a contract ([`Envelope::decode`](crate::Envelope::decode))
//! reads the text directly; [`Payload::to_value`] builds a [`serde_json::Value`] for code
//! that wants to look inside.
//!
//! The text is the producer's serialization, or the database's when it stores JSON in its own
//! form (PostgreSQL `jsonb` orders an object's keys by length and writes `": "` and `", "`).
//! Two payloads are equal when they hold the same JSON value, whatever the spacing and key
//! order of their texts.
//!
//! ```
//! use outbox_kernel::Payload;
//! use serde_json::json;
//!
//! let payload = Payload::from_json(r#"{"book_id": "dune", "quantity": 2}"#)?;
//! assert_eq!(payload.get(), r#"{"book_id": "dune", "quantity": 2}"#);
//! assert_eq!(payload.to_value()?["quantity"], 2);
//! assert_eq!(payload, Payload::from(json!({"quantity": 2, "book_id": "dune"})));
//!
//! assert!(Payload::from_json("{\"book_id\": ").is_err());
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A contract serialized as JSON: one valid JSON value, held as text. See the
/// [module documentation](self).
#[derive(Clone)]
pub struct Payload(Box<RawValue>);

impl Payload {
    /// Takes JSON text, checking that it is exactly one JSON value (surrounding whitespace
    /// is kept).
    ///
    /// # Errors
    /// The parser's error, with line and column, when `json` is not one JSON value.
    pub fn from_json(json: impl Into<String>) -> Result<Self, serde_json::Error> {
        RawValue::from_string(json.into()).map(Self)
    }

    /// Takes JSON bytes (a message body, a database column), checking that they are UTF-8
    /// and exactly one JSON value.
    ///
    /// # Errors
    /// The parser's error when `bytes` are not one JSON value.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice::<&RawValue>(bytes).map(|raw| Self(raw.to_owned()))
    }

    /// Serializes `value` as compact JSON.
    ///
    /// # Errors
    /// The serializer's error (a map with non-string keys, a failing `Serialize` impl).
    pub fn serialize_from<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The JSON text as bytes (a message body).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.get().as_bytes()
    }

    /// The length of the JSON text in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Always `false`: a JSON value is never empty text. (For symmetry with [`len`](Self::len).)
    pub fn is_empty(&self) -> bool {
        self.0.get().is_empty()
    }

    /// Parses the text into a [`serde_json::Value`] tree.
    ///
    /// # Errors
    /// Only on a number that a `Value` cannot represent; the text itself is valid.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// Deserializes the text as `T` (plain serde, no event type check: see
    /// [`Envelope::decode`](crate::Envelope::decode) for contracts).
    ///
    /// # Errors
    /// The deserializer's error.
    pub fn deserialize_as<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// Turns the payload into its boxed JSON text.
    pub fn into_string(self) -> String {
        String::from(Box::<str>::from(self.0))
    }
}

impl From<serde_json::Value> for Payload {
    fn from(value: serde_json::Value) -> Self {
        Self::from(&value)
    }
}

impl From<&serde_json::Value> for Payload {
    fn from(value: &serde_json::Value) -> Self {
        // A `Value` always serializes: its map keys are strings.
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => Self(raw),
            Err(_) => Self::null(),
        }
    }
}

impl Payload {
    /// The JSON `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }
}

impl Default for Payload {
    /// The JSON `null`.
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for Payload {
    /// The same JSON value: equal texts, or texts that parse to equal [`serde_json::Value`]s
    /// (spacing and object key order do not count).
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
            || matches!((self.to_value(), other.to_value()), (Ok(a), Ok(b)) if a == b)
    }
}

impl PartialEq<serde_json::Value> for Payload {
    fn eq(&self, other: &serde_json::Value) -> bool {
        self.to_value().is_ok_and(|value| value == *other)
    }
}

impl PartialEq<Payload> for serde_json::Value {
    fn eq(&self, other: &Payload) -> bool {
        other == self
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Payload").field(&self.get()).finish()
    }
}

impl fmt::Display for Payload {
    /// The JSON text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for Payload {
    /// Inline, as the JSON value it holds.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Payload {
    /// Any JSON value, kept as text. Only `serde_json` deserializers can hand over the text.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_text_it_was_given() {
        let text = r#"{"b": 1, "a": [true, null]}"#;
        let payload = Payload::from_json(text).expect("valid");
        assert_eq!(payload.get(), text);
        assert_eq!(payload.len(), text.len());
        assert_eq!(payload.as_bytes(), text.as_bytes());
        assert_eq!(payload.to_string(), text);
        assert_eq!(payload.clone().into_string(), text);
    }

    #[test]
    fn rejects_what_is_not_one_json_value() {
        for bad in ["", "{", "{} {}", "nul", "{\"a\": 1,}", "'a'"] {
            assert!(Payload::from_json(bad).is_err(), "{bad:?} accepted");
            assert!(
                Payload::from_slice(bad.as_bytes()).is_err(),
                "{bad:?} accepted"
            );
        }
        assert!(
            Payload::from_slice(b"\"\xff\"").is_err(),
            "invalid UTF-8 accepted"
        );
    }

    #[test]
    fn equal_when_the_json_value_is_equal() {
        let compact = Payload::from(json!({"a": 1, "b": [1, 2]}));
        assert_eq!(compact.get(), r#"{"a":1,"b":[1,2]}"#);
        let spaced = Payload::from_json(r#"{"b": [1, 2], "a": 1}"#).expect("valid");
        assert_eq!(compact, spaced);
        assert_eq!(compact, json!({"b": [1, 2], "a": 1}));
        assert_ne!(compact, Payload::from(json!({"a": 2, "b": [1, 2]})));
        assert_eq!(Payload::default(), json!(null));
    }

    #[test]
    fn serializes_inline_and_round_trips() {
        let payload = Payload::from_json(r#"{"x": "y"}"#).expect("valid");
        let wrapped =
            serde_json::to_string(&json!({"payload": payload.to_value().expect("value")}))
                .expect("serialize");
        #[derive(Serialize, Deserialize)]
        struct Wrapper {
            payload: Payload,
        }
        let direct = serde_json::to_string(&Wrapper { payload }).expect("serialize");
        assert_eq!(direct, r#"{"payload":{"x": "y"}}"#);
        let back: Wrapper = serde_json::from_str(&wrapped).expect("deserialize");
        assert_eq!(back.payload.get(), r#"{"x":"y"}"#);
    }
}
