//! Share vectors (`TResourceVector`): one double per resource.

use crate::{RESOURCE_COUNT, ResourceKind, Resources};
use std::fmt;
use std::ops::{Add, Index, IndexMut, Mul, Sub};

/// A share per resource in canonical order. A share is `amount / cluster total`, and 0 where
/// the total is 0; shares may exceed 1 (a demand of twice the cluster is 2.0).
#[derive(Clone, Copy, Default, PartialEq)]
pub struct ResourceVector(pub [f64; RESOURCE_COUNT]);

impl ResourceVector {
    /// All zero.
    pub const ZERO: ResourceVector = ResourceVector([0.0; RESOURCE_COUNT]);
    /// All one.
    pub const ONES: ResourceVector = ResourceVector([1.0; RESOURCE_COUNT]);

    /// The same value on every resource.
    #[inline]
    pub const fn splat(x: f64) -> ResourceVector {
        ResourceVector([x; RESOURCE_COUNT])
    }

    /// `amount_r / total_r`, and 0 where `total_r == 0`.
    #[inline]
    pub fn from_resources(amount: &Resources, total: &Resources) -> ResourceVector {
        // Natural units on both sides (cpu as a decimal), as YTsaurus divides doubles.
        let a = amount.values();
        let t = total.values();
        ResourceVector(std::array::from_fn(|i| {
            if t[i] == 0.0 { 0.0 } else { a[i] / t[i] }
        }))
    }

    /// Component for `kind`.
    #[inline]
    pub fn get(&self, kind: ResourceKind) -> f64 {
        self.0[kind.index()]
    }

    /// `self_r >= other_r` on every resource.
    #[inline]
    pub fn dominates(&self, other: &ResourceVector) -> bool {
        (0..RESOURCE_COUNT).all(|i| self.0[i] >= other.0[i])
    }

    /// `|self_r - other_r| <= eps` on every resource.
    pub fn near(&self, other: &ResourceVector, eps: f64) -> bool {
        (0..RESOURCE_COUNT).all(|i| (self.0[i] - other.0[i]).abs() <= eps)
    }

    /// Componentwise minimum.
    #[must_use]
    #[inline]
    pub fn min(&self, other: &ResourceVector) -> ResourceVector {
        ResourceVector(std::array::from_fn(|i| self.0[i].min(other.0[i])))
    }

    /// Componentwise maximum.
    #[must_use]
    #[inline]
    pub fn max(&self, other: &ResourceVector) -> ResourceVector {
        ResourceVector(std::array::from_fn(|i| self.0[i].max(other.0[i])))
    }

    /// Largest component.
    #[inline]
    pub fn max_component(&self) -> f64 {
        self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    /// Smallest component.
    #[inline]
    pub fn min_component(&self) -> f64 {
        self.0.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// True when every component is exactly zero.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&v| v == 0.0)
    }

    /// Applies `f` to every component.
    #[must_use]
    pub fn map(&self, f: impl Fn(f64) -> f64) -> ResourceVector {
        ResourceVector(self.0.map(f))
    }
}

impl Index<usize> for ResourceVector {
    type Output = f64;
    #[inline]
    fn index(&self, i: usize) -> &f64 {
        &self.0[i]
    }
}

impl IndexMut<usize> for ResourceVector {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut f64 {
        &mut self.0[i]
    }
}

impl Add for ResourceVector {
    type Output = ResourceVector;
    #[inline]
    fn add(self, o: ResourceVector) -> ResourceVector {
        ResourceVector(std::array::from_fn(|i| self.0[i] + o.0[i]))
    }
}

impl Sub for ResourceVector {
    type Output = ResourceVector;
    #[inline]
    fn sub(self, o: ResourceVector) -> ResourceVector {
        ResourceVector(std::array::from_fn(|i| self.0[i] - o.0[i]))
    }
}

impl Mul<f64> for ResourceVector {
    type Output = ResourceVector;
    #[inline]
    fn mul(self, k: f64) -> ResourceVector {
        ResourceVector(std::array::from_fn(|i| self.0[i] * k))
    }
}

impl fmt::Debug for ResourceVector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for ResourceVector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_of_missing_resource_is_zero() {
        let total = Resources::from_values([100.0, 100.0, 0.0, 1000.0, 0.0]);
        let amount = Resources::from_values([10.0, 50.0, 3.0, 2000.0, 5.0]);
        let s = ResourceVector::from_resources(&amount, &total);
        assert_eq!(s.0, [0.1, 0.5, 0.0, 2.0, 0.0]);
    }

    #[test]
    fn comparisons() {
        let a = ResourceVector([0.5, 0.5, 0.0, 0.1, 0.0]);
        let b = ResourceVector([0.4, 0.5, 0.0, 0.1, 0.0]);
        assert!(a.dominates(&b));
        assert!(!b.dominates(&a));
        assert!(a.near(&b, 0.1 + 1e-12));
        assert!(!a.near(&b, 0.05));
        assert_eq!(a.max_component(), 0.5);
        assert_eq!((a - b).0[0], 0.09999999999999998);
    }
}
