//! Serde support: resource maps as `{"cpu": 1.5, "memory": "4GiB"}`.
//!
//! Values may be numbers (natural units: cpu as a decimal, memory in bytes) or human strings
//! (see [`crate::parse_amount`]). Unknown resource names, negative, non-finite and too precise
//! values are errors that name the resource. Output uses plain numbers so that other tools can
//! read it without our parser.

use crate::amount::shown_number;
use crate::amount::value_to_raw;
use crate::{PartialResources, RESOURCE_COUNT, ResourceKind, Resources, parse_amount};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

fn serialize_raw<S: Serializer>(
    serializer: S,
    raw: [Option<i64>; RESOURCE_COUNT],
) -> Result<S::Ok, S::Error> {
    let count = raw.iter().filter(|v| v.is_some()).count();
    let mut map = serializer.serialize_map(Some(count))?;
    for k in ResourceKind::ALL {
        if let Some(v) = raw[k.index()] {
            match k {
                ResourceKind::Cpu => map.serialize_entry(k.name(), &(v as f64 / 100.0))?,
                _ => map.serialize_entry(k.name(), &v)?,
            }
        }
    }
    map.end()
}

impl Serialize for Resources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_raw(serializer, self.raw().map(Some))
    }
}

impl Serialize for PartialResources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_raw(serializer, self.raw())
    }
}

/// One resource amount as written by a user: a number or a human string.
enum AmountInput {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for AmountInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AmountInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string such as \"4GiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<AmountInput, E> {
                Ok(AmountInput::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<AmountInput, E> {
                Ok(AmountInput::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<AmountInput, E> {
                Ok(AmountInput::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AmountInput, E> {
                Ok(AmountInput::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

fn deserialize_raw<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<[Option<i64>; RESOURCE_COUNT], D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = [Option<i64>; RESOURCE_COUNT];
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of resources (user_slots, cpu, gpu, memory, network)")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = [None; RESOURCE_COUNT];
            while let Some(key) = map.next_key::<String>()? {
                let kind = ResourceKind::from_name(&key).ok_or_else(|| {
                    de::Error::custom(format!(
                        "unknown resource {key:?} (expected one of user_slots, cpu, gpu, memory, network)"
                    ))
                })?;
                if out[kind.index()].is_some() {
                    return Err(de::Error::custom(format!("resource {key:?} given twice")));
                }
                let raw = match map.next_value::<AmountInput>()? {
                    AmountInput::Number(v) => value_to_raw(kind, v, &shown_number(v)),
                    AmountInput::Text(s) => parse_amount(kind, &s),
                }
                .map_err(|e| de::Error::custom(format!("resource {key:?}: {e}")))?;
                out[kind.index()] = Some(raw);
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

/// Missing resources are 0.
impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Resources::from_raw(
            deserialize_raw(d)?.map(|v| v.unwrap_or(0)),
        ))
    }
}

/// Missing resources stay unset.
impl<'de> Deserialize<'de> for PartialResources {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(PartialResources::from_raw(deserialize_raw(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_human_strings() {
        let r: Resources =
            serde_json::from_str(r#"{"cpu": 1.5, "memory": "4GiB", "user_slots": 3}"#).unwrap();
        assert_eq!(r.raw(), [3, 150, 0, 4 << 30, 0]);
        let p: PartialResources = serde_json::from_str(r#"{"cpu": 0}"#).unwrap();
        assert_eq!(p.raw(), [None, Some(0), None, None, None]);
    }

    /// Errors show extreme JSON numbers as written, not as hundreds of digits.
    #[test]
    fn errors_show_extreme_numbers_short() {
        let cases = [
            (r#"{"cpu": 1e308}"#, "resource \"cpu\": 1e308 is too large"),
            (
                r#"{"cpu": 1e-300}"#,
                "resource \"cpu\": 1e-300 has more than two decimals",
            ),
            (
                r#"{"memory": -2.5}"#,
                "resource \"memory\": -2.5 is negative",
            ),
        ];
        for (json, expected) in cases {
            let error = serde_json::from_str::<Resources>(json)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(expected), "{json}: {error}");
        }
    }

    #[test]
    fn writes_plain_numbers() {
        let r = Resources::from_raw([3, 150, 0, 1024, 0]);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"user_slots":3,"cpu":1.5,"gpu":0,"memory":1024,"network":0}"#
        );
    }

    #[test]
    fn rejects_bad_maps_naming_the_resource() {
        let cases = [
            (r#"{"cpuu": 1}"#, "unknown resource \"cpuu\""),
            (r#"{"cpu": -1}"#, "resource \"cpu\": -1 is negative"),
            (r#"{"memory": "4XB"}"#, "resource \"memory\": unknown unit"),
            (r#"{"cpu": 1.001}"#, "two decimals"),
            (r#"{"cpu": true}"#, "a number or a string"),
            (r#"[1]"#, "a map of resources"),
        ];
        for (input, needle) in cases {
            let err = serde_json::from_str::<Resources>(input)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{input}: {err}");
        }
    }
}
