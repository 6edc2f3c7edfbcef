//! Dependency graph checks: finding the cycle a new edge would close.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Adjacency along the `blocks` direction: `blocker -> {blocked, …}`.
#[derive(Debug, Default, Clone)]
pub(crate) struct BlocksGraph {
    edges: BTreeMap<u64, BTreeSet<u64>>,
}

impl BlocksGraph {
    /// Adds `blocker -> blocked`.
    pub(crate) fn add(&mut self, blocker: u64, blocked: u64) {
        self.edges.entry(blocker).or_default().insert(blocked);
    }

    /// Removes `blocker -> blocked`.
    pub(crate) fn remove(&mut self, blocker: u64, blocked: u64) {
        if let Some(set) = self.edges.get_mut(&blocker) {
            set.remove(&blocked);
        }
    }

    /// The cycle that adding `blocker -> blocked` would close, as ids along
    /// the `blocks` direction starting and ending with `blocker`, or `None`.
    pub(crate) fn cycle_if_added(&self, blocker: u64, blocked: u64) -> Option<Vec<u64>> {
        if blocker == blocked {
            return Some(vec![blocker, blocker]);
        }
        // Breadth-first from `blocked`, looking for `blocker`: the shortest
        // path names the shortest cycle.
        let mut parent: BTreeMap<u64, u64> = BTreeMap::new();
        let mut queue = VecDeque::from([blocked]);
        let mut seen = BTreeSet::from([blocked]);
        while let Some(node) = queue.pop_front() {
            for &next in self.edges.get(&node).into_iter().flatten() {
                if !seen.insert(next) {
                    continue;
                }
                parent.insert(next, node);
                if next == blocker {
                    let mut path = vec![blocker];
                    let mut cur = blocker;
                    while let Some(&p) = parent.get(&cur) {
                        path.push(p);
                        cur = p;
                    }
                    // path: blocker <- … <- blocked; reverse to walk forward.
                    path.reverse();
                    let mut cycle = vec![blocker];
                    cycle.extend(path);
                    return Some(cycle);
                }
                queue.push_back(next);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_cycle_in_blocks_order() {
        let mut g = BlocksGraph::default();
        g.add(2, 3);
        g.add(3, 1);
        assert_eq!(g.cycle_if_added(1, 2), Some(vec![1, 2, 3, 1]));
        assert_eq!(g.cycle_if_added(2, 1), None);
        assert_eq!(g.cycle_if_added(4, 4), Some(vec![4, 4]));
        assert_eq!(g.cycle_if_added(3, 2), Some(vec![3, 2, 3]));
    }
}
