//! Self-documenting parameters: every configurable struct is declared with `params!`, which gives it
//! serde (unknown keys rejected, missing keys defaulted), a `Default`, and `describe()` listing every
//! key with its value and meaning, so tools (`steer platforms NAME`) can print them all.

use serde::Serialize;

use crate::error::{ensure, ConfigResult, Shown};

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

    /// Checks each number below `prefix` whose name carries a unit against `MAGNITUDES`.
    fn check_magnitudes(&self, prefix: &str) -> ConfigResult<()> {
        let mut params = Vec::new();
        self.describe_into(prefix, "", &mut params);
        params.iter().try_for_each(check_magnitude)
    }
}

/// The magnitudes a machine's quantities can have, by a unit among the words of a parameter's
/// name (`peer_l2_latency_ns`, `napi_cycles_per_page`): a value outside is a slip (a unit mixed
/// up, digits too many), not a machine, and would make a run meaningless or endless.
/// Sizes stop at 1 TiB (a machine's memory, not one of its buffers, but past any address a
/// scenario lays out) and times at 1000 s (a thousand times the longest run allowed). Each with
/// its range as a message states it.
const MAGNITUDES: [(&str, f64, f64, &str); 9] = [
    ("ghz", 0.01, 100.0, "0.01 to 100 GHz"),
    ("ns", 0.0, 1e9, "0 to 1e9 ns"),
    ("us", 0.0, 1e9, "0 to 1e9 µs"),
    ("cycles", 0.0, 1e9, "0 to 1e9 cycles"),
    ("gbps", 1e-3, 1e6, "0.001 to 1000000 Gb/s"),
    ("gbs", 1e-3, 1e6, "0.001 to 1000000 GB/s"),
    ("bytes", 0.0, TIB, "0 B to 1 TiB"),
    ("kib", 0.0, TIB / 1024.0, "0 KiB to 1 TiB"),
    ("gib", 0.0, TIB / GIB, "0 GiB to 1 TiB"),
];
const GIB: f64 = (1u64 << 30) as f64;
const TIB: f64 = (1u64 << 40) as f64;

fn check_magnitude(param: &ParamDoc) -> ConfigResult<()> {
    let name = param.key.rsplit('.').next().unwrap_or_default();
    let unit = MAGNITUDES.iter().find(|(word, ..)| name.split('_').any(|w| w == *word));
    match (unit, param.value.parse::<f64>()) {
        (Some(&(_, least, most, range)), Ok(value)) => {
            // An integer is shown whole; a float in its shortest form.
            let got = || match param.value.parse::<i128>() {
                Ok(_) => param.value.clone(),
                Err(_) => Shown(value).to_string(),
            };
            ensure((least..=most).contains(&value), &param.key, || format!("must be {range} (got {})", got()))
        }
        _ => Ok(()),
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

/// A number that may be absent: written as the number, or as `"none"` (also when left out), so
/// that a scenario or `--set` can turn off what a preset sets (`--set 'platform.l3.rinse_gbs="none"'`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OrNone(pub Option<f64>);

impl Serialize for OrNone {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(value) => serializer.serialize_f64(value),
            None => serializer.serialize_str("none"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for OrNone {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(f64),
            Text(String),
        }
        match Written::deserialize(deserializer) {
            Ok(Written::Number(value)) => Ok(OrNone(Some(value))),
            Ok(Written::Text(text)) if text == "none" => Ok(OrNone(None)),
            Ok(Written::Text(text)) => {
                Err(serde::de::Error::custom(format!("expected a number or \"none\" (got `{text}`)")))
            }
            Err(_) => Err(serde::de::Error::custom("expected a number or \"none\"")),
        }
    }
}

impl Describe for OrNone {
    /// As a TOML value, the way it is set: the number, or `"none"`.
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        match self.0 {
            Some(value) => value.describe_into(prefix, meaning, out),
            None => "none".to_string().describe_into(prefix, meaning, out),
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
        #[serde(rename_all = "snake_case", try_from = "String")]
        pub enum $name { $( $(#[doc = $doc])* $variant ),* }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(text: String) -> Result<Self, String> {
                $crate::params::choose(&[$($name::$variant),*], &text)
            }
        }

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

/// The one of `choices` whose snake_case name is `text`. Read through a string, a choice given a
/// number or a table is named as such by the reader, not as a variant of an enum.
pub(crate) fn choose<T: serde::Serialize + Copy>(choices: &[T], text: &str) -> Result<T, String> {
    let name = |choice: &T| toml::Value::try_from(choice).ok().and_then(|v| v.as_str().map(str::to_owned));
    choices.iter().find(|choice| name(choice).as_deref() == Some(text)).copied().ok_or_else(|| {
        let known: Vec<String> = choices.iter().filter_map(name).collect();
        format!("unknown value `{text}` (known: {})", known.join(", "))
    })
}

/// A registry of named entries (placement policies, replacement policies, prefetchers): what a
/// `Name` must be one of. Names and descriptions shown anywhere come from here.
pub trait Registry: 'static {
    /// What an entry is called in messages (`placement policy`).
    const WHAT: &'static str;
    /// Every entry's name and one-line description, in registration order.
    fn entries() -> Vec<(&'static str, &'static str)>;
    /// Other names of entries, as `(alias, name)`: a scenario may write either, and the alias
    /// reads as the name it stands for.
    const ALIASES: &'static [(&'static str, &'static str)] = &[];

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
            let aliases: String = R::ALIASES.iter().map(|(alias, name)| format!("; {alias} is {name}")).collect();
            format!("unknown {} `{}` (known: {}{aliases})", R::WHAT, self.name, R::names().join(", "))
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

impl<'de, R: Registry> serde::Deserialize<'de> for Name<R> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        let name = R::ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, named)| named.to_string());
        Ok(Name { name, registry: std::marker::PhantomData })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(key: &str, value: &str) -> Result<(), String> {
        let param = ParamDoc { key: key.into(), value: value.into(), meaning: String::new() };
        check_magnitude(&param).map_err(|e| e.to_string())
    }

    #[test]
    fn a_number_whose_name_has_a_unit_is_checked_at_both_ends_of_its_range() {
        for (key, least, below, most, above) in [
            ("core.freq_ghz", "0.01", "0.0099", "100", "100.1"),
            ("l2.peer_latency_ns", "0", "-1", "1e9", "1.0001e9"),
            ("napi_cycles_per_page", "0", "-0.5", "1e9", "2e9"),
            ("link_gbps", "0.001", "0.0009", "1e6", "2e6"),
            ("fabric_gbs", "0.001", "0.0009", "1e6", "2e6"),
            ("tph.restart_us", "0", "-1", "1e9", "1e300"),
            ("capacity_bytes", "0", "-1", "1099511627776", "1099511627777"),
            ("pcie.rx_buffer_kib", "0", "-0.5", "1073741824", "1e12"),
            ("hbm.gib_per_node", "0", "-1", "1024", "4294967295"),
        ] {
            for fine in [least, most] {
                assert_eq!(check(key, fine), Ok(()), "{key} = {fine}");
            }
            for bad in [below, above] {
                assert!(check(key, bad).unwrap_err().starts_with(&format!("{key}: must be ")), "{key} = {bad}");
            }
        }
        assert_eq!(check("a.link_gbps", "2e6"), Err("a.link_gbps: must be 0.001 to 1000000 Gb/s (got 2000000)".into()));
        assert_eq!(
            check("a.rx_buffer_kib", "1e300"),
            Err("a.rx_buffer_kib: must be 0 KiB to 1 TiB (got 1e300)".into())
        );
        assert_eq!(
            check("a.total_bytes", "18446744073709551615"),
            Err("a.total_bytes: must be 0 B to 1 TiB (got 18446744073709551615)".into())
        );
    }

    struct Colours;
    impl Registry for Colours {
        const WHAT: &'static str = "colour";
        const ALIASES: &'static [(&'static str, &'static str)] = &[("crimson", "red")];
        fn entries() -> Vec<(&'static str, &'static str)> {
            vec![("red", "warm"), ("blue", "cold")]
        }
    }

    fn doc(key: &str, value: &str, meaning: &str) -> ParamDoc {
        ParamDoc { key: key.into(), value: value.into(), meaning: meaning.into() }
    }

    #[test]
    fn an_option_describes_as_its_value_or_as_none() {
        assert_eq!(Some(3u32).describe(), vec![doc("", "3", "")]);
        let mut out = Vec::new();
        Some(vec![1u8, 2]).describe_into("x", "two", &mut out);
        assert_eq!(out, vec![doc("x.0", "1", "two"), doc("x.1", "2", "two")]);
        let mut out = Vec::new();
        None::<u32>.describe_into("x", "unset", &mut out);
        assert_eq!(out, vec![doc("x", "none", "unset")]);
    }

    #[test]
    fn or_none_is_read_from_a_number_or_none_and_written_back_the_same_way() {
        #[derive(serde::Deserialize, serde::Serialize)]
        struct Holder {
            rate: OrNone,
        }
        let read = |text: &str| toml::from_str::<Holder>(text).map(|h| h.rate).map_err(|e| e.message().to_string());
        assert_eq!(read("rate = 1.5"), Ok(OrNone(Some(1.5))));
        assert_eq!(read("rate = 2"), Ok(OrNone(Some(2.0))));
        assert_eq!(read("rate = \"none\""), Ok(OrNone(None)));
        assert_eq!(read("rate = \"fast\""), Err("expected a number or \"none\" (got `fast`)".to_string()));
        assert_eq!(read("rate = true"), Err("expected a number or \"none\"".to_string()));
        let write = |rate| toml::to_string(&Holder { rate }).unwrap();
        assert_eq!(
            (write(OrNone(Some(1.5))), write(OrNone(None))),
            ("rate = 1.5\n".into(), "rate = \"none\"\n".into())
        );
        assert_eq!(OrNone(Some(1.5)).describe(), vec![doc("", "1.5", "")]);
        assert_eq!(OrNone(None).describe(), vec![doc("", "\"none\"", "")]);
    }

    #[test]
    fn a_name_compares_shows_and_describes_by_its_text() {
        let red = Name::<Colours>::new("red");
        assert!(red == Name::new("red"));
        assert!(red != Name::new("blue"));
        assert!(red == "red");
        assert!(red != "blue");
        assert_eq!(format!("{red:?}"), "\"red\"");
        let mut out = Vec::new();
        red.describe_into("paint", "The colour.", &mut out);
        assert_eq!(out, vec![doc("paint", "\"red\"", "The colour. One of: red, blue.")]);
        assert_eq!(
            Name::<Colours>::new("green").check("paint").unwrap_err().to_string(),
            "paint: unknown colour `green` (known: red, blue; crimson is red)"
        );
    }

    #[test]
    fn an_alias_reads_as_the_name_it_stands_for() {
        #[derive(serde::Deserialize)]
        struct Paint {
            colour: Name<Colours>,
        }
        let read = |text: &str| toml::from_str::<Paint>(text).unwrap().colour;
        assert!(read("colour = \"crimson\"") == "red");
        assert!(read("colour = \"blue\"") == "blue");
    }

    #[test]
    fn a_unit_counts_only_as_a_whole_word_of_the_name_and_text_is_not_a_number() {
        for (key, value) in [("insane_count", "1e30"), ("nsamples", "-5"), ("ways", "1e12"), ("latency_ns", "\"fast\"")]
        {
            assert_eq!(check(key, value), Ok(()), "{key}");
        }
    }
}
