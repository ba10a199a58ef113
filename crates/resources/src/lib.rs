//! The five scheduler resources, as YTsaurus defines them.
//!
//! * [`ResourceKind`]: `user_slots, cpu, gpu, memory, network`, always in this order (the order
//!   matters for tie-breaking and for storing vectors).
//! * [`Resources`]: absolute amounts. `cpu` is fixed point with two decimals (stored in
//!   hundredths), `memory` is bytes, the rest are integers.
//! * [`ResourceVector`]: a share per resource (`amount / cluster total`, 0 where the total is 0).
//! * [`PartialResources`]: a resource map where each component may be absent (guarantees,
//!   limits).
//! * [`parse_amount`] / [`format_amount`]: human-readable input and output (`"4GiB"`, `"1.5"`).

mod amount;
mod serde_impls;
mod vector;

pub use amount::{AmountError, format_amount, parse_amount};
pub use vector::ResourceVector;

use std::fmt;

/// Number of resource kinds.
pub const RESOURCE_COUNT: usize = 5;

/// One resource kind. The declaration order is the canonical resource order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    UserSlots,
    Cpu,
    Gpu,
    Memory,
    Network,
}

impl ResourceKind {
    /// All kinds in canonical order.
    pub const ALL: [ResourceKind; RESOURCE_COUNT] = [
        ResourceKind::UserSlots,
        ResourceKind::Cpu,
        ResourceKind::Gpu,
        ResourceKind::Memory,
        ResourceKind::Network,
    ];

    /// Index in canonical order (0..5).
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The YTsaurus name of the resource.
    pub const fn name(self) -> &'static str {
        match self {
            ResourceKind::UserSlots => "user_slots",
            ResourceKind::Cpu => "cpu",
            ResourceKind::Gpu => "gpu",
            ResourceKind::Memory => "memory",
            ResourceKind::Network => "network",
        }
    }

    /// Parses a resource name (`"cpu"`, `"user_slots"`, ...).
    pub fn from_name(name: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Largest value a component of this kind may hold, in raw units.
    const fn type_max(self) -> i64 {
        match self {
            ResourceKind::Gpu => i32::MAX as i64,
            _ => i64::MAX,
        }
    }

    /// Raw units per whole unit: 100 for cpu (hundredths), 1 otherwise.
    #[inline]
    pub const fn scale(self) -> i64 {
        match self {
            ResourceKind::Cpu => 100,
            _ => 1,
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Absolute resource amounts (YTsaurus `TJobResources`).
///
/// Components are stored as raw integers: cpu in hundredths, memory in bytes, the others as
/// counts. Conversions from `f64` follow YTsaurus: cpu rounds half away from zero (on the
/// hundredths), integer resources truncate toward zero, and everything saturates at the
/// type's range (gpu is a 32-bit integer).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    raw: [i64; RESOURCE_COUNT],
}

impl Resources {
    /// All zero.
    pub const ZERO: Resources = Resources {
        raw: [0; RESOURCE_COUNT],
    };

    /// "Infinite" amounts: each component's type maximum divided by 4, as in YTsaurus.
    #[inline]
    pub fn infinite() -> Resources {
        let mut r = Resources::ZERO;
        for k in ResourceKind::ALL {
            r.raw[k.index()] = k.type_max() / 4;
        }
        r
    }

    /// Builds from raw units (cpu in hundredths).
    #[inline]
    pub const fn from_raw(raw: [i64; RESOURCE_COUNT]) -> Resources {
        Resources { raw }
    }

    /// Raw units (cpu in hundredths).
    #[inline]
    pub const fn raw(&self) -> [i64; RESOURCE_COUNT] {
        self.raw
    }

    /// Raw value of one component (cpu in hundredths).
    #[inline]
    pub const fn raw_of(&self, kind: ResourceKind) -> i64 {
        self.raw[kind.index()]
    }

    /// Sets one component in raw units.
    #[inline]
    pub fn set_raw(&mut self, kind: ResourceKind, raw: i64) {
        self.raw[kind.index()] = raw.clamp(-kind.type_max(), kind.type_max());
    }

    /// Value of one component in natural units (cpu as a decimal, memory in bytes).
    #[inline]
    pub fn get(&self, kind: ResourceKind) -> f64 {
        let raw = self.raw[kind.index()];
        match kind {
            ResourceKind::Cpu => raw as f64 / 100.0,
            _ => raw as f64,
        }
    }

    /// Sets one component from a double in natural units, with YTsaurus' conversion rules.
    #[inline]
    pub fn set(&mut self, kind: ResourceKind, value: f64) {
        self.raw[kind.index()] = Self::convert(kind, value);
    }

    /// Converts a double in natural units into raw units for `kind`.
    #[inline]
    pub fn convert(kind: ResourceKind, value: f64) -> i64 {
        let max = kind.type_max() as f64;
        let raw = match kind {
            ResourceKind::Cpu => round_half_away(value * 100.0),
            _ => value.trunc(),
        };
        if raw.is_nan() {
            0
        } else {
            raw.clamp(-max, max) as i64
        }
    }

    /// Builds from natural-unit values in canonical order.
    #[inline]
    pub fn from_values(values: [f64; RESOURCE_COUNT]) -> Resources {
        let mut r = Resources::ZERO;
        for k in ResourceKind::ALL {
            r.set(k, values[k.index()]);
        }
        r
    }

    /// Natural-unit values in canonical order.
    #[inline]
    pub fn values(&self) -> [f64; RESOURCE_COUNT] {
        ResourceKind::ALL.map(|k| self.get(k))
    }

    /// Builder-style setter in natural units.
    #[must_use]
    pub fn with(mut self, kind: ResourceKind, value: f64) -> Resources {
        self.set(kind, value);
        self
    }

    /// Componentwise saturating sum.
    #[must_use]
    #[inline]
    pub fn add(&self, other: &Resources) -> Resources {
        Resources {
            raw: std::array::from_fn(|i| self.raw[i].saturating_add(other.raw[i])),
        }
    }

    /// Componentwise saturating difference.
    #[must_use]
    #[inline]
    pub fn sub(&self, other: &Resources) -> Resources {
        Resources {
            raw: std::array::from_fn(|i| self.raw[i].saturating_sub(other.raw[i])),
        }
    }

    /// Componentwise minimum.
    #[must_use]
    #[inline]
    pub fn min(&self, other: &Resources) -> Resources {
        Resources {
            raw: std::array::from_fn(|i| self.raw[i].min(other.raw[i])),
        }
    }

    /// Componentwise maximum.
    #[must_use]
    #[inline]
    pub fn max(&self, other: &Resources) -> Resources {
        Resources {
            raw: std::array::from_fn(|i| self.raw[i].max(other.raw[i])),
        }
    }

    /// Multiplies every component by `factor`, rounding half away from zero (cpu on its
    /// hundredths), as YTsaurus' `TJobResources * double` does.
    #[must_use]
    #[inline]
    pub fn scale(&self, factor: f64) -> Resources {
        let mut out = Resources::ZERO;
        for k in ResourceKind::ALL {
            let scaled = round_half_away(self.raw[k.index()] as f64 * factor);
            let max = k.type_max() as f64;
            out.raw[k.index()] = if scaled.is_nan() {
                0
            } else {
                scaled.clamp(-max, max) as i64
            };
        }
        out
    }

    /// Multiplies each component by the matching share, with the rounding of [`Self::scale`].
    #[must_use]
    #[inline]
    pub fn scale_by(&self, shares: &ResourceVector) -> Resources {
        let mut out = Resources::ZERO;
        for k in ResourceKind::ALL {
            let scaled = round_half_away(self.raw[k.index()] as f64 * shares.0[k.index()]);
            let max = k.type_max() as f64;
            out.raw[k.index()] = if scaled.is_nan() {
                0
            } else {
                scaled.clamp(-max, max) as i64
            };
        }
        out
    }

    /// `self >= other` on every component.
    #[inline]
    pub fn dominates(&self, other: &Resources) -> bool {
        (0..RESOURCE_COUNT).all(|i| self.raw[i] >= other.raw[i])
    }

    /// True when every component is zero.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.raw.iter().all(|&v| v == 0)
    }

    /// True when any component is negative.
    pub fn any_negative(&self) -> bool {
        self.raw.iter().any(|&v| v < 0)
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Resources({self})")
    }
}

/// `{user_slots: 1, cpu: 2.5, memory: 4GiB}`; zero components are left out.
impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        let mut first = true;
        for k in ResourceKind::ALL {
            let raw = self.raw_of(k);
            if raw == 0 {
                continue;
            }
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{}: {}", k.name(), format_amount(k, raw))?;
        }
        f.write_str("}")
    }
}

/// A resource map where each component may be absent.
///
/// Used for configured strong guarantees (absent = "infer from the main resource"), resource
/// limits (absent = unlimited) and flows. Values are raw units, like [`Resources`].
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PartialResources {
    raw: [Option<i64>; RESOURCE_COUNT],
}

impl PartialResources {
    /// No component set.
    pub const EMPTY: PartialResources = PartialResources {
        raw: [None; RESOURCE_COUNT],
    };

    /// Builds from raw optional components.
    #[inline]
    pub const fn from_raw(raw: [Option<i64>; RESOURCE_COUNT]) -> PartialResources {
        PartialResources { raw }
    }

    /// Every component set from a full resource vector.
    pub fn from_resources(r: &Resources) -> PartialResources {
        PartialResources {
            raw: r.raw().map(Some),
        }
    }

    /// Raw optional components.
    #[inline]
    pub const fn raw(&self) -> [Option<i64>; RESOURCE_COUNT] {
        self.raw
    }

    /// The raw value of one component, if set.
    #[inline]
    pub const fn raw_of(&self, kind: ResourceKind) -> Option<i64> {
        self.raw[kind.index()]
    }

    /// Whether a component is set.
    #[inline]
    pub const fn is_set(&self, kind: ResourceKind) -> bool {
        self.raw[kind.index()].is_some()
    }

    /// Whether no component is set.
    pub fn is_empty(&self) -> bool {
        self.raw.iter().all(Option::is_none)
    }

    /// Sets a component from natural units.
    #[inline]
    pub fn set(&mut self, kind: ResourceKind, value: f64) {
        self.raw[kind.index()] = Some(Resources::convert(kind, value));
    }

    /// Sets a component in raw units.
    #[inline]
    pub fn set_raw(&mut self, kind: ResourceKind, raw: Option<i64>) {
        self.raw[kind.index()] = raw;
    }

    /// Builder-style setter in natural units.
    #[must_use]
    pub fn with(mut self, kind: ResourceKind, value: f64) -> PartialResources {
        self.set(kind, value);
        self
    }

    /// Absent components become `default`'s.
    #[inline]
    pub fn or(&self, default: &Resources) -> Resources {
        Resources::from_raw(std::array::from_fn(|i| {
            self.raw[i].unwrap_or(default.raw()[i])
        }))
    }

    /// Absent components become 0.
    #[inline]
    pub fn or_zero(&self) -> Resources {
        self.or(&Resources::ZERO)
    }

    /// Absent components become "infinite".
    #[inline]
    pub fn or_infinite(&self) -> Resources {
        self.or(&Resources::infinite())
    }

    /// Components set in `over` replace those of `self`.
    #[must_use]
    pub fn overlay(&self, over: &PartialResources) -> PartialResources {
        PartialResources {
            raw: std::array::from_fn(|i| over.raw[i].or(self.raw[i])),
        }
    }
}

impl fmt::Debug for PartialResources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PartialResources({self})")
    }
}

impl fmt::Display for PartialResources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        let mut first = true;
        for k in ResourceKind::ALL {
            if let Some(raw) = self.raw_of(k) {
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                write!(f, "{}: {}", k.name(), format_amount(k, raw))?;
            }
        }
        f.write_str("}")
    }
}

/// Rounds half away from zero (C's `round`, Rust's `f64::round`).
#[inline]
pub fn round_half_away(x: f64) -> f64 {
    x.round()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_rounds_half_away_from_zero_and_integers_truncate() {
        let cases: &[(ResourceKind, f64, i64)] = &[
            (ResourceKind::Cpu, 1.005, 100), // 1.005 * 100 = 100.49999... in binary
            (ResourceKind::Cpu, 0.125, 13),
            (ResourceKind::Cpu, -0.125, -13),
            (ResourceKind::Cpu, 2.5, 250),
            (ResourceKind::Memory, 10.9, 10),
            (ResourceKind::Memory, -10.9, -10),
            (ResourceKind::UserSlots, 3.999, 3),
            (ResourceKind::Gpu, 1e20, i32::MAX as i64),
        ];
        for &(kind, value, raw) in cases {
            assert_eq!(Resources::convert(kind, value), raw, "{kind} {value}");
        }
    }

    #[test]
    fn scale_rounds_each_component() {
        let r = Resources::from_values([3.0, 1.01, 1.0, 5.0, 0.0]);
        let s = r.scale(0.5);
        assert_eq!(s.raw(), [2, 51, 1, 3, 0]);
    }

    #[test]
    fn display_skips_zero_and_uses_units() {
        let r = Resources::ZERO
            .with(ResourceKind::Cpu, 2.5)
            .with(ResourceKind::Memory, 4.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(r.to_string(), "{cpu: 2.5, memory: 4GiB}");
    }

    #[test]
    fn partial_overlay_and_defaults() {
        let base = PartialResources::EMPTY.with(ResourceKind::Cpu, 1.0);
        let over = PartialResources::EMPTY.with(ResourceKind::Memory, 7.0);
        let merged = base.overlay(&over);
        assert_eq!(merged.or_zero().raw(), [0, 100, 0, 7, 0]);
        assert_eq!(
            merged.or_infinite().raw_of(ResourceKind::UserSlots),
            i64::MAX / 4
        );
    }
}
