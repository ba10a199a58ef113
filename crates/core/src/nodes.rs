//! Node commands: a node joins, changes (resources, tags, enabled), drains or leaves; its
//! allocations end when it can no longer run them. The commands are [`Scheduler`] methods;
//! ending a moved node's allocations, which a configuration change does too, is a `Parts` one.

use crate::error::*;
use crate::event::HoldEnd;
use crate::model::{AllocationId, Millis, Node, NodeId, NodeSpec, PreemptionReason};
use crate::scheduler::*;
use fairsched_resources::Resources;
use std::collections::BTreeSet;

impl Scheduler {
    // ---- nodes ------------------------------------------------------------------------------

    /// Registers a node. Rejected if a node with that id exists.
    pub fn add_node(&mut self, _now: Millis, spec: NodeSpec) -> Result<(), CoreError> {
        self.holds.room_epoch += 1;
        if self.books.nodes.contains_key(&spec.id) {
            return Err(CoreError::new(format!(
                "node {:?} already exists",
                spec.id.0
            )));
        }
        if spec.resources.any_negative() {
            return Err(CoreError::new(format!(
                "node {:?}: resources must not be negative",
                spec.id.0
            )));
        }
        let tree = Self::tree_for_tags(&self.trees, &spec.id, &spec.tags)?;
        let id = spec.id.clone();
        self.books.nodes.insert(
            spec.id.clone(),
            Node {
                id: spec.id,
                resources: spec.resources,
                tags: spec.tags,
                scheduler_jobs_enabled: true,
                tree,
                draining: false,
                allocations: BTreeSet::new(),
                usage: Resources::ZERO,
                last_preemptive_scheduling: None,
                overcommit_since: None,
            },
        );
        self.books.node_changed(&id);
        Ok(())
    }

    /// Changes a node's resources, tags or `scheduler_jobs_enabled`. Disabling aborts its
    /// allocations (their jobs go back to pending and run elsewhere).
    pub fn set_node(
        &mut self,
        now: Millis,
        id: &NodeId,
        resources: Option<Resources>,
        tags: Option<BTreeSet<String>>,
        scheduler_jobs_enabled: Option<bool>,
    ) -> Result<(), CoreError> {
        if resources.is_some_and(|r| r.any_negative()) {
            return Err(CoreError::new(format!(
                "node {:?}: resources must not be negative",
                id.0
            )));
        }
        let new_tree = match &tags {
            Some(t) => Some(Self::tree_for_tags(&self.trees, id, t)?),
            None => None,
        };
        let node = self
            .books
            .nodes
            .get_mut(id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", id.0)))?;
        let moved = new_tree.is_some_and(|t| t != node.tree);
        if let Some(tree) = new_tree {
            node.tree = tree;
        }
        if let Some(r) = resources {
            // Room may have grown: gangs turned down or waiting for room look again.
            self.holds.room_epoch += 1;
            node.resources = r;
            // The overcommit clock restarts whenever the node fits again.
            if node.resources.dominates(&node.usage) {
                node.overcommit_since = None;
            }
        }
        if let Some(t) = tags {
            node.tags = t;
        }
        if moved {
            self.parts().abort_allocations_of_moved_node(now, id);
        }
        let node = self.books.nodes.get_mut(id).expect("checked above");
        if let Some(enabled) = scheduler_jobs_enabled {
            node.scheduler_jobs_enabled = enabled;
            if !enabled {
                let ids: Vec<AllocationId> = node.allocations.iter().copied().collect();
                let mut s = self.parts();
                for a in ids {
                    s.end_allocation(
                        now,
                        a,
                        EndKind::Preempted(PreemptionReason::NodeDisabled, None),
                    );
                }
            }
        }
        self.books.node_changed(id);
        Ok(())
    }

    /// Starts (`true`) or ends draining a node: while draining, no new allocation starts on it
    /// and its running allocations continue until they end.
    pub fn set_node_draining(
        &mut self,
        _now: Millis,
        id: &NodeId,
        draining: bool,
    ) -> Result<(), CoreError> {
        let node = self
            .books
            .nodes
            .get_mut(id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", id.0)))?;
        node.draining = draining;
        self.books.node_changed(id);
        Ok(())
    }

    /// Removes a node; its allocations are lost and their jobs go back to pending.
    pub fn remove_node(&mut self, now: Millis, id: &NodeId) -> Result<(), CoreError> {
        let node = self
            .books
            .nodes
            .get(id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", id.0)))?;
        let ids: Vec<AllocationId> = node.allocations.iter().copied().collect();
        let mut s = self.parts();
        for a in ids {
            s.end_allocation(now, a, EndKind::Preempted(PreemptionReason::NodeLost, None));
        }
        self.books.nodes.remove(id);
        self.books.node_changed(id);
        // Nobody is left to stop anything there.
        self.orders.remove(id);
        crate::reservation::release_reservation(
            &mut self.holds,
            &mut self.events,
            now,
            id,
            HoldEnd::NodeUnavailable,
        );
        crate::gang::drop_gang_holds_on(&mut self.holds, &mut self.events, now, id);
        Ok(())
    }
}

impl Parts<'_> {
    /// A node that moved to another tree loses its allocations: they belonged to the old tree
    /// (their jobs go back to pending and run again in the trees of their operations).
    pub(crate) fn abort_allocations_of_moved_node(&mut self, now: Millis, id: &NodeId) {
        let ids: Vec<AllocationId> = self
            .books
            .nodes
            .get(id)
            .map(|n| n.allocations.iter().copied().collect())
            .unwrap_or_default();
        for a in ids {
            self.end_allocation(
                now,
                a,
                EndKind::Preempted(PreemptionReason::NodeFairShareTreeChanged, None),
            );
        }
    }
}
