//! The guarantees-overcommit alert (code 29000).

use crate::common::POOL_TREE_GUARANTEES_OVERCOMMIT;
use crate::trees::PoolTreeConfig;
use fairsched_resources::{PartialResources, ResourceKind, Resources, format_amount};
use serde::Serialize;

/// A tree alert: the configuration is accepted, but something needs an operator's attention.
/// Serializes as `{"code": .., "message": .., "attributes": {..}}`, the shape of the server's
/// errors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alert {
    /// YTsaurus error code (29000 `PoolTreeGuaranteesOvercommit`).
    pub code: u32,
    /// Human-readable description.
    pub message: String,
    /// The numbers behind the alert.
    pub attributes: OvercommitAttributes,
}

/// Attributes of the guarantees-overcommit alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OvercommitAttributes {
    /// Sum of the root children's configured strong guarantees (unset components count as 0).
    pub total_strong_guarantee_resources: Resources,
    /// Sum of the root children's configured resource flows.
    pub total_resource_flow: Resources,
    /// Sum of the root children's configured burst guarantees.
    pub total_burst_guarantee_resources: Resources,
    /// The cluster's (the tree's nodes') total resources.
    pub total_cluster_resources: Resources,
    /// Resources on which the cluster total is exceeded, in canonical order.
    pub overcommitted_resources: Vec<String>,
}

/// Returns the 29000 alert when the strong guarantees of the root's children (alone, or plus
/// resource flows, or plus burst guarantees) exceed `cluster_total` on some resource.
///
/// Such a tree is **not** rejected: the fair-share computation scales the guarantees down to
/// fit the cluster, and the scheduler raises this alert. The check uses the configured
/// components (guarantee components inferred from the main resource are proportional to it and
/// are scaled with it). A cluster with no nodes (total 0) overcommits any positive guarantee;
/// the message then says that the tree has no nodes yet rather than comparing with 0.
pub fn guarantee_overcommit_alert(
    tree: &PoolTreeConfig,
    cluster_total: &Resources,
) -> Option<Alert> {
    let sum = |get: fn(&crate::pool::PoolNode) -> &PartialResources| {
        tree.pools
            .values()
            .fold(Resources::ZERO, |acc, pool| acc.add(&get(pool).or_zero()))
    };
    let strong = sum(|p| &p.strong_guarantee_resources);
    let flow = sum(|p| &p.integral_guarantees.resource_flow);
    let burst = sum(|p| &p.integral_guarantees.burst_guarantee_resources);

    let exceeded = |amount: &Resources| -> Vec<ResourceKind> {
        ResourceKind::ALL
            .into_iter()
            .filter(|&k| amount.raw_of(k) > cluster_total.raw_of(k))
            .collect()
    };
    let comparisons = [
        ("Strong guarantees", strong),
        ("Strong guarantees and resource flows", strong.add(&flow)),
        ("Strong guarantees and burst guarantees", strong.add(&burst)),
    ];
    let (what, amount, over) = comparisons
        .into_iter()
        .map(|(what, amount)| (what, amount, exceeded(&amount)))
        .find(|(_, _, over)| !over.is_empty())?;
    let what_lower = what.to_lowercase();
    let label = what_lower.strip_prefix("strong ").unwrap_or(&what_lower);
    let message = if *cluster_total == Resources::ZERO {
        // Not "cpu: 35 > 0": a tree without nodes has nothing to compare with yet.
        let amounts: Vec<String> = over
            .iter()
            .map(|&k| format!("{k}: {}", format_amount(k, amount.raw_of(k))))
            .collect();
        format!(
            "the tree has no nodes yet: the {what_lower} of the root's pools ({}) are checked \
             against the cluster's resources once nodes join",
            amounts.join(", ")
        )
    } else {
        let details: Vec<String> = over
            .iter()
            .map(|&k| {
                format!(
                    "{k}: {label} {} > cluster {}",
                    format_amount(k, amount.raw_of(k)),
                    format_amount(k, cluster_total.raw_of(k))
                )
            })
            .collect();
        format!(
            "{what} of the root's pools exceed the cluster's resources ({}); guarantees are \
             scaled down proportionally to fit",
            details.join(", ")
        )
    };
    let names: Vec<String> = over.iter().map(|k| k.name().to_string()).collect();
    Some(Alert {
        code: POOL_TREE_GUARANTEES_OVERCOMMIT,
        message,
        attributes: OvercommitAttributes {
            total_strong_guarantee_resources: strong,
            total_resource_flow: flow,
            total_burst_guarantee_resources: burst,
            total_cluster_resources: *cluster_total,
            overcommitted_resources: names,
        },
    })
}
