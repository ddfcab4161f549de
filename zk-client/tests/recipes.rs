//! Recipes with several clients contending, against a real server.
// Real clients on real time: contenders run as spawned tasks, waits have deadlines.
#![allow(clippy::disallowed_methods)]

#[macro_use]
mod support;

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{unique, Proxy, Target, TestServer};
use zk_client::recipes::{
    Barrier, Candidate, ConfigStore, Counter, DistributedQueue, DoubleBarrier, Group, LeaderState, Lock,
    RwLock, SequenceIds, SequenceReservation, SingleNodeElection, UniqueIdGenerator,
};
use zk_client::{Client, Error, SessionState};

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

async fn rwlock_readers_share_writers_exclusive(target: Target) {
    let srv = TestServer::start(target);
    let dir = unique("rw");
    let cs = clients(&srv.addr, 4).await;
    // Two readers hold it together.
    let mut r1 = RwLock::new(&cs[0], &dir);
    let mut r2 = RwLock::new(&cs[1], &dir);
    r1.read_lock().await.unwrap();
    tokio::time::timeout(T, r2.read_lock()).await.expect("second reader shares the lock").unwrap();
    // A writer waits for both; a reader queued after the writer waits for the writer.
    let mut w = RwLock::new(&cs[2], &dir);
    let wc = tokio::spawn(async move {
        w.write_lock().await.unwrap();
        w
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut r3 = RwLock::new(&cs[3], &dir);
    let rc = tokio::spawn(async move {
        r3.read_lock().await.unwrap();
        r3
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!wc.is_finished() && !rc.is_finished());
    r1.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!wc.is_finished(), "writer waits for every reader ahead of it");
    r2.unlock().await.unwrap();
    let mut w = tokio::time::timeout(T, wc).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!rc.is_finished(), "reader queued behind a writer waits");
    w.unlock().await.unwrap();
    tokio::time::timeout(T, rc).await.unwrap().unwrap().unlock().await.unwrap();

    // Contention: writers alone, readers never beside a writer.
    let state = Arc::new(std::sync::Mutex::new((0i32, 0i32))); // (readers, writers)
    let mut tasks = Vec::new();
    for (i, c) in cs.iter().cloned().enumerate() {
        let (dir, state) = (dir.clone(), state.clone());
        tasks.push(tokio::spawn(async move {
            let mut l = RwLock::new(&c, &dir);
            for _ in 0..5 {
                let write = i % 2 == 0;
                if write {
                    l.write_lock().await.unwrap();
                } else {
                    l.read_lock().await.unwrap();
                }
                {
                    let mut s = state.lock().unwrap();
                    if write {
                        s.1 += 1;
                    } else {
                        s.0 += 1;
                    }
                    assert!(s.1 <= 1 && !(s.1 == 1 && s.0 > 0), "readers {} writers {}", s.0, s.1);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                {
                    let mut s = state.lock().unwrap();
                    if write {
                        s.1 -= 1;
                    } else {
                        s.0 -= 1;
                    }
                }
                l.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// A real process holds the lock (zkrs-cli created its ephemeral-sequential lock node) and is
/// killed with SIGKILL, never closing its session: the lock passes on when the server expires it.
async fn lock_passes_on_when_its_holder_process_is_killed(target: Target) {
    use std::io::Write;
    let srv = TestServer::start(target);
    let dir = unique("killed");
    let c = Client::connect(&srv.addr, T).await.unwrap();
    c.create(&dir, b"", &zk_client::acl::open_unsafe(), zk_client::CreateMode::Persistent).await.unwrap();
    let mut holder = std::process::Command::new(env!("CARGO_BIN_EXE_zkrs-cli"))
        .args(["-server", &srv.addr, "-timeout", "2000"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    writeln!(stdin, "create -e -s {dir}/_c_0000killed-lock- x").unwrap();
    stdin.flush().unwrap();
    let deadline = std::time::Instant::now() + T;
    while c.get_children(&dir).await.unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the holder never created its lock node");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waiter = c.clone();
    let d = dir.clone();
    let w = tokio::spawn(async move { Lock::new(&waiter, &d).acquire().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!w.is_finished(), "the lock is held by the live process");
    holder.kill().unwrap();
    holder.wait().unwrap();
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(20), w)
        .await
        .expect("lock passed on after expiry")
        .unwrap()
        .unwrap();
}

async fn leader_pauses_on_connection_loss_and_steps_down(target: Target) {
    let srv = TestServer::start(target);
    let proxy = Proxy::start(&srv.addr).await;
    let dir = unique("pause");
    let leader = Client::builder(&proxy.addr)
        .session_timeout(Duration::from_millis(3000))
        .reconnect_delay_max(Duration::from_millis(50))
        .connect()
        .await
        .unwrap();
    let mut cand = Candidate::new(&leader, &dir);
    cand.lead(b"L").await.unwrap();
    let other = Client::connect(&srv.addr, T).await.unwrap();
    let d = dir.clone();
    let o = other.clone();
    let next = tokio::spawn(async move { Candidate::new(&o, &d).lead(b"N").await });

    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let cand = Arc::new(cand);
    let c2 = cand.clone();
    let held =
        tokio::spawn(
            async move { c2.hold(Duration::from_secs(30), move |s| s2.lock().unwrap().push(s)).await },
        );
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A short partition: paused, then leading again with the same session.
    proxy.block();
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.unblock();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(*seen.lock().unwrap(), [LeaderState::Leading, LeaderState::Paused, LeaderState::Leading]);
    assert!(!next.is_finished(), "nobody took over during the short pause");
    // A long one: the session expires; the leader learns it on reconnecting, the next one leads.
    proxy.block();
    tokio::time::timeout(T, next).await.expect("the next candidate leads").unwrap().unwrap();
    proxy.unblock();
    let why = tokio::time::timeout(T, held).await.unwrap().unwrap();
    assert_eq!(why, Error::SessionExpired);
    assert_eq!(leader.state(), SessionState::Expired);

    // A pause longer than the bound ends leadership without waiting for the server.
    let l2 = Client::builder(&proxy.addr).session_timeout(T).connect().await.unwrap();
    let mut c3 = Candidate::new(&l2, &unique("pause2"));
    c3.lead(b"x").await.unwrap();
    let h = tokio::spawn(async move { c3.hold(Duration::from_millis(300), |_| {}).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.block();
    assert_eq!(tokio::time::timeout(T, h).await.unwrap().unwrap(), Error::ConnectionLoss);
}

async fn single_node_election_has_exactly_one_leader(target: Target) {
    let srv = TestServer::start(target);
    let path = format!("{}/leader", unique("single"));
    let cs = clients(&srv.addr, 4).await;
    let leading = Arc::new(AtomicI32::new(0));
    let mut tasks = Vec::new();
    for (i, c) in cs.iter().cloned().enumerate() {
        let (path, leading) = (path.clone(), leading.clone());
        tasks.push(tokio::spawn(async move {
            let e = SingleNodeElection::new(&c, &path);
            e.lead(format!("c{i}").as_bytes()).await.unwrap();
            assert_eq!(leading.fetch_add(1, Ordering::SeqCst), 0, "two leaders at once");
            assert_eq!(e.leader().await.unwrap().as_deref(), Some(format!("c{i}").as_bytes()));
            tokio::time::sleep(Duration::from_millis(50)).await;
            leading.fetch_sub(1, Ordering::SeqCst);
            // Half step down, half die: both hand leadership on.
            if i % 2 == 0 {
                e.resign().await.unwrap();
            } else {
                c.close().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(T, t).await.unwrap().unwrap();
    }
}

async fn config_store_readers_reload(target: Target) {
    let srv = TestServer::start(target);
    let path = format!("{}/app/config", unique("config"));
    let cs = clients(&srv.addr, 3).await;
    let store = ConfigStore::new(&cs[0], &path);
    let mut w1 = ConfigStore::new(&cs[1], &path).watcher();
    let mut w2 = ConfigStore::new(&cs[2], &path).watcher();
    assert_eq!(w1.next().await.unwrap(), None, "nothing stored yet");
    assert_eq!(store.store(b"v1", None).await.unwrap(), 0);
    assert_eq!(tokio::time::timeout(T, w1.next()).await.unwrap().unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(w2.next().await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(store.store(b"v2", Some(0)).await.unwrap(), 1);
    assert_eq!(store.store(b"stale", Some(0)).await, Err(Error::BadVersion));
    for w in [&mut w1, &mut w2] {
        assert_eq!(tokio::time::timeout(T, w.next()).await.unwrap().unwrap().as_deref(), Some(&b"v2"[..]));
    }
    assert_eq!(store.load().await.unwrap(), (bytes::Bytes::from_static(b"v2"), 1));
    cs[0].delete(&path, -1).await.unwrap();
    assert_eq!(tokio::time::timeout(T, w1.next()).await.unwrap().unwrap(), None);
    store.store(b"v3", None).await.unwrap();
    assert_eq!(tokio::time::timeout(T, w1.next()).await.unwrap().unwrap().as_deref(), Some(&b"v3"[..]));
}

async fn ids_never_repeat_across_clients_and_server_restarts(target: Target) {
    let mut srv = TestServer::start(target);
    let base = unique("ids");
    let cs = clients(&srv.addr, 3).await;
    let mut tasks = Vec::new();
    for c in cs.clone() {
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            let gen = UniqueIdGenerator::new(&c, &format!("{base}/uid"));
            let mut ids = SequenceIds::new(SequenceReservation::new(&c, &format!("{base}/seq"), 7));
            let mut got = (Vec::new(), Vec::new());
            for _ in 0..20 {
                got.0.push(gen.next().await.unwrap());
                got.1.push(ids.next().await.unwrap());
            }
            got
        }));
    }
    let (mut uids, mut seqs) = (Vec::new(), Vec::new());
    for t in tasks {
        let (u, s) = t.await.unwrap();
        uids.extend(u);
        seqs.extend(s);
    }
    for v in [&mut uids, &mut seqs] {
        let n = v.len();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), n, "an ID was handed out twice");
    }
    let top = *seqs.last().unwrap();
    drop(cs);
    if !srv.is_managed() {
        return;
    }
    // Kill -9 the server and start it again: reserved blocks were durable.
    srv.restart();
    let c = Client::connect(&srv.addr, T).await.unwrap();
    let mut ids = SequenceIds::new(SequenceReservation::new(&c, &format!("{base}/seq"), 7));
    let first = ids.next().await.unwrap();
    assert!(first > top, "after a restart the next block ({first}) starts above every ID handed out ({top})");
    let gen = UniqueIdGenerator::new(&c, &format!("{base}/uid"));
    let u = gen.next().await.unwrap();
    assert!(u > *uids.last().unwrap(), "{u}");
}

async fn double_barrier_enters_and_leaves_together(target: Target) {
    let srv = TestServer::start(target);
    let path = unique("dbar");
    let cs = clients(&srv.addr, 3).await;
    let entered = Arc::new(AtomicI32::new(0));
    let left = Arc::new(AtomicI32::new(0));
    let mut tasks = Vec::new();
    for (i, c) in cs.iter().cloned().enumerate() {
        let (path, entered, left) = (path.clone(), entered.clone(), left.clone());
        tasks.push(tokio::spawn(async move {
            // Arrive at different times: nobody passes before the last arrives.
            tokio::time::sleep(Duration::from_millis(150 * i as u64)).await;
            let b = DoubleBarrier::new(&c, &path, &format!("m{i}"), 3);
            b.enter().await.unwrap();
            assert_eq!(entered.fetch_add(1, Ordering::SeqCst) / 3, 0);
            assert!(entered.load(Ordering::SeqCst) >= 1);
            tokio::time::sleep(Duration::from_millis(100 * (3 - i) as u64)).await;
            left.fetch_add(1, Ordering::SeqCst);
            b.leave().await.unwrap();
            assert_eq!(left.load(Ordering::SeqCst), 3, "left before everyone had left");
        }));
    }
    // Before the third member arrives nobody is through.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(entered.load(Ordering::SeqCst), 0);
    for t in tasks {
        tokio::time::timeout(T, t).await.unwrap().unwrap();
    }
    assert!(cs[0].get_children(&path).await.unwrap().is_empty());
}

async fn queue_delivers_each_item_once_in_order(target: Target) {
    let srv = TestServer::start(target);
    let dir = unique("queue");
    let cs = clients(&srv.addr, 4).await;
    let mut consumers = Vec::new();
    for c in &cs[2..] {
        let q = DistributedQueue::new(c, &dir);
        consumers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let item = q.take().await.unwrap();
                if &item[..] == b"stop" {
                    return got;
                }
                got.push(String::from_utf8(item.to_vec()).unwrap());
            }
        }));
    }
    let mut producers = Vec::new();
    for (p, c) in cs[..2].iter().cloned().enumerate() {
        let dir = dir.clone();
        producers.push(tokio::spawn(async move {
            let q = DistributedQueue::new(&c, &dir);
            for i in 0..20 {
                q.offer(format!("p{p}-{i:02}").as_bytes()).await.unwrap();
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    let q = DistributedQueue::new(&cs[0], &dir);
    q.offer(b"stop").await.unwrap();
    q.offer(b"stop").await.unwrap();
    let mut all = Vec::new();
    for c in consumers {
        let got = tokio::time::timeout(T, c).await.unwrap().unwrap();
        // Each consumer sees each producer's items in the order they were offered.
        for p in ["p0-", "p1-"] {
            let mine: Vec<&String> = got.iter().filter(|s| s.starts_with(p)).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
        }
        all.extend(got);
    }
    all.sort();
    assert_eq!(all.len(), 40, "every item taken exactly once");
    all.dedup();
    assert_eq!(all.len(), 40);
    assert!(q.is_empty().await.unwrap());
}

both!(
    lock_is_exclusive_and_survives_a_killed_holder,
    exactly_one_leader_and_succession,
    counter_cas_barrier_and_group,
    rwlock_readers_share_writers_exclusive,
    lock_passes_on_when_its_holder_process_is_killed,
    leader_pauses_on_connection_loss_and_steps_down,
    single_node_election_has_exactly_one_leader,
    config_store_readers_reload,
    ids_never_repeat_across_clients_and_server_restarts,
    double_barrier_enters_and_leaves_together,
    queue_delivers_each_item_once_in_order,
);
