//! Request bodies as JSON documents whose objects name each member once. `serde_json`
//! keeps the last of two members of one name, so `{"recipient":"a","recipient":"b"}`
//! would be read as `b` here while a proxy or a log reader in front of the API may read
//! `a`: the two would disagree about where a notification goes. Such a body is refused
//! instead (RFC 8259 leaves duplicate names to each reader; this one says no).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// Parses `bytes` as one JSON document in which no object repeats a member name.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(bytes).map(|strict| strict.0)
}

/// A [`Value`] read by [`StrictVisitor`].
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

/// Builds a [`Value`] as `serde_json`'s own visitor does, refusing a repeated name.
struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        // JSON text has no NaN or infinity; an overflowing literal is an error upstream.
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Strict::deserialize(deserializer).map(|strict| strict.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut array = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(Strict(item)) = items.next_element()? {
            array.push(item);
        }
        Ok(Value::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(name) = members.next_key::<String>()? {
            match object.entry(name) {
                Entry::Occupied(taken) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate member \"{}\" in an object",
                        taken.key()
                    )));
                }
                Entry::Vacant(place) => {
                    let Strict(value) = members.next_value()?;
                    place.insert(value);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads() {
        let text =
            r#"{"a":[1,-2,3.5,18446744073709551615,true,null,"x\u00e9"],"b":{"c":{}},"d":[]}"#;
        assert_eq!(
            parse(text.as_bytes()).expect("valid"),
            serde_json::from_str::<Value>(text).expect("valid")
        );
        assert_eq!(parse(b" 7 ").expect("a number"), json!(7));
    }

    #[test]
    fn refuses_a_member_named_twice_at_any_depth() {
        for text in [
            r#"{"recipient":"a@example.com","recipient":"b@example.com"}"#,
            r#"{"payload":{"x":1,"y":2,"x":1}}"#,
            r#"{"items":[{"k":1},{"k":1,"k":2}]}"#,
        ] {
            let error = parse(text.as_bytes()).expect_err(text);
            assert!(error.to_string().contains("duplicate member"), "{error}");
        }
        // The same name in different objects is fine.
        assert!(parse(br#"{"a":{"k":1},"b":{"k":1}}"#).is_ok());
    }

    #[test]
    fn refuses_what_is_not_one_json_document() {
        for text in ["", "{", "{} {}", "[1,]", "NaN", "1e999"] {
            assert!(parse(text.as_bytes()).is_err(), "{text}");
        }
    }
}
