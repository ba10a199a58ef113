//! The changes gathered for the next commit: a store [`Batch`] in which a row staged again
//! (an operation, job or node that changed twice before its commit) replaces the earlier one
//! in place, found through an index by id. Staging is O(1) whatever the batch's size: with
//! group commit a batch holds every change made while the previous one was being written, and
//! dropping the earlier copy by a scan made building it quadratic.

use fairsched_store::{Batch, StoredEvent, StoredJob, StoredNode, StoredOperation, StoredTree};
use std::collections::HashMap;

#[derive(Debug, Default)]
pub(super) struct Staged {
    batch: Batch,
    /// Where each staged operation, job and node is in `batch`.
    operations: HashMap<String, usize>,
    jobs: HashMap<String, usize>,
    nodes: HashMap<String, usize>,
}

/// Puts `row` into `rows`, replacing the row of the same id if one is staged.
fn upsert<T>(rows: &mut Vec<T>, index: &mut HashMap<String, usize>, id: &str, row: T) {
    match index.get(id) {
        Some(&at) => rows[at] = row,
        None => {
            index.insert(id.to_string(), rows.len());
            rows.push(row);
        }
    }
}

impl Staged {
    pub(super) fn operation(&mut self, op: StoredOperation) {
        let id = op.id.clone();
        upsert(&mut self.batch.operations, &mut self.operations, &id, op);
    }

    pub(super) fn job(&mut self, job: StoredJob) {
        let id = job.id.clone();
        upsert(&mut self.batch.jobs, &mut self.jobs, &id, job);
    }

    pub(super) fn node(&mut self, node: StoredNode) {
        let id = node.id.clone();
        upsert(&mut self.batch.nodes, &mut self.nodes, &id, node);
    }

    /// A pool tree (there are few: found by a scan).
    pub(super) fn tree(&mut self, tree: StoredTree) {
        self.batch.trees.retain(|s| s.name != tree.name);
        self.batch.trees.push(tree);
    }

    pub(super) fn event(&mut self, event: StoredEvent) {
        self.batch.events.push(event);
    }

    pub(super) fn job_exit(&mut self, exit: fairsched_store::JobExit) {
        self.batch.job_exits.push(exit);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// The batch to commit; staging starts again empty.
    pub(super) fn take(&mut self) -> Batch {
        self.operations.clear();
        self.jobs.clear();
        self.nodes.clear();
        std::mem::take(&mut self.batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, record: &str) -> StoredJob {
        StoredJob {
            id: id.into(),
            operation: "op".into(),
            record: record.into(),
            stdout_tail: None,
            stderr_tail: None,
        }
    }

    #[test]
    fn a_row_staged_again_replaces_the_earlier_one_and_take_starts_anew() {
        let mut staged = Staged::default();
        staged.job(job("1.1", "a"));
        staged.job(job("1.2", "b"));
        staged.job(job("1.1", "c"));
        staged.node(StoredNode {
            id: "n".into(),
            record: "x".into(),
        });
        staged.node(StoredNode {
            id: "n".into(),
            record: "y".into(),
        });
        let batch = staged.take();
        let jobs: Vec<(&str, &str)> = batch
            .jobs
            .iter()
            .map(|j| (j.id.as_str(), j.record.as_str()))
            .collect();
        assert_eq!(jobs, [("1.1", "c"), ("1.2", "b")]);
        assert_eq!(batch.nodes.len(), 1);
        assert_eq!(batch.nodes[0].record, "y");
        assert!(staged.is_empty());
        // The index went with the batch: the same id is a new row of the next one.
        staged.job(job("1.1", "d"));
        let next = staged.take();
        assert_eq!(next.jobs.len(), 1);
        assert_eq!(next.jobs[0].record, "d");
    }
}
