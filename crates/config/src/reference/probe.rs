//! What schemars does not record, read from the types' own serde `Deserialize` impls: the
//! names a struct accepts in declaration order (field names and their `alias`es) and the
//! aliases of enum variants.
//!
//! serde's derive passes every accepted name (each field's name and aliases) to
//! `deserialize_struct` / `deserialize_enum`; a deserializer that only records them gets the
//! list. Which field an alias belongs to is found by feeding the alias twice: the derived
//! visitor then reports a duplicate of the field's own name.

use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};
use serde::{Deserializer, Serialize, forward_to_deserialize_any};
use std::fmt;

/// One field of a struct as written in files: its name and the aliases serde accepts for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SerdeName {
    pub name: String,
    pub aliases: Vec<String>,
}

/// The fields of a struct with a derived `Deserialize`, in declaration order.
///
/// Panics (with the type name) if the type is not such a struct or an alias cannot be
/// attributed; both are programming errors the reference test catches.
pub(crate) fn struct_fields<T: DeserializeOwned>() -> Vec<SerdeName> {
    let type_name = std::any::type_name::<T>();
    let names = match T::deserialize(Record) {
        Err(Probe::Names(names)) => names,
        other => panic!(
            "{type_name}: expected a struct deriving Deserialize, got {}",
            outcome(&other)
        ),
    };
    let mut fields: Vec<SerdeName> = Vec::new();
    for &name in names {
        let owner = match T::deserialize(Twice(name)) {
            Err(Probe::Duplicate(owner)) => owner,
            other => panic!(
                "{type_name}: cannot tell which field the name {name:?} belongs to ({})",
                outcome(&other)
            ),
        };
        let index = match fields.iter().position(|f| f.name == owner) {
            Some(index) => index,
            None => {
                fields.push(SerdeName {
                    name: owner.to_string(),
                    aliases: Vec::new(),
                });
                fields.len() - 1
            }
        };
        if name != owner {
            fields[index].aliases.push(name.to_string());
        }
    }
    fields
}

/// The variants of a unit enum with a derived `Deserialize`, in declaration order, each with
/// its aliases.
pub(crate) fn enum_variants<T: DeserializeOwned + Serialize>() -> Vec<SerdeName> {
    let type_name = std::any::type_name::<T>();
    let names = match T::deserialize(Record) {
        Err(Probe::Names(names)) => names,
        other => panic!(
            "{type_name}: expected an enum deriving Deserialize, got {}",
            outcome(&other)
        ),
    };
    let mut variants: Vec<SerdeName> = Vec::new();
    for &name in names {
        let value = T::deserialize(StrDeserializer::<Probe>::new(name))
            .unwrap_or_else(|e| panic!("{type_name}: variant {name:?} does not parse: {e}"));
        let owner = match serde_json::to_value(&value) {
            Ok(serde_json::Value::String(owner)) => owner,
            other => panic!("{type_name}: variant {name:?} is not written as a string: {other:?}"),
        };
        match variants.iter_mut().find(|v| v.name == owner) {
            Some(variant) if name != owner => variant.aliases.push(name.to_string()),
            Some(_) => {}
            None => variants.push(SerdeName {
                aliases: if name == owner {
                    Vec::new()
                } else {
                    vec![name.to_string()]
                },
                name: owner,
            }),
        }
    }
    variants
}

fn outcome<T>(result: &Result<T, Probe>) -> String {
    match result {
        Ok(_) => "no error".into(),
        Err(e) => e.to_string(),
    }
}

/// The outcome of a probe, carried in the error channel of serde.
#[derive(Debug)]
enum Probe {
    /// The names a struct or enum accepts (fields or variants, with aliases).
    Names(&'static [&'static str]),
    /// The visitor saw a field twice; the field's own name.
    Duplicate(&'static str),
    Other(String),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::Names(names) => write!(f, "names {names:?}"),
            Probe::Duplicate(name) => write!(f, "duplicate field {name:?}"),
            Probe::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Probe {}

impl de::Error for Probe {
    fn custom<M: fmt::Display>(message: M) -> Probe {
        Probe::Other(message.to_string())
    }

    fn duplicate_field(field: &'static str) -> Probe {
        Probe::Duplicate(field)
    }
}

/// Records the names passed to `deserialize_struct` / `deserialize_enum`.
struct Record;

impl<'de> Deserializer<'de> for Record {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probe> {
        Err(Probe::Other("not a struct or an enum".into()))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probe> {
        Err(Probe::Names(fields))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probe> {
        Err(Probe::Names(variants))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// A struct whose map holds the same key twice, each time with a placeholder value.
struct Twice(&'static str);

impl<'de> Deserializer<'de> for Twice {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_map(TwiceMap {
            key: self.0,
            left: 2,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

struct TwiceMap {
    key: &'static str,
    left: u8,
}

impl<'de> de::MapAccess<'de> for TwiceMap {
    type Error = Probe;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Probe> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(StrDeserializer::<Probe>::new(self.key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Probe> {
        seed.deserialize(Placeholder)
    }
}

/// A value that fits any field's type as far as possible: `false`, `0`, `"cpu"`, none, empty
/// lists and maps, the first variant of an enum.
struct Placeholder;

impl<'de> Deserializer<'de> for Placeholder {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_unit()
    }
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_bool(false)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_i64(0)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_i64(0)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_i64(0)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_i64(0)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_u64(0)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_u64(0)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_u64(0)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_u64(0)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_f64(1.0)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_f64(1.0)
    }
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_str("cpu")
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_str("cpu")
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_none()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Probe> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_seq(Empty)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probe> {
        visitor.visit_map(Empty)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Probe> {
        visitor.visit_map(Empty)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Probe> {
        let first = variants.first().copied().unwrap_or_default();
        visitor.visit_enum(StrDeserializer::<Probe>::new(first))
    }

    forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct tuple tuple_struct identifier ignored_any
    }
}

/// An empty list or map.
struct Empty;

impl<'de> de::SeqAccess<'de> for Empty {
    type Error = Probe;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        _: T,
    ) -> Result<Option<T::Value>, Probe> {
        Ok(None)
    }
}

impl<'de> de::MapAccess<'de> for Empty {
    type Error = Probe;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, _: K) -> Result<Option<K::Value>, Probe> {
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, _: V) -> Result<V::Value, Probe> {
        Err(Probe::Other("no value".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    #[allow(dead_code)]
    #[derive(Default)]
    struct Sample {
        zeta: u32,
        #[serde(alias = "alpha_old", alias = "zz_old")]
        beta: Option<f64>,
        #[serde(alias = "gamma_b")]
        gamma_a: bool,
    }

    #[test]
    fn struct_fields_in_declaration_order_with_aliases() {
        assert_eq!(
            struct_fields::<Sample>(),
            vec![
                SerdeName {
                    name: "zeta".into(),
                    aliases: vec![]
                },
                SerdeName {
                    name: "beta".into(),
                    aliases: vec!["alpha_old".into(), "zz_old".into()]
                },
                SerdeName {
                    name: "gamma_a".into(),
                    aliases: vec!["gamma_b".into()]
                },
            ]
        );
    }

    #[derive(Debug, Deserialize, Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        First,
        #[serde(alias = "old_second")]
        Second,
    }

    #[test]
    fn enum_variants_with_aliases() {
        assert_eq!(
            enum_variants::<Kind>(),
            vec![
                SerdeName {
                    name: "first".into(),
                    aliases: vec![]
                },
                SerdeName {
                    name: "second".into(),
                    aliases: vec!["old_second".into()]
                },
            ]
        );
    }
}
