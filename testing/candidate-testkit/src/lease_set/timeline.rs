//! [`Timeline`]: the holds of several `lease-set-node` processes, built
//! from their events, and the checks over them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::Event;

/// One hold of one key by one process: `[from, to)` on `CLOCK_MONOTONIC`,
/// nanoseconds. `to` is `None` while the hold lasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The process (its index in the [`Timeline`]).
    pub node: usize,
    /// The key.
    pub key: String,
    /// The epoch of the hold.
    pub epoch: u64,
    /// The `held` stamp.
    pub from: u64,
    /// The `free` stamp, or the moment the process was killed or began to
    /// close; `None` while it still holds the key.
    pub to: Option<u64>,
}

impl Interval {
    fn end(&self) -> u64 {
        self.to.unwrap_or(u64::MAX)
    }

    /// True if the two holds share a moment (half-open intervals).
    pub fn overlaps(&self, other: &Interval) -> bool {
        self.key == other.key && self.from < other.end() && other.from < self.end()
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} held {} in epoch {} from {}",
            self.node, self.key, self.epoch, self.from
        )?;
        match self.to {
            Some(to) => write!(f, " to {to}"),
            None => write!(f, " on"),
        }
    }
}

/// What [`check_intervals`] found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two processes held the same key at the same moment.
    Overlap(Interval, Interval),
    /// A later hold of a key had a lower epoch than an earlier one, or two
    /// processes held it in the same epoch.
    EpochOrder {
        /// The hold that began first.
        earlier: Interval,
        /// The hold that began later.
        later: Interval,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap(a, b) => write!(f, "two holders at once: {a}; {b}"),
            Violation::EpochOrder { earlier, later } => {
                write!(f, "epoch did not grow: {earlier}; then {later}")
            }
        }
    }
}

/// Checks holds of any number of keys and processes: no two processes hold
/// a key at the same moment, and every later hold of a key has a higher
/// epoch (the same epoch only for the same process, which can see its own
/// hold lapse and come back when a renewal lands late).
///
/// ```
/// use candidate_testkit::lease_set::{check_intervals, Interval};
///
/// let hold = |node, epoch, from, to| Interval { node, key: "k".into(), epoch, from, to };
/// assert!(check_intervals(&[hold(0, 1, 0, Some(10)), hold(1, 2, 10, None)]).is_empty());
/// assert_eq!(check_intervals(&[hold(0, 1, 0, Some(10)), hold(1, 2, 9, None)]).len(), 1);
/// ```
pub fn check_intervals(intervals: &[Interval]) -> Vec<Violation> {
    let mut by_key: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for i in intervals {
        by_key.entry(&i.key).or_default().push(i);
    }
    let mut found = Vec::new();
    for (_, mut holds) in by_key {
        holds.sort_by_key(|i| (i.from, i.end()));
        for (n, a) in holds.iter().enumerate() {
            for b in &holds[n + 1..] {
                if a.node != b.node && a.overlaps(b) {
                    found.push(Violation::Overlap((*a).clone(), (*b).clone()));
                }
                let grew = b.epoch > a.epoch || (b.epoch == a.epoch && b.node == a.node);
                if !grew {
                    found.push(Violation::EpochOrder {
                        earlier: (*a).clone(),
                        later: (*b).clone(),
                    });
                }
            }
        }
    }
    found
}

#[derive(Debug, Default)]
struct Node {
    name: String,
    /// Key → (epoch, held stamp) of the holds that last.
    open: HashMap<String, (u64, u64)>,
    ready: Option<u64>,
    /// When the process was killed or began to close.
    ended: Option<u64>,
}

/// The holds of several processes over the same keys, built from their
/// [`Event`]s.
///
/// Feed each process's events in its own order with
/// [`record`](Timeline::record) (the processes may interleave in any
/// order); when a process is killed, read the rest of its output first,
/// then call [`end`](Timeline::end) with the moment of the kill.
#[derive(Debug, Default)]
pub struct Timeline {
    nodes: Vec<Node>,
    done: Vec<Interval>,
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a process; returns its index.
    pub fn add_node(&mut self, name: &str) -> usize {
        self.nodes.push(Node {
            name: name.to_owned(),
            ..Node::default()
        });
        self.nodes.len() - 1
    }

    /// The name of process `node`.
    pub fn name(&self, node: usize) -> &str {
        &self.nodes[node].name
    }

    /// Records one event of process `node`. Errors: an `error` line, or an
    /// event that contradicts what the process said before (a key held
    /// twice, freed while not held, held after the process ended).
    pub fn record(&mut self, node: usize, event: &Event) -> Result<(), String> {
        let n = &mut self.nodes[node];
        let who = n.name.clone();
        match event {
            Event::Ready { at } => n.ready = Some(*at),
            Event::Held { key, epoch, at } => {
                if n.ended.is_some() {
                    return Err(format!("{who}: {key} held after the end"));
                }
                if let Some(old) = n.open.insert(key.clone(), (*epoch, *at)) {
                    return Err(format!("{who}: {key} held twice ({old:?}, then {event})"));
                }
            }
            Event::Free {
                key, held_until, ..
            } => {
                let Some((epoch, from)) = n.open.remove(key) else {
                    return Err(format!("{who}: {key} freed while not held"));
                };
                self.done.push(Interval {
                    node,
                    key: key.clone(),
                    epoch,
                    from,
                    to: Some(*held_until),
                });
            }
            Event::Closing { at } => self.end(node, *at),
            Event::Closed { .. } | Event::Note(_) => {}
            Event::Error(message) => return Err(format!("{who}: error {message}")),
        }
        Ok(())
    }

    /// Ends every hold of process `node` at `at` (the moment it was killed
    /// or began to close).
    pub fn end(&mut self, node: usize, at: u64) {
        let n = &mut self.nodes[node];
        n.ended.get_or_insert(at);
        for (key, (epoch, from)) in n.open.drain() {
            self.done.push(Interval {
                node,
                key,
                epoch,
                from,
                // A hold seen in the instant between the kill's stamp and
                // the process's death still counts from its stamp on.
                to: Some(at.max(from)),
            });
        }
    }

    /// True once process `node` printed `ready`.
    pub fn is_ready(&self, node: usize) -> bool {
        self.nodes[node].ready.is_some()
    }

    /// The processes holding `key` now, as far as their events tell.
    pub fn holders(&self, key: &str) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].open.contains_key(key))
            .collect()
    }

    /// The keys process `node` holds now, sorted.
    pub fn held_by(&self, node: usize) -> Vec<String> {
        let mut keys: Vec<String> = self.nodes[node].open.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Every hold, ended or not.
    pub fn intervals(&self) -> Vec<Interval> {
        let mut all = self.done.clone();
        for (node, n) in self.nodes.iter().enumerate() {
            for (key, (epoch, from)) in &n.open {
                all.push(Interval {
                    node,
                    key: key.clone(),
                    epoch: *epoch,
                    from: *from,
                    to: None,
                });
            }
        }
        all
    }

    /// The first hold of `key` that began at or after `at`.
    pub fn first_hold_since(&self, key: &str, at: u64) -> Option<Interval> {
        self.intervals()
            .into_iter()
            .filter(|i| i.key == key && i.from >= at)
            .min_by_key(|i| i.from)
    }

    /// [`check_intervals`] over every hold.
    pub fn check(&self) -> Vec<Violation> {
        check_intervals(&self.intervals())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(node: usize, key: &str, epoch: u64, from: u64, to: Option<u64>) -> Interval {
        Interval {
            node,
            key: key.into(),
            epoch,
            from,
            to,
        }
    }

    #[test]
    fn overlapping_holds_of_two_processes_are_found() {
        let a = hold(0, "k", 1, 100, Some(200));
        for b in [
            hold(1, "k", 2, 199, Some(300)), // starts before a ends
            hold(1, "k", 2, 50, Some(101)),  // ends after a starts
            hold(1, "k", 2, 120, Some(130)), // inside a
            hold(1, "k", 2, 50, None),       // still on, began before
            hold(1, "k", 2, 150, None),      // still on, began inside
        ] {
            let found = check_intervals(&[a.clone(), b.clone()]);
            assert!(
                found.iter().any(|v| matches!(v, Violation::Overlap(..))),
                "{b} vs {a}: {found:?}"
            );
        }
        // Two open holds at once.
        let found = check_intervals(&[hold(0, "k", 1, 0, None), hold(2, "k", 2, 5, None)]);
        assert!(matches!(found[..], [Violation::Overlap(..)]));
    }

    #[test]
    fn adjacent_holds_other_keys_and_one_process_do_not_conflict() {
        let ok = [
            hold(0, "k", 1, 100, Some(200)),
            hold(1, "k", 2, 200, Some(300)), // half-open: touching is fine
            hold(2, "k", 3, 300, None),
            hold(1, "j", 1, 0, None), // another key
            hold(0, "j", 7, 150, Some(160)),
        ];
        let found = check_intervals(&ok);
        // "j": node 1's open hold from 0 overlaps node 0's [150, 160).
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(matches!(&found[0], Violation::Overlap(a, _) if a.key == "j"));
        assert!(check_intervals(&ok[..3]).is_empty());
    }

    #[test]
    fn epochs_must_grow_across_holders() {
        let lower = [hold(0, "k", 5, 0, Some(10)), hold(1, "k", 4, 20, Some(30))];
        assert!(matches!(
            check_intervals(&lower)[..],
            [Violation::EpochOrder { .. }]
        ));
        let same_other = [hold(0, "k", 5, 0, Some(10)), hold(1, "k", 5, 20, None)];
        assert_eq!(check_intervals(&same_other).len(), 1);
        let same_own = [hold(0, "k", 5, 0, Some(10)), hold(0, "k", 5, 20, None)];
        assert!(check_intervals(&same_own).is_empty());
    }

    #[test]
    fn the_timeline_builds_intervals_and_ends_killed_processes() {
        let mut t = Timeline::new();
        let a = t.add_node("a");
        let b = t.add_node("b");
        let ev = |s: &str| Event::parse(s).unwrap();
        t.record(a, &ev("held key-0 1 100")).unwrap();
        t.record(a, &ev("held key-1 1 100")).unwrap();
        t.record(a, &ev("free key-1 150 140")).unwrap();
        t.record(b, &ev("held key-1 2 160")).unwrap();
        assert_eq!(t.holders("key-0"), [a]);
        assert_eq!(t.held_by(b), ["key-1"]);
        assert!(t.check().is_empty());
        // A is killed at 200; B's takeover of key-0 at 190 overlaps.
        t.end(a, 200);
        t.record(b, &ev("held key-0 2 190")).unwrap();
        let found = t.check();
        assert!(
            matches!(&found[..], [Violation::Overlap(x, y)] if x.node == a && y.node == b),
            "{found:?}"
        );
        assert_eq!(t.first_hold_since("key-0", 150).unwrap().node, b);
        // Contradictions are refused.
        assert!(t.record(b, &ev("held key-0 3 300")).is_err());
        assert!(t.record(b, &ev("free key-9 300 290")).is_err());
        assert!(t.record(a, &ev("held key-5 1 300")).is_err());
        assert!(t.record(b, &ev("error boom")).is_err());
    }

    #[test]
    fn closing_ends_every_hold() {
        let mut t = Timeline::new();
        let a = t.add_node("a");
        t.record(a, &Event::parse("held k 1 10").unwrap()).unwrap();
        t.record(a, &Event::parse("closing 20").unwrap()).unwrap();
        assert!(t.holders("k").is_empty());
        assert_eq!(t.intervals(), [hold(a, "k", 1, 10, Some(20))]);
    }
}
