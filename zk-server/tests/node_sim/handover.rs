//! Leadership handover (`ydld`, `rqld`) on the real node, each scenario over many seeds: under
//! write load, with the successor dying at each step of it, and asked of servers that cannot
//! do it. The world's checks hold throughout (one leader per epoch, every new leader holds every
//! acknowledged and committed write) and at the end (convergence, equal trees, linearizable
//! keys).
//!
//! `ZAB_SEEDS=N` seeds per scenario (10 in a debug build), from `ZAB_SEED_BASE`.

use crate::world::{Keep, Moment, Params, World};
use zk_proto::jute::{Jute, Reader};
use zk_quorum::wire::PacketType;
use zk_server::core::Role;
use zk_server::node::{HandoverAnswer, Input, LeadershipAnswer, Output};

/// Bound for an election and a sync, ms.
const ELECT_MS: u64 = 10_000;

type R = Result<(), String>;

/// Three voters writing under six clients, no random faults: the script moves the leadership.
fn busy() -> Params {
    Params { faults: false, clients: 6, run_ms: 30_000, settle_ms: 30_000, ..Params::three() }
}

/// Runs `script` on a new world for each seed; panics naming every seed that failed.
pub(crate) fn seeded(name: &str, p: impl Fn() -> Params, script: impl Fn(&mut World, u64) -> R) {
    let n = crate::seeds(20);
    let base = crate::seed_base();
    let trace = std::env::var("ZAB_VERBOSE").is_ok();
    let mut failed = Vec::new();
    let mut totals: std::collections::BTreeMap<&'static str, u64> = Default::default();
    for seed in base..base + n {
        let mut w = World::new(seed, p(), trace);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| script(&mut w, seed)));
        let outcome = match run {
            Ok(r) => r,
            Err(panic) => Err(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        match outcome {
            Ok(()) => {
                for (k, v) in &w.stats {
                    *totals.entry(k).or_insert(0) += v;
                }
            }
            Err(e) => {
                eprintln!("{name}: seed {seed} failed: {e}\n{}", w.describe());
                eprintln!(
                    "replay: ZAB_SEED_BASE={seed} ZAB_SEEDS=1 ZAB_VERBOSE=1 cargo test --release -p zk-server --test node_sim {name} -- --nocapture"
                );
                failed.push(seed);
            }
        }
    }
    eprintln!("{name}: {n} seeds from {base}, {} failed; {totals:?}", failed.len());
    assert!(failed.is_empty(), "{name}: seeds {failed:?} failed");
}

/// The epoch `sid` leads, if it leads one established.
fn led_epoch(w: &World, sid: i64) -> Option<u32> {
    match w.role(sid)? {
        Role::Leader { epoch } => Some(epoch),
        _ => None,
    }
}

/// The established leader and its epoch, once there is one.
fn leader_now(w: &mut World) -> Result<(i64, u32), String> {
    w.run_until_cond(ELECT_MS, "a leader", |w| w.leader().is_some())?;
    let l = w.leader().ok_or("no leader")?;
    Ok((l, led_epoch(w, l).ok_or("the leader has no epoch")?))
}

/// Asks `leader` to hand over (to `to`, or its choice) and runs until another server leads a
/// later epoch: the successor it named.
fn hand_over_and_check(
    w: &mut World,
    leader: i64,
    epoch: u32,
    to: Option<i64>,
) -> Result<(i64, u32), String> {
    let d = match w.hand_over(leader, to) {
        Some(HandoverAnswer::HandingOver(d)) => d,
        other => return Err(format!("ydld on leader {leader} answered {other:?}")),
    };
    if to.is_some_and(|t| t != d) {
        return Err(format!("asked for server {to:?}, the leader chose {d}"));
    }
    w.run_until_cond(ELECT_MS, "the successor leading a later epoch", move |w| {
        w.leader() == Some(d) && led_epoch(w, d).is_some_and(|e| e > epoch)
    })?;
    Ok((d, led_epoch(w, d).unwrap_or(0)))
}

/// The handover's own proposal, as a packet carries it: an error transaction of no session.
fn is_handover_proposal(packet: &zk_quorum::wire::QuorumPacket) -> bool {
    if PacketType::from_wire(packet.packet_type).ok() != Some(PacketType::Proposal) {
        return false;
    }
    let Some(data) = packet.data.clone() else { return false };
    zk_proto::TxnHeader::read(&mut Reader::new(data))
        .is_ok_and(|h| h.client_id == 0 && h.txn_type == zk_proto::OpCode::Error.code())
}

/// Under write load the leader hands over three times (to the server it picks, to one named,
/// and to a follower that asks with `rqld`): each time the successor leads a later epoch, the
/// clients go on being answered, and at the end no acknowledged write is lost and every tree is
/// equal (the world's checks).
#[test]
fn a_handover_under_write_load_loses_nothing() {
    seeded("a_handover_under_write_load_loses_nothing", busy, |w, seed| {
        w.start();
        let (l, e) = leader_now(w)?;
        w.run_for(1_000 + seed % 700);
        let before = w.rec.acked.len();
        let (d, e) = hand_over_and_check(w, l, e, None)?;
        if d == l {
            return Err("the leader handed over to itself".into());
        }
        w.run_for(1_000 + seed % 500);
        let named = (1..=3).find(|s| *s != d && *s != l).expect("a third server");
        let (d2, e) = hand_over_and_check(w, d, e, Some(named))?;
        w.run_for(800);
        // rqld on a follower: its leader hands over to it.
        let asker = (1..=3).find(|s| *s != d2).expect("a follower");
        w.run_until_cond(ELECT_MS, "the asker up to date", move |w| w.view(asker).up_to_date)?;
        match w.request_leadership(asker) {
            Some(LeadershipAnswer::Asked(x)) if x == d2 => {}
            other => return Err(format!("rqld on {asker} answered {other:?}")),
        }
        w.run_until_cond(ELECT_MS, "the asker leading a later epoch", move |w| {
            w.leader() == Some(asker) && led_epoch(w, asker).is_some_and(|x| x > e)
        })?;
        w.run_for(1_500);
        if w.rec.acked.len() <= before {
            return Err(format!("no write acknowledged across the handovers ({before} before)"));
        }
        if w.stat("leaderships") < 4 {
            return Err(format!("expected four leaderships: {:?}", w.stats));
        }
        w.finish_now()
    });
}

/// Three handovers under write load, no fault: no client operation ends without its answer.
/// The leader's own clients keep their connections and their held writes go to the successor;
/// a follower's clients keep theirs too, and what their server forwarded while the leader held
/// it (never proposed, as the leader tells its learners when it leaves) goes again to the new
/// leader. Each operation is answered once (the world's checks: nothing applied twice, every
/// key's history linearizable).
#[test]
fn a_handover_under_write_load_fails_no_client_operation() {
    seeded("a_handover_under_write_load_fails_no_client_operation", busy, |w, seed| {
        w.start();
        let (mut l, mut e) = leader_now(w)?;
        w.run_for(2_000 + seed % 700);
        let (unknown, answered) = (w.rec.unknown, w.rec.answered);
        for _ in 0..3 {
            let (d, next) = hand_over_and_check(w, l, e, None)?;
            (l, e) = (d, next);
            w.run_for(500 + seed % 500);
        }
        w.run_for(crate::client::OP_TIMEOUT_MS);
        if w.rec.unknown != unknown {
            return Err(format!(
                "{} client operations ended without an answer across three handovers",
                w.rec.unknown - unknown
            ));
        }
        if w.rec.answered <= answered {
            return Err("no operation answered across the handovers".into());
        }
        w.finish_now()
    });
}

/// Where the successor dies in [`a_handover_whose_successor_dies_loses_nothing`].
#[derive(Debug, Clone, Copy)]
enum Death {
    /// Right after `ydld`, while the leader waits for it to catch up.
    Waiting,
    /// When the handover's proposal reaches it, before it logs it.
    Proposed,
    /// When it sends the ACK of the handover's proposal (logged durably, ACK on the wire).
    Acked,
}

/// The successor loses its power at each step of the handover (seeds take turns): the two
/// others elect a leader between them (the old leader again, or the third: a leader that voted
/// for the dead successor votes as usual in the next round), nothing acknowledged is lost, and
/// once the successor is back the ensemble converges.
#[test]
fn a_handover_whose_successor_dies_loses_nothing() {
    seeded("a_handover_whose_successor_dies_loses_nothing", busy, |w, seed| {
        w.start();
        let (l, _) = leader_now(w)?;
        w.run_for(1_000 + seed % 900);
        let death = [Death::Waiting, Death::Proposed, Death::Acked][(seed % 3) as usize];
        let d = match w.hand_over(l, None) {
            Some(HandoverAnswer::HandingOver(d)) => d,
            other => return Err(format!("ydld answered {other:?}")),
        };
        if !matches!(death, Death::Waiting) {
            let seen = std::rc::Rc::new(std::cell::Cell::new(0i64));
            let z = seen.clone();
            w.run_until_moment(ELECT_MS, "the successor takes the handover proposal", move |_, m| match m {
                Moment::Input(s, Input::Packet { packet, .. }) if *s == d && is_handover_proposal(packet) => {
                    z.set(packet.zxid);
                    true
                }
                _ => false,
            })?;
            if matches!(death, Death::Acked) {
                let zxid = seen.get();
                w.run_until_moment(ELECT_MS, "the successor ACKs the handover proposal", move |_, m| {
                    matches!(m, Moment::Output(s, Output::SendPacket { packet, .. })
                        if *s == d
                            && PacketType::from_wire(packet.packet_type).ok() == Some(PacketType::Ack)
                            && packet.zxid == zxid)
                })?;
            }
        }
        let keep = if seed % 2 == 0 { Keep::Durable } else { Keep::Random };
        w.power_loss(d, keep, 0);
        w.run_until_cond(3 * ELECT_MS, "a leader without the successor", move |w| {
            w.leader().is_some_and(|x| x != d)
        })?;
        w.run_for(1_000);
        w.restart(d);
        w.finish_now()
    });
}

/// `ydld` on a follower, on the leader naming itself or an unknown server, and `rqld` on the
/// leader change nothing; a handover whose successor is cut off is given up within its bound,
/// the leader serves on in the same epoch, and the writes it held are answered.
#[test]
fn a_handover_asked_of_a_non_leader_or_given_up_changes_nothing() {
    seeded("a_handover_asked_of_a_non_leader_or_given_up_changes_nothing", busy, |w, seed| {
        w.start();
        let (l, e) = leader_now(w)?;
        let f = (1..=3).find(|s| *s != l).expect("a follower");
        w.run_until_cond(ELECT_MS, "the follower up to date", move |w| w.view(f).up_to_date)?;
        match w.hand_over(f, None) {
            Some(HandoverAnswer::NotLeader(Some(x))) if x == l => {}
            other => return Err(format!("ydld on follower {f} answered {other:?}")),
        }
        match w.hand_over(l, Some(l)) {
            Some(HandoverAnswer::NotCandidate(x)) if x == l => {}
            other => return Err(format!("ydld to the leader itself answered {other:?}")),
        }
        match w.hand_over(l, Some(9)) {
            Some(HandoverAnswer::NotCandidate(9)) => {}
            other => return Err(format!("ydld to server 9 answered {other:?}")),
        }
        match w.request_leadership(l) {
            Some(LeadershipAnswer::Leading) => {}
            other => return Err(format!("rqld on the leader answered {other:?}")),
        }
        w.run_for(2_000);
        if w.leader() != Some(l) || led_epoch(w, l) != Some(e) {
            return Err(format!("the leadership moved: leader {:?}", w.leader()));
        }
        // A successor whose disk can no longer keep up: the leader waits, gives up (it drops the
        // successor within syncLimit, or its wait runs out), and serves on.
        w.slow_disk(f, 1_000);
        w.run_for(200 + seed % 200);
        match w.hand_over(l, Some(f)) {
            Some(HandoverAnswer::HandingOver(x)) if x == f => {}
            other => return Err(format!("ydld to {f} answered {other:?}")),
        }
        match w.hand_over(l, None) {
            Some(HandoverAnswer::UnderWay(x)) if x == f => {}
            other => return Err(format!("a second ydld answered {other:?}")),
        }
        w.run_until_cond(ELECT_MS, "the handover given up", move |w| !w.handover_under_way(l))?;
        w.slow_disk(f, 1);
        let before = w.rec.acked.len();
        w.run_for(2_000);
        if w.leader() != Some(l) || led_epoch(w, l) != Some(e) {
            return Err(format!("the leadership moved after a given-up handover: leader {:?}", w.leader()));
        }
        if w.rec.acked.len() <= before {
            return Err("no write acknowledged after the handover was given up".into());
        }
        w.finish_now()
    });
}
