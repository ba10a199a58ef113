//! The time-ordered agenda of a simulation: what happens next in virtual time.

use fairsched_core::Millis;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// A min-heap of entries ordered by time, then key, then the order they were pushed in.
///
/// The key says what happens and ranks what happens at the same time: the scenario runner's
/// keys are its phases (events, fair-share grid, heartbeat rounds), the cluster's are the
/// (node, allocation) of job ends.
#[derive(Debug)]
pub struct Agenda<K: Ord> {
    heap: BinaryHeap<Reverse<Entry<K>>>,
    seq: u64,
}

#[derive(Debug)]
struct Entry<K> {
    t: Millis,
    key: K,
    seq: u64,
}

impl<K: Ord> Entry<K> {
    fn rank(&self) -> (Millis, &K, u64) {
        (self.t, &self.key, self.seq)
    }
}

impl<K: Ord> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.rank() == other.rank()
    }
}

impl<K: Ord> Eq for Entry<K> {}

impl<K: Ord> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl<K: Ord> Default for Agenda<K> {
    fn default() -> Self {
        Agenda {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<K: Ord> Agenda<K> {
    /// Adds `key` at time `t`.
    pub fn push(&mut self, t: Millis, key: K) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            t,
            key,
            seq: self.seq,
        }));
    }

    /// The time of the first entry.
    pub fn next_time(&self) -> Option<Millis> {
        self.heap.peek().map(|Reverse(e)| e.t)
    }

    /// The first entry.
    pub fn peek(&self) -> Option<(Millis, &K)> {
        self.heap.peek().map(|Reverse(e)| (e.t, &e.key))
    }

    /// Takes the first entry if `take(time, key)` says so.
    pub fn pop_if(&mut self, take: impl FnOnce(Millis, &K) -> bool) -> Option<(Millis, K)> {
        let Reverse(first) = self.heap.peek()?;
        if !take(first.t, &first.key) {
            return None;
        }
        self.heap.pop().map(|Reverse(e)| (e.t, e.key))
    }

    /// Takes the first entry if it is due at `t` (its time is `t` or earlier).
    pub fn pop_due(&mut self, t: Millis) -> Option<(Millis, K)> {
        self.pop_if(|at, _| at <= t)
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_by_time_then_key_then_push_order() {
        let mut agenda = Agenda::default();
        for (t, key) in [(5, 'b'), (3, 'z'), (5, 'a'), (5, 'b'), (1, 'q')] {
            agenda.push(t, key);
        }
        assert_eq!(agenda.len(), 5);
        assert_eq!(agenda.next_time(), Some(1));
        assert_eq!(agenda.pop_due(0), None, "nothing is due before 1");
        let mut order = Vec::new();
        while let Some(entry) = agenda.pop_due(5) {
            order.push(entry);
        }
        assert_eq!(order, [(1, 'q'), (3, 'z'), (5, 'a'), (5, 'b'), (5, 'b')]);
        assert!(agenda.is_empty());
    }

    #[test]
    fn pop_if_takes_only_what_it_is_asked_for() {
        let mut agenda = Agenda::default();
        agenda.push(2, 1u8);
        agenda.push(2, 2u8);
        assert_eq!(agenda.pop_if(|t, &k| t == 2 && k == 2), None);
        assert_eq!(agenda.peek(), Some((2, &1)));
        assert_eq!(agenda.pop_if(|t, &k| t == 2 && k == 1), Some((2, 1)));
        assert_eq!(agenda.pop_if(|t, _| t == 3), None);
        assert_eq!(agenda.pop_if(|_, _| true), Some((2, 2)));
        assert_eq!(agenda.pop_if(|_, _| true), None);
    }
}
