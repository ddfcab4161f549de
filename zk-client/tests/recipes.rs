//! Recipes with several clients contending, against a real server.

#[macro_use]
mod support;

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{unique, Target, TestServer};
use zk_client::recipes::{Barrier, Candidate, Counter, Group, Lock};
use zk_client::Client;

const T: Duration = Duration::from_secs(10);

async fn clients(addr: &str, n: usize) -> Vec<Client> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(Client::connect(addr, T).await.unwrap());
    }
    v
}

async fn lock_is_exclusive_and_survives_a_killed_holder(target: Target) {
    let srv = TestServer::start(target);
    let dir = unique("lock");
    let cs = clients(&srv.addr, 4).await;
    let inside = Arc::new(AtomicI32::new(0));
    let mut tasks = Vec::new();
    for c in cs.clone() {
        let (dir, inside) = (dir.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut lock = Lock::new(&c, &dir);
            for _ in 0..5 {
                lock.acquire().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                lock.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // A holder whose session ends (killed client) hands the lock on.
    let holder = Client::connect(&srv.addr, T).await.unwrap();
    let mut l1 = Lock::new(&holder, &dir);
    l1.acquire().await.unwrap();
    let waiter = cs[0].clone();
    let dir2 = dir.clone();
    let w = tokio::spawn(async move {
        let mut l2 = Lock::new(&waiter, &dir2);
        l2.acquire().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.is_finished(), "waiter got the lock while it was held");
    holder.close().await.unwrap();
    tokio::time::timeout(T, w).await.unwrap().unwrap();
}

async fn exactly_one_leader_and_succession(target: Target) {
    let srv = TestServer::start(target);
    let dir = unique("elect");
    let cs = clients(&srv.addr, 3).await;
    let mut c0 = Candidate::new(&cs[0], &dir);
    c0.lead(b"zero").await.unwrap();
    let (a, b) = (cs[1].clone(), cs[2].clone());
    let d1 = dir.clone();
    let t1 = tokio::spawn(async move { Candidate::new(&a, &d1).lead(b"one").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let d2 = dir.clone();
    let t2 = tokio::spawn(async move { Candidate::new(&b, &d2).lead(b"two").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!t1.is_finished() && !t2.is_finished());
    assert_eq!(Candidate::leader(&cs[0], &dir).await.unwrap().as_deref(), Some(&b"zero"[..]));
    cs[0].close().await.unwrap();
    tokio::time::timeout(T, t1).await.unwrap().unwrap().unwrap();
    assert!(!t2.is_finished(), "only the next candidate takes over");
    assert_eq!(Candidate::leader(&cs[1], &dir).await.unwrap().as_deref(), Some(&b"one"[..]));
}

async fn counter_cas_barrier_and_group(target: Target) {
    let srv = TestServer::start(target);
    let base = unique("misc");
    let cs = clients(&srv.addr, 3).await;
    let path = format!("{base}/counter");
    let mut tasks = Vec::new();
    for c in cs.clone() {
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let ctr = Counter::new(&c, &path);
            let mut seen = Vec::new();
            for _ in 0..20 {
                seen.push(ctr.add(1).await.unwrap());
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    assert_eq!(all, (1..=60).collect::<Vec<i64>>(), "every increment applied once, no duplicate values");
    assert_eq!(Counter::new(&cs[0], &path).get().await.unwrap(), 60);

    let barrier = Barrier::new(&cs[0], &format!("{base}/barrier"));
    Counter::new(&cs[0], &format!("{base}/x")).add(0).await.unwrap();
    barrier.raise().await.unwrap();
    let b2 = Barrier::new(&cs[1], &format!("{base}/barrier"));
    let waiting = tokio::spawn(async move { b2.wait().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    barrier.lower().await.unwrap();
    tokio::time::timeout(T, waiting).await.unwrap().unwrap().unwrap();

    let g = Group::new(&cs[0], &format!("{base}/group"));
    g.join("a", b"").await.unwrap();
    Group::new(&cs[1], &format!("{base}/group")).join("b", b"").await.unwrap();
    let (m, w) = g.members_w().await.unwrap();
    assert_eq!(m, ["a", "b"]);
    cs[1].close().await.unwrap();
    tokio::time::timeout(T, w).await.unwrap().unwrap();
    assert_eq!(g.members().await.unwrap(), ["a"]);
}

both!(
    lock_is_exclusive_and_survives_a_killed_holder,
    exactly_one_leader_and_succession,
    counter_cas_barrier_and_group
);
