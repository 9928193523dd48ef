//! Self-documenting parameters: every configurable struct is declared with `params!`, which gives it
//! serde (unknown keys rejected, missing keys defaulted), a `Default`, and `describe()` listing every
//! key with its value and meaning, so tools (`steer platforms NAME`) can print them all.

use serde::Serialize;

/// One documented parameter: dotted key, current value rendered as TOML, and meaning.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ParamDoc {
    pub key: String,
    pub value: String,
    pub meaning: String,
}

/// Something whose parameters can be listed.
pub trait Describe {
    /// Appends one `ParamDoc` per leaf parameter below `prefix`.
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>);

    fn describe(&self) -> Vec<ParamDoc> {
        let mut out = Vec::new();
        self.describe_into("", "", &mut out);
        out
    }
}

pub(crate) fn join_key(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn leaf<T: Serialize>(value: &T, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
    let value = toml::Value::try_from(value).map(|v| v.to_string()).unwrap_or_else(|_| "none".to_string());
    out.push(ParamDoc { key: prefix.to_string(), value, meaning: meaning.to_string() });
}

macro_rules! leaf_describe {
    ($($t:ty),*) => {$(
        impl Describe for $t {
            fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
                leaf(self, prefix, meaning, out)
            }
        }
    )*};
}
leaf_describe!(u8, u16, u32, u64, usize, i64, f64, bool, String);

impl<T: Describe + Serialize> Describe for Option<T> {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        match self {
            Some(inner) => inner.describe_into(prefix, meaning, out),
            None => {
                out.push(ParamDoc { key: prefix.to_string(), value: "none".to_string(), meaning: meaning.to_string() })
            }
        }
    }
}

impl<T: Describe> Describe for Vec<T> {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        if self.is_empty() {
            // An empty list is still a parameter a user can set.
            out.push(ParamDoc { key: prefix.to_string(), value: "[]".to_string(), meaning: meaning.to_string() });
        }
        for (i, item) in self.iter().enumerate() {
            item.describe_into(&join_key(prefix, &i.to_string()), meaning, out);
        }
    }
}

/// Declares a documented parameter struct. Each field: doc comment (its meaning), name, type, default.
macro_rules! params {
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])+ $field:ident : $ty:ty = $default:expr ),* $(,)?
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name { $( $(#[doc = $doc])+ pub $field: $ty ),* }

        impl Default for $name {
            fn default() -> Self { Self { $( $field: $default ),* } }
        }

        impl $crate::params::Describe for $name {
            fn describe_into(&self, prefix: &str, _meaning: &str, out: &mut Vec<$crate::params::ParamDoc>) {
                $(
                    $crate::params::Describe::describe_into(
                        &self.$field,
                        &$crate::params::join_key(prefix, stringify!($field)),
                        concat!($($doc),+).trim(),
                        out,
                    );
                )*
            }
        }
    };
}
pub(crate) use params;

/// Declares a documented string-valued choice (serialized in snake_case) that describes as a leaf.
macro_rules! choice {
    (
        $(#[doc = $sdoc:literal])*
        pub enum $name:ident { $( $(#[doc = $doc:literal])* $variant:ident ),* $(,)? }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $( $(#[doc = $doc])* $variant ),* }

        impl $crate::params::Describe for $name {
            fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<$crate::params::ParamDoc>) {
                let value = toml::Value::try_from(self).map(|v| v.to_string()).unwrap_or_default();
                out.push($crate::params::ParamDoc {
                    key: prefix.to_string(),
                    value,
                    meaning: meaning.to_string(),
                });
            }
        }
    };
}
pub(crate) use choice;

/// A registry of named entries (placement policies, replacement policies, prefetchers): what a
/// `Name` must be one of. Names and descriptions shown anywhere come from here.
pub trait Registry: 'static {
    /// What an entry is called in messages (`placement policy`).
    const WHAT: &'static str;
    /// Every entry's name and one-line description, in registration order.
    fn entries() -> Vec<(&'static str, &'static str)>;

    fn names() -> Vec<&'static str> {
        Self::entries().into_iter().map(|(name, _)| name).collect()
    }
}

/// The name of an entry of registry `R`, as a scenario writes it.
pub struct Name<R> {
    name: String,
    registry: std::marker::PhantomData<fn() -> R>,
}

impl<R: Registry> Name<R> {
    pub fn new(name: impl Into<String>) -> Name<R> {
        Name { name: name.into(), registry: std::marker::PhantomData }
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// Fails at `path` unless the name is registered; the message lists the registered names.
    pub fn check(&self, path: &str) -> crate::error::ConfigResult<()> {
        crate::error::ensure(R::names().contains(&self.name.as_str()), path, || {
            format!("unknown {} `{}` (known: {})", R::WHAT, self.name, R::names().join(", "))
        })
    }
}

impl<R: Registry> From<&str> for Name<R> {
    fn from(name: &str) -> Name<R> {
        Name::new(name)
    }
}

impl<R> Clone for Name<R> {
    fn clone(&self) -> Self {
        Name { name: self.name.clone(), registry: std::marker::PhantomData }
    }
}

impl<R> PartialEq for Name<R> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl<R> std::fmt::Debug for Name<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.name)
    }
}

impl<R> std::ops::Deref for Name<R> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.name
    }
}

impl<R> PartialEq<&str> for Name<R> {
    fn eq(&self, other: &&str) -> bool {
        self.name == *other
    }
}

impl<R> Serialize for Name<R> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.name.serialize(serializer)
    }
}

impl<'de, R> serde::Deserialize<'de> for Name<R> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Name { name: String::deserialize(deserializer)?, registry: std::marker::PhantomData })
    }
}

impl<R: Registry> Describe for Name<R> {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        let names = R::names().join(", ");
        out.push(ParamDoc {
            key: prefix.to_string(),
            value: format!("\"{}\"", self.name),
            meaning: format!("{meaning} One of: {names}."),
        });
    }
}
