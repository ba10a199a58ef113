//! Scheduling and starvation statuses (scheduler spec §2.1–§2.2), computed after every fair-share
//! update from the update's shares.

use crate::model::Millis;
use crate::tree::{Arena, ElementRef, SchedulingStatus, StarvationStatus};
use fairsched_config::TreeConfig;
use fairsched_resources::{RESOURCE_COUNT, ResourceVector};
use std::collections::BTreeMap;

/// Tolerance used when comparing a fair share with a demand ("fair share covers the demand").
const LARGE_EPSILON: f64 = 1e-4;

/// `bound` strictly dominates `usage` on the resources that are not blocked (a resource is
/// blocked when the fair share already covers the demand there). When every resource is
/// blocked, one strictly larger resource suffices.
pub fn strictly_dominates_on_non_blocked(
    bound: &ResourceVector,
    usage: &ResourceVector,
    fair: &ResourceVector,
    demand: &ResourceVector,
) -> bool {
    let mut any_non_blocked = false;
    let mut all_non_blocked_greater = true;
    let mut any_greater = false;
    for r in 0..RESOURCE_COUNT {
        let greater = bound[r] > usage[r];
        any_greater |= greater;
        if fair[r] < demand[r] {
            any_non_blocked = true;
            all_non_blocked_greater &= greater;
        }
    }
    if any_non_blocked {
        all_non_blocked_greater
    } else {
        any_greater
    }
}

/// Computes `scheduling_status` and `starvation_status` for every element of a tree's arena
/// under its configuration, advancing the tree's "below fair share since" clocks (by pool
/// name, or `operation:<id>`). Returns the first time after `now` at which an element's
/// starvation status changes by the clock alone (it starves, or starves aggressively, if
/// its usage and shares stay as they are): an update then would find it so.
pub(crate) fn update_statuses(
    arena: &mut Arena,
    config: &TreeConfig,
    below_fair_share_since: &mut BTreeMap<String, Millis>,
    now: Millis,
) -> Option<Millis> {
    let mut next_change: Option<Millis> = None;
    // A status compared with `now > since + timeout` changes at `since + timeout + 1`.
    let mut changes_at = |since: Millis, timeout: u64| {
        let at = since.saturating_add(timeout).saturating_add(1);
        if at > now && at < Millis::MAX {
            next_change = Some(next_change.map_or(at, |n| n.min(at)));
        }
    };
    let enable_pool_starvation = config.enable_pool_starvation;
    let aggressive_timeout = config.fair_share_aggressive_starvation_timeout_ms;
    let mut seen = std::collections::BTreeSet::new();
    for i in 1..arena.elements.len() {
        let e = &arena.elements[i];
        let a = &e.attrs;
        let fair = a.fair_share.total;
        let demand = a.demand_share;
        let usage = a.usage_share;
        let is_operation = matches!(e.kind, ElementRef::Operation(_));
        // An operation whose whole demand fits in its fair share starves as soon as its usage is
        // below the fair share (tolerance 1.0); pools keep their tolerance.
        let tolerance =
            if is_operation && (fair + ResourceVector::splat(LARGE_EPSILON)).dominates(&demand) {
                1.0
            } else {
                e.tolerance
            };
        let bound = (fair * tolerance).min(&demand);
        let below = strictly_dominates_on_non_blocked(&bound, &usage, &fair, &demand);
        let status = if below {
            SchedulingStatus::BelowFairShare
        } else {
            SchedulingStatus::Normal
        };
        let key = match &e.kind {
            ElementRef::Root => continue,
            ElementRef::Pool(p) => p.clone(),
            ElementRef::Operation(o) => format!("operation:{}", o.0),
        };
        let timeout = (e.starvation_timeout_ms as f64 * e.timeout_scale) as u64;
        let aggressive_timeout = (aggressive_timeout as f64 * e.timeout_scale) as u64;
        let aggressive_enabled = e.aggressive_starvation_enabled;
        let evaluated = is_operation || enable_pool_starvation;
        let starvation = if status == SchedulingStatus::Normal || !evaluated {
            below_fair_share_since.remove(&key);
            StarvationStatus::NonStarving
        } else {
            seen.insert(key.clone());
            match below_fair_share_since.get(&key) {
                None => {
                    below_fair_share_since.insert(key, now);
                    changes_at(now, timeout);
                    if aggressive_enabled {
                        changes_at(now, aggressive_timeout);
                    }
                    StarvationStatus::NonStarving
                }
                Some(&since) => {
                    changes_at(since, timeout);
                    if aggressive_enabled {
                        changes_at(since, aggressive_timeout);
                    }
                    // Saturating: a timeout of u64::MAX ms means never.
                    if aggressive_enabled && now > since.saturating_add(aggressive_timeout) {
                        StarvationStatus::AggressivelyStarving
                    } else if now > since.saturating_add(timeout) {
                        StarvationStatus::Starving
                    } else {
                        StarvationStatus::NonStarving
                    }
                }
            }
        };
        let e = &mut arena.elements[i];
        e.scheduling_status = status;
        e.starvation_status = starvation;
    }
    // Forget clocks of elements that no longer exist.
    below_fair_share_since.retain(|k, _| seen.contains(k));
    next_change
}
