//! A linearizability checker for one key's history (Wing and Gong's search with Lowe's
//! memoization): the key is a register that may be absent, with a version, written by create
//! (only when absent) and conditional setData (when the expected version matches, or -1), and
//! read by getData.
//!
//! An operation whose outcome is unknown (the client timed out or its server crashed) may have
//! taken effect at any point after it was invoked, or never.

use std::collections::HashSet;

/// The register: absent, or (value, version).
pub type State = Option<(u64, i32)>;

/// An operation on the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// create with this value.
    Create(u64),
    /// setData with this value if the version matches (-1: any).
    Set(u64, i32),
    /// getData (after a sync).
    Get,
}

/// What the server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ret {
    /// create done.
    Created,
    /// setData done; the node's new version.
    Set(i32),
    /// NONODE.
    NoNode,
    /// NODEEXISTS.
    Exists,
    /// BADVERSION.
    BadVersion,
    /// getData's value and version.
    Value(u64, i32),
}

/// One operation of a history: invoked at `call`; returned `result` at `ret`, or unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The operation.
    pub op: Op,
    /// Invocation time.
    pub call: u64,
    /// Completion: (time, answer); None when unknown.
    pub done: Option<(u64, Ret)>,
}

/// The register's behaviour: the next state and the answer `op` gets in `state`.
pub fn step(state: State, op: Op) -> (State, Ret) {
    match (op, state) {
        (Op::Create(v), None) => (Some((v, 0)), Ret::Created),
        (Op::Create(_), Some(_)) => (state, Ret::Exists),
        (Op::Set(_, _), None) => (None, Ret::NoNode),
        (Op::Set(v, e), Some((_, ver))) if e == -1 || e == ver => (Some((v, ver + 1)), Ret::Set(ver + 1)),
        (Op::Set(_, _), Some(_)) => (state, Ret::BadVersion),
        (Op::Get, None) => (None, Ret::NoNode),
        (Op::Get, Some((v, ver))) => (state, Ret::Value(v, ver)),
    }
}

/// Search steps allowed per history: histories are kept small, so this is never reached by
/// a linearizable one; reaching it is reported (never taken as success).
const STEPS_MAX: u64 = 5_000_000;

/// Checks that the history (starting from an absent key) is linearizable.
///
/// Errors: no linearization exists (or the search exceeded its bound), with the history.
pub fn check(events: &[Event]) -> Result<(), String> {
    let n = events.len();
    let words = n.div_ceil(64).max(1);
    let required: usize = events.iter().filter(|e| e.done.is_some()).count();
    let mut seen: HashSet<(Vec<u64>, State)> = HashSet::new();
    // Depth-first over (linearized set, state), explicit stack: (set, state, linearized
    // completed ops).
    let mut stack: Vec<(Vec<u64>, State, usize)> = vec![(vec![0; words], None, 0)];
    let mut steps = 0u64;
    while let Some((set, state, count)) = stack.pop() {
        if count == required {
            return Ok(());
        }
        steps += 1;
        if steps > STEPS_MAX {
            return Err(format!("search bound exceeded on {n} operations: {events:?}"));
        }
        let taken = |i: usize| set[i / 64] >> (i % 64) & 1 == 1;
        // The earliest completion among operations not linearized yet: only operations
        // invoked by then may come next.
        let horizon = (0..n).filter(|&i| !taken(i)).filter_map(|i| events[i].done.map(|d| d.0)).min();
        for i in 0..n {
            if taken(i) || horizon.is_some_and(|h| events[i].call > h) {
                continue;
            }
            let (next, answer) = step(state, events[i].op);
            let ok = match events[i].done {
                Some((_, r)) => r == answer,
                None => true,
            };
            if !ok {
                continue;
            }
            let mut s2 = set.clone();
            s2[i / 64] |= 1 << (i % 64);
            if seen.insert((s2.clone(), next)) {
                stack.push((s2, next, count + usize::from(events[i].done.is_some())));
            }
        }
    }
    Err(format!("not linearizable: {events:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, call: u64, ret: u64, r: Ret) -> Event {
        Event { op, call, done: Some((ret, r)) }
    }

    #[test]
    fn sequential_histories() {
        let h = [
            ev(Op::Get, 0, 1, Ret::NoNode),
            ev(Op::Create(7), 2, 3, Ret::Created),
            ev(Op::Set(8, 0), 4, 5, Ret::Set(1)),
            ev(Op::Set(9, 0), 6, 7, Ret::BadVersion),
            ev(Op::Get, 8, 9, Ret::Value(8, 1)),
            ev(Op::Create(1), 10, 11, Ret::Exists),
        ];
        assert_eq!(check(&h), Ok(()));
    }

    #[test]
    fn a_read_after_a_completed_write_must_see_it() {
        let h = [ev(Op::Create(7), 0, 1, Ret::Created), ev(Op::Get, 2, 3, Ret::NoNode)];
        assert!(check(&h).is_err());
        let h = [
            ev(Op::Create(7), 0, 1, Ret::Created),
            ev(Op::Set(8, 0), 2, 3, Ret::Set(1)),
            ev(Op::Get, 4, 5, Ret::Value(7, 0)),
        ];
        assert!(check(&h).is_err());
    }

    #[test]
    fn two_creates_cannot_both_succeed() {
        let h = [ev(Op::Create(1), 0, 5, Ret::Created), ev(Op::Create(2), 1, 6, Ret::Created)];
        assert!(check(&h).is_err());
    }

    #[test]
    fn two_sets_of_the_same_version_cannot_both_succeed() {
        let h = [
            ev(Op::Create(1), 0, 1, Ret::Created),
            ev(Op::Set(2, 0), 2, 9, Ret::Set(1)),
            ev(Op::Set(3, 0), 3, 8, Ret::Set(1)),
        ];
        assert!(check(&h).is_err());
    }

    #[test]
    fn concurrent_operations_may_order_either_way() {
        let h = [
            ev(Op::Create(1), 0, 10, Ret::Created),
            ev(Op::Get, 1, 2, Ret::NoNode),
            ev(Op::Get, 3, 4, Ret::Value(1, 0)),
            ev(Op::Get, 11, 12, Ret::Value(1, 0)),
        ];
        assert_eq!(check(&h), Ok(()));
        // ... but reads do not go back in time.
        let h = [
            ev(Op::Create(1), 0, 10, Ret::Created),
            ev(Op::Get, 1, 2, Ret::Value(1, 0)),
            ev(Op::Get, 3, 4, Ret::NoNode),
        ];
        assert!(check(&h).is_err());
    }

    #[test]
    fn unknown_operations_may_or_may_not_take_effect() {
        let unknown = Event { op: Op::Create(5), call: 0, done: None };
        assert_eq!(check(&[unknown, ev(Op::Get, 10, 11, Ret::Value(5, 0))]), Ok(()));
        assert_eq!(check(&[unknown, ev(Op::Get, 10, 11, Ret::NoNode)]), Ok(()));
        // Not before it was invoked.
        let late = Event { op: Op::Create(5), call: 20, done: None };
        assert!(check(&[ev(Op::Get, 10, 11, Ret::Value(5, 0)), late]).is_err());
        // And once it took effect, it stays.
        let h = [unknown, ev(Op::Get, 10, 11, Ret::Value(5, 0)), ev(Op::Get, 12, 13, Ret::NoNode)];
        assert!(check(&h).is_err());
    }
}
