//! Line and column of a node of a YAML document, found by its path (`providers[1].capabilities[2]`).
//!
//! serde_yaml_ng keeps no positions in its `Value`, and has no `Spanned<T>`; but every error raised
//! while a node is being deserialized gets that node's position. So to locate a node we deserialize
//! the document once more with a seed that walks down the path, ignoring everything else, and fails
//! on purpose at the node (or at its key): the error's `location()` is the node's. Only error paths
//! pay for it, once per problem.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A position in the file, 1-based, as editors count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl From<serde_yaml_ng::Location> for Location {
    fn from(location: serde_yaml_ng::Location) -> Self {
        Location { line: location.line(), column: location.column() }
    }
}

/// A step down a YAML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// The value under this key of a mapping.
    Key(String),
    /// This element of a sequence.
    Index(usize),
}

/// Where a node is in the document, written as serde_yaml_ng writes paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct YamlPath {
    segments: Vec<Segment>,
    /// Point at the last key rather than at its value (for "this option does not belong here").
    at_key: bool,
}

impl YamlPath {
    pub fn root() -> Self {
        YamlPath::default()
    }

    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut path = self.clone();
        path.segments.push(Segment::Key(key.into()));
        path
    }

    pub fn index(&self, index: usize) -> Self {
        let mut path = self.clone();
        path.segments.push(Segment::Index(index));
        path
    }

    /// The same node, located at its key (when the path ends with a key).
    pub fn the_key(&self) -> Self {
        YamlPath { at_key: matches!(self.segments.last(), Some(Segment::Key(_))), ..self.clone() }
    }

    /// The node's line and column in `text`; `None` when the path is not in it.
    pub fn locate(&self, text: &str) -> Option<Location> {
        let walk = Walk { path: &self.segments, at_key: self.at_key };
        match walk.deserialize(serde_yaml_ng::Deserializer::from_str(text)) {
            Err(error) if error.to_string().contains(FOUND) => error.location().map(Location::from),
            _ => None,
        }
    }
}

impl fmt::Display for YamlPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str(".");
        }
        for (i, segment) in self.segments.iter().enumerate() {
            match segment {
                Segment::Key(key) if i == 0 => f.write_str(key)?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The message of the deliberate error; never shown.
const FOUND: &str = "\u{0}located\u{0}";

fn found<E: de::Error>() -> E {
    E::custom(FOUND)
}

/// Walks down `path`; fails at its end.
#[derive(Clone, Copy)]
struct Walk<'p> {
    path: &'p [Segment],
    at_key: bool,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Walk<'_> {
    fn scalar<E: de::Error>(self) -> Result<(), E> {
        if self.path.is_empty() { Err(found()) } else { Ok(()) }
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node (`!tag value`): the tag is transparent to paths.
        let (IgnoredAny, variant) = data.variant()?;
        de::VariantAccess::newtype_variant_seed(variant, self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Segment::Index(wanted), rest)) = self.path.split_first() else {
            return self.scalar();
        };
        let mut index = 0;
        while index < *wanted {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            index += 1;
        }
        seq.next_element_seed(Walk { path: rest, at_key: self.at_key })?;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Segment::Key(wanted), rest)) = self.path.split_first() else {
            return self.scalar();
        };
        let fail_at_key = rest.is_empty() && self.at_key;
        while let Some(hit) = map.next_key_seed(Key { wanted, fail_at_key })? {
            if hit {
                return map.next_value_seed(Walk { path: rest, at_key: self.at_key });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// A mapping key: is it the one wanted? Fails on it when the key itself is the target.
struct Key<'p> {
    wanted: &'p str,
    fail_at_key: bool,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        match key == self.wanted {
            true if self.fail_at_key => Err(found()),
            hit => Ok(hit),
        }
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}
