//! For any interleaving of writers presenting tokens, the tokens a resource
//! accepts never decrease, and a refused token is lower than the mark.
//!
//! Every accepted write appends its token to the resource's log from inside
//! [`Fence::fenced`], after yielding, so a store that let a writer in
//! between another's check and write would log a decrease (or two writers
//! inside at once).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use election_core::Epoch;
use fencing::{Error, Fence, FileFence, MemoryFence, ResourceName, Token};
use proptest::prelude::*;

const RESOURCES: usize = 3;

#[derive(Clone, Debug)]
struct Op {
    resource: usize,
    token: u64,
    /// Yields before asking, to vary the interleaving.
    before: u8,
    /// Yields inside the write, before it logs.
    inside: u8,
}

fn op() -> impl Strategy<Value = Op> {
    (0..RESOURCES, 1u64..8, 0u8..4, 0u8..4).prop_map(|(resource, token, before, inside)| Op {
        resource,
        token,
        before,
        inside,
    })
}

fn writers(max_writers: usize, max_ops: usize) -> impl Strategy<Value = Vec<Vec<Op>>> {
    proptest::collection::vec(
        proptest::collection::vec(op(), 1..=max_ops),
        2..=max_writers,
    )
}

fn name(i: usize) -> ResourceName {
    ResourceName::new(format!("resource-{i}")).unwrap()
}

fn token(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).unwrap())
}

/// What the resources saw: accepted tokens in write order, and writers
/// inside a write right now.
#[derive(Default)]
struct Resources {
    logs: Mutex<HashMap<usize, Vec<u64>>>,
    inside: [AtomicUsize; RESOURCES],
}

/// What a writer was told.
#[derive(Debug)]
enum Told {
    Accepted,
    Refused,
}

/// One writer's operations, in order; `yield_now` is how it yields.
async fn write_all<Y: Future<Output = ()> + Send>(
    fence: &impl Fence,
    ops: &[Op],
    seen: &Resources,
    yield_now: impl Fn() -> Y + Sync,
) -> Vec<Told> {
    let mut told = Vec::new();
    for op in ops {
        for _ in 0..op.before {
            yield_now().await;
        }
        let out = fence
            .fenced(&name(op.resource), token(op.token), || async {
                let inside = &seen.inside[op.resource];
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two writers inside"
                );
                for _ in 0..op.inside {
                    yield_now().await;
                }
                seen.logs
                    .lock()
                    .unwrap()
                    .entry(op.resource)
                    .or_default()
                    .push(op.token);
                inside.fetch_sub(1, Ordering::SeqCst);
            })
            .await;
        told.push(match out {
            Ok(()) => Told::Accepted,
            Err(Error::Stale {
                resource,
                presented,
                high_water_mark,
            }) => {
                assert_eq!(resource, name(op.resource));
                assert_eq!(presented, token(op.token));
                assert!(
                    presented < high_water_mark,
                    "refused {presented} at mark {high_water_mark}"
                );
                Told::Refused
            }
            Err(e) => panic!("unexpected error: {e:?}"),
        });
    }
    told
}

/// The checks on the outcome of one run.
async fn check(
    fence: &impl Fence,
    writers: &[Vec<Op>],
    told: &[Vec<Told>],
    seen: &Resources,
) -> Result<(), TestCaseError> {
    let logs = seen.logs.lock().unwrap().clone();
    for (r, log) in &logs {
        prop_assert!(log.is_sorted(), "resource {} accepted {:?}", r, log);
    }
    let accepted = told
        .iter()
        .flatten()
        .filter(|t| matches!(t, Told::Accepted))
        .count();
    prop_assert_eq!(accepted, logs.values().map(Vec::len).sum::<usize>());
    for r in 0..RESOURCES {
        let presented = writers.iter().flatten().filter(|op| op.resource == r);
        let highest = presented.map(|op| token(op.token)).max();
        prop_assert_eq!(fence.high_water_mark(&name(r)).await.unwrap(), highest);
        // The highest token presented is never refused, so it was written.
        prop_assert_eq!(
            logs.get(&r).and_then(|l| l.last()).copied(),
            highest.map(|t| t.epoch().get())
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Writers as tasks on one thread: the yields decide the interleaving,
    /// so a failing case replays exactly.
    #[test]
    fn memory_fence_accepted_tokens_never_decrease(writers in writers(5, 12)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let fence = MemoryFence::new();
            let seen = Arc::new(Resources::default());
            let mut tasks = Vec::new();
            for ops in writers.clone() {
                let (fence, seen) = (fence.clone(), Arc::clone(&seen));
                tasks.push(tokio::spawn(async move {
                    write_all(&fence, &ops, &seen, tokio::task::yield_now).await
                }));
            }
            let mut told = Vec::new();
            for task in tasks {
                told.push(task.await.unwrap());
            }
            check(&fence, &writers, &told, &seen).await
        })?;
    }
}

proptest! {
    // Every raised mark costs two fsyncs: fewer, smaller cases.
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Writers as threads, each with its own `FileFence` on one directory:
    /// their lock files are separate open file descriptions, which conflict
    /// just as those of separate processes do.
    #[test]
    fn file_fence_accepted_tokens_never_decrease(writers in writers(4, 8)) {
        let tmp = tempfile::tempdir().unwrap();
        let seen = Resources::default();
        let told = std::thread::scope(|s| {
            let threads: Vec<_> = writers
                .iter()
                .map(|ops| {
                    let (dir, seen) = (tmp.path(), &seen);
                    s.spawn(move || {
                        let fence = FileFence::open(dir).unwrap();
                        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                        rt.block_on(write_all(&fence, ops, seen, || async {
                            std::thread::yield_now()
                        }))
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
        });
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let fresh = FileFence::open(tmp.path()).unwrap();
        rt.block_on(check(&fresh, &writers, &told, &seen))?;
    }
}
