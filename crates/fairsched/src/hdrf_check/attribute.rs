//! Attributes a case can check, mapped onto [`fairsched_hdrf::ElementAttributes`].
//!
//! An attribute expression is one attribute name or a sum of share attributes
//! (`strong_guarantee_share + proposed_integral_share`). `guarantee_share` is YTsaurus'
//! `GetGuaranteeShare()`: strong guarantee share plus proposed integral share.

use fairsched_hdrf::{Element, ElementAttributes};
use fairsched_resources::{RESOURCE_COUNT, ResourceKind, ResourceVector};
use serde_json::Value;

/// The shape of an attribute's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A 5-vector in resource order (shares, volumes, absolute amounts).
    Vector,
    /// A number.
    Scalar,
    /// A position or `null` (`fifo_index`, `effective_fifo_index`).
    Index,
    /// A string (`dominant_resource`).
    Text,
}

impl Kind {
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Vector => "a list of 5 numbers",
            Kind::Scalar => "a number",
            Kind::Index => "a non-negative integer or null",
            Kind::Text => "a string",
        }
    }
}

/// A value computed by the implementation or expected by a case.
#[derive(Clone, Debug, PartialEq)]
pub enum Actual {
    Vector([f64; RESOURCE_COUNT]),
    Scalar(f64),
    Index(Option<usize>),
    Text(String),
}

impl Actual {
    pub fn to_json(&self) -> Value {
        match self {
            Actual::Vector(v) => Value::from(v.to_vec()),
            Actual::Scalar(x) => Value::from(*x),
            Actual::Index(i) => i.map_or(Value::Null, Value::from),
            Actual::Text(s) => Value::from(s.as_str()),
        }
    }
}

/// What an extractor reads: the element's update output and the element itself (for the
/// persistent integral state, which the update advances).
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub attributes: &'a ElementAttributes,
    pub element: &'a Element,
}

type Extract = fn(&Source<'_>) -> Actual;

/// One attribute: its name in the format, its shape and how to read it.
#[derive(Debug)]
pub struct AttributeDef {
    pub name: &'static str,
    pub kind: Kind,
    extract: Extract,
}

fn v(r: &ResourceVector) -> Actual {
    Actual::Vector(r.0)
}

macro_rules! attr {
    ($name:expr, $kind:ident, |$s:ident| $body:expr) => {
        AttributeDef {
            name: $name,
            kind: Kind::$kind,
            extract: |$s: &Source<'_>| $body,
        }
    };
}

/// Every attribute this tool knows.
pub static ATTRIBUTES: &[AttributeDef] = &[
    attr!("fair_share.total", Vector, |s| v(&s
        .attributes
        .fair_share
        .total)),
    attr!("fair_share.strong_guarantee", Vector, |s| v(&s
        .attributes
        .fair_share
        .strong_guarantee)),
    attr!("fair_share.integral_guarantee", Vector, |s| v(&s
        .attributes
        .fair_share
        .integral_guarantee)),
    attr!("fair_share.weight_proportional", Vector, |s| v(&s
        .attributes
        .fair_share
        .weight_proportional)),
    attr!("promised_guarantee_fair_share.total", Vector, |s| v(&s
        .attributes
        .promised_guarantee_fair_share
        .total)),
    attr!(
        "promised_guarantee_fair_share.strong_guarantee",
        Vector,
        |s| v(&s.attributes.promised_guarantee_fair_share.strong_guarantee)
    ),
    attr!(
        "promised_guarantee_fair_share.integral_guarantee",
        Vector,
        |s| v(&s
            .attributes
            .promised_guarantee_fair_share
            .integral_guarantee)
    ),
    attr!(
        "promised_guarantee_fair_share.weight_proportional",
        Vector,
        |s| v(&s
            .attributes
            .promised_guarantee_fair_share
            .weight_proportional)
    ),
    attr!("usage_share", Vector, |s| v(&s.attributes.usage_share)),
    attr!("demand_share", Vector, |s| v(&s.attributes.demand_share)),
    attr!("limits_share", Vector, |s| v(&s.attributes.limits_share)),
    attr!("strong_guarantee_share", Vector, |s| v(&s
        .attributes
        .strong_guarantee_share)),
    attr!(
        "strong_guarantee_share_by_tier.priority_pools",
        Vector,
        |s| v(&s.attributes.strong_guarantee_share_by_tier[fairsched_hdrf::TIER_PRIORITY_POOLS])
    ),
    attr!(
        "strong_guarantee_share_by_tier.regular_pools",
        Vector,
        |s| v(&s.attributes.strong_guarantee_share_by_tier[fairsched_hdrf::TIER_REGULAR_POOLS])
    ),
    attr!("proposed_integral_share", Vector, |s| v(&s
        .attributes
        .proposed_integral_share)),
    attr!("guarantee_share", Vector, |s| v(&(s
        .attributes
        .strong_guarantee_share
        + s.attributes.proposed_integral_share))),
    attr!("estimated_guarantee_share", Vector, |s| v(&s
        .attributes
        .estimated_guarantee_share)),
    attr!("limited_demand_share", Vector, |s| v(&s
        .attributes
        .limited_demand_share)),
    attr!("inferred_strong_guarantee_resources", Vector, |s| {
        Actual::Vector(s.attributes.inferred_strong_guarantee_resources.values())
    }),
    attr!("burst_ratio", Scalar, |s| Actual::Scalar(
        s.attributes.burst_ratio
    )),
    attr!("total_burst_ratio", Scalar, |s| Actual::Scalar(
        s.attributes.total_burst_ratio
    )),
    attr!("resource_flow_ratio", Scalar, |s| Actual::Scalar(
        s.attributes.resource_flow_ratio
    )),
    attr!("total_resource_flow_ratio", Scalar, |s| Actual::Scalar(
        s.attributes.total_resource_flow_ratio
    )),
    attr!("volume_overflow", Vector, |s| Actual::Vector(
        s.attributes.volume_overflow.values()
    )),
    attr!("acceptable_volume", Vector, |s| Actual::Vector(
        s.attributes.acceptable_volume.values()
    )),
    attr!("accepted_free_volume", Vector, |s| Actual::Vector(
        s.attributes.accepted_free_volume.values()
    )),
    attr!("children_volume_overflow", Vector, |s| Actual::Vector(
        s.attributes.children_volume_overflow.values()
    )),
    attr!("accumulated_resource_volume", Vector, |s| Actual::Vector(
        s.element.integral_state.accumulated_volume.values()
    )),
    attr!("last_share_ratio", Scalar, |s| Actual::Scalar(
        s.element.integral_state.last_share_ratio
    )),
    attr!("dominant_resource", Text, |s| Actual::Text(
        s.attributes.dominant_resource.name().to_string()
    )),
    attr!("fifo_index", Index, |s| Actual::Index(
        s.attributes.fifo_index
    )),
    attr!("effective_fifo_index", Index, |s| Actual::Index(
        s.attributes.effective_fifo_index
    )),
    attr!("function_sizes.fair_share_by_fit_factor", Scalar, |s| {
        Actual::Scalar(s.attributes.function_sizes.fair_share_by_fit_factor as f64)
    }),
    attr!("function_sizes.max_fit_factor_by_suggestion", Scalar, |s| {
        Actual::Scalar(s.attributes.function_sizes.max_fit_factor_by_suggestion as f64)
    }),
    attr!("function_sizes.fair_share_by_suggestion", Scalar, |s| {
        Actual::Scalar(s.attributes.function_sizes.fair_share_by_suggestion as f64)
    }),
];

/// Other spellings of attribute names (orchid and upstream C++ names).
static ALIASES: &[(&str, &str)] = &[
    ("detailed_fair_share.total", "fair_share.total"),
    (
        "detailed_fair_share.strong_guarantee",
        "fair_share.strong_guarantee",
    ),
    (
        "detailed_fair_share.integral_guarantee",
        "fair_share.integral_guarantee",
    ),
    (
        "detailed_fair_share.weight_proportional",
        "fair_share.weight_proportional",
    ),
    ("accumulated_volume", "accumulated_resource_volume"),
    (
        "fair_share_functions_statistics.fair_share_by_fit_factor_size",
        "function_sizes.fair_share_by_fit_factor",
    ),
    (
        "fair_share_functions_statistics.max_fit_factor_by_suggestion_size",
        "function_sizes.max_fit_factor_by_suggestion",
    ),
    (
        "fair_share_functions_statistics.fair_share_by_suggestion_size",
        "function_sizes.fair_share_by_suggestion",
    ),
];

/// Finds an attribute by its name or an alias.
pub fn lookup(name: &str) -> Option<&'static AttributeDef> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| *canonical);
    ATTRIBUTES.iter().find(|a| a.name == name)
}

/// A parsed attribute expression: one attribute, or a sum of vector attributes.
#[derive(Debug, Clone)]
pub struct AttrExpr {
    pub text: String,
    terms: Vec<&'static AttributeDef>,
}

impl AttrExpr {
    /// Parses `name` or `name + name + ...`.
    pub fn parse(text: &str) -> Result<AttrExpr, String> {
        let parts: Vec<&str> = text.split('+').map(str::trim).collect();
        let mut terms = Vec::with_capacity(parts.len());
        for p in &parts {
            let def = lookup(p).ok_or_else(|| {
                format!(
                    "unknown attribute `{p}` (known: {})",
                    ATTRIBUTES
                        .iter()
                        .map(|a| a.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            terms.push(def);
        }
        if terms.len() > 1 && terms.iter().any(|t| t.kind != Kind::Vector) {
            return Err(format!("only vector attributes can be summed in `{text}`"));
        }
        Ok(AttrExpr {
            text: text.to_string(),
            terms,
        })
    }

    pub fn kind(&self) -> Kind {
        self.terms[0].kind
    }

    /// Reads the value from an element's update output.
    pub fn read(&self, source: &Source<'_>) -> Actual {
        let mut value = (self.terms[0].extract)(source);
        for t in &self.terms[1..] {
            if let (Actual::Vector(acc), Actual::Vector(x)) = (&mut value, (t.extract)(source)) {
                for (a, b) in acc.iter_mut().zip(x) {
                    *a += b;
                }
            }
        }
        value
    }
}

/// Parses an expected value of the given shape. Vectors may also be written `"U(x)"` or
/// `{"U": x}`, the format's unit vector `[x, x, 0, x, 0]`.
pub fn parse_expected(kind: Kind, value: &Value) -> Result<Actual, String> {
    let bad = || format!("expected {}, found {value}", kind.describe());
    match kind {
        Kind::Vector => {
            if let Some(x) = unit_vector_argument(value) {
                let mut out = [0.0; RESOURCE_COUNT];
                for k in [
                    ResourceKind::UserSlots,
                    ResourceKind::Cpu,
                    ResourceKind::Memory,
                ] {
                    out[k.index()] = x;
                }
                return Ok(Actual::Vector(out));
            }
            let items = value.as_array().ok_or_else(bad)?;
            if items.len() != RESOURCE_COUNT {
                return Err(bad());
            }
            let mut out = [0.0; RESOURCE_COUNT];
            for (o, item) in out.iter_mut().zip(items) {
                *o = item.as_f64().ok_or_else(bad)?;
            }
            Ok(Actual::Vector(out))
        }
        Kind::Scalar => value.as_f64().map(Actual::Scalar).ok_or_else(bad),
        Kind::Index => match value {
            Value::Null => Ok(Actual::Index(None)),
            _ => value
                .as_u64()
                .map(|i| Actual::Index(Some(i as usize)))
                .ok_or_else(bad),
        },
        Kind::Text => value
            .as_str()
            .map(|s| Actual::Text(s.to_string()))
            .ok_or_else(bad),
    }
}

fn unit_vector_argument(value: &Value) -> Option<f64> {
    match value {
        Value::String(s) => {
            let inner = s.trim().strip_prefix("U(")?.strip_suffix(')')?;
            inner.trim().parse().ok()
        }
        Value::Object(m) if m.len() == 1 => m.get("U")?.as_f64(),
        _ => None,
    }
}

/// Whether `name` (possibly written `a.b|c` as in the conventions block) is known.
pub fn conventions_name_known(name: &str) -> bool {
    match name.rsplit_once('.') {
        Some((prefix, last)) if last.contains('|') => last
            .split('|')
            .all(|part| lookup(&format!("{prefix}.{part}")).is_some()),
        _ => lookup(name).is_some(),
    }
}
