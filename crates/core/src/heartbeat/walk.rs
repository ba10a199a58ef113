//! The heartbeat's descent state (see [`super`]), kept per tree between fair-share updates.

use fairsched_resources::Resources;

/// Dynamic state of the tree for the descent: usage, activity and satisfaction of every
/// element.
///
/// The scheduler keeps one for the whole cluster between fair-share updates (one per tree,
/// `Scheduler::walks`),
/// updated along the changed path whenever an operation's usage, pending jobs or state change,
/// so that a heartbeat does not walk the whole tree. A heartbeat deactivates, for itself only,
/// the operations that do not fit its node and restores them when it is done.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Walk {
    /// The tree (index) the walk belongs to.
    pub(crate) tree: usize,
    pub(crate) usage: Vec<Resources>,
    pub(crate) active: Vec<bool>,
    /// Satisfaction of each element for the descent (kept up to date along changed paths).
    pub(crate) sat: Vec<f64>,
}
