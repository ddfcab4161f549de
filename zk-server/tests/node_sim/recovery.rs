//! Forced recovery (`rcvr`) on the real node: a survivor of an ensemble whose quorum is lost
//! for good leads alone, the lost members come back (on their old disks) as followers of its
//! history, and requests that must not act are refused. The world's checks hold throughout
//! (one leader per epoch, every new leader holds every acknowledged and committed write) and at
//! the end (convergence on one configuration, equal trees, linearizable keys).
//!
//! `ZAB_SEEDS=N` seeds for the seeded scenarios (10 in a debug build), from `ZAB_SEED_BASE`.

use crate::handover::seeded;
use crate::world::{Keep, Moment, Params, World};
use zk_quorum::recovery::EPOCH_JUMP;
use zk_server::core::Role;
use zk_server::node::{EpochFile, Input, Output, RecoveryAnswer};

/// Bound for an election and a sync, ms.
const ELECT_MS: u64 = 10_000;

type R = Result<(), String>;

/// Three voters and an observer, reconfiguration on, clients writing, no random faults: the
/// script loses the quorum.
fn three_and_observer() -> Params {
    Params {
        voters: 3,
        observers: 1,
        reconfig: true,
        faults: false,
        clients: 4,
        run_ms: 30_000,
        settle_ms: 30_000,
        ..Params::three()
    }
}

/// The epoch `sid` leads, if it leads one established.
fn led_epoch(w: &World, sid: i64) -> Option<u32> {
    match w.role(sid)? {
        Role::Leader { epoch } => Some(epoch),
        _ => None,
    }
}

/// The clients stop and the ensemble settles: every server holds every acknowledged write.
fn quiesce(w: &mut World) -> R {
    w.pause_clients();
    w.run_until_cond(ELECT_MS, "the ensemble converged", |w| w.converged())
}

/// Starts the world, lets the clients write for `write_ms`, waits until every server holds every
/// acknowledged write, then two of the three voters lose their power for good (which two: by
/// `seed`). The survivor and the lost.
fn lose_two(w: &mut World, seed: u64, write_ms: u64) -> Result<(i64, Vec<i64>), String> {
    w.start();
    w.run_until_cond(ELECT_MS, "a leader", |w| w.leader().is_some())?;
    w.run_for(write_ms);
    quiesce(w)?;
    let survivor = 1 + (seed % 3) as i64;
    let lost: Vec<i64> = (1..=3).filter(|s| *s != survivor).collect();
    for &s in &lost {
        w.power_loss(s, Keep::Durable, 0);
    }
    Ok((survivor, lost))
}

/// Asks `sid` for a recovery without a token (it must describe the plan and give one), with a
/// wrong one (the same), then with its own: it recovers. The epoch it writes.
fn recover_confirmed(w: &mut World, sid: i64, dropped: &[i64]) -> Result<u32, String> {
    let version = w.config_of(sid).ok_or("the survivor is down")?.version;
    let token = match w.recover(sid, None) {
        Some(RecoveryAnswer::Unconfirmed { token, .. }) => token,
        other => return Err(format!("rcvr without a token answered {other:?}")),
    };
    if !token.starts_with(&format!("{sid}-{:x}-", version as u64)) {
        return Err(format!("token {token} does not name server {sid} and version {version:#x}"));
    }
    match w.recover(sid, Some("9-1")) {
        Some(RecoveryAnswer::Unconfirmed { token: t, .. }) if t == token => {}
        other => return Err(format!("rcvr with another server's token answered {other:?}")),
    }
    let seen = {
        let v = w.view(sid);
        v.epochs.0.max(v.epochs.1) as u32
    };
    let epoch = match w.recover(sid, Some(&token)) {
        Some(RecoveryAnswer::Recovering { epoch, dropped: d, .. }) if d == dropped => epoch,
        other => return Err(format!("rcvr with its token answered {other:?}")),
    };
    if epoch != seen + EPOCH_JUMP + sid as u32 {
        return Err(format!("recovered epoch {epoch} is not {EPOCH_JUMP} + {sid} above {seen}"));
    }
    // A second request while the first is under way (or done) does nothing.
    match w.recover(sid, Some(&token)) {
        Some(RecoveryAnswer::Refused(_)) => {}
        other => return Err(format!("a second rcvr answered {other:?}")),
    }
    Ok(epoch)
}

/// Runs until `sid` leads an epoch above `epoch`, alone in its configuration's voters.
fn leads_alone(w: &mut World, sid: i64, epoch: u32) -> R {
    w.run_until_cond(ELECT_MS, "the survivor leading alone", move |w| {
        w.leader() == Some(sid) && led_epoch(w, sid).is_some_and(|e| e > epoch)
    })?;
    let voters = w.config_of(sid).map(|c| {
        c.servers.values().filter(|s| s.learner_type == zk_quorum::config::LearnerType::Participant).count()
    });
    if voters != Some(1) {
        return Err(format!("the recovered configuration has {voters:?} voters"));
    }
    Ok(())
}

/// Two of three voters lose their power for good under write load (after the survivor holds
/// every acknowledged write). The survivor looks for a leader it cannot find; `rcvr` without
/// its token changes nothing; with it, the survivor leads alone in an epoch 65,536 above its
/// own, the observer follows it, and clients write again. A lost voter comes back on its old
/// disk: it takes the new configuration from the survivor and follows as a non-voting member,
/// and the operator adds it back as a voter with a reconfig. At the end the other lost voter
/// comes back too, and every server converges on one configuration and one tree.
#[test]
fn rcvr_a_survivor_leads_alone_and_the_lost_come_back_as_followers() {
    seeded(
        "rcvr_a_survivor_leads_alone_and_the_lost_come_back_as_followers",
        three_and_observer,
        |w, seed| {
            let (survivor, lost) = lose_two(w, seed, 1_000 + seed % 1_000)?;
            w.run_for(3_000);
            if let Some(l) = w.leader() {
                return Err(format!("server {l} leads without a quorum"));
            }
            // The lost voters answered the survivor's last election: a minute must pass.
            match w.recover(survivor, None) {
                Some(RecoveryAnswer::Refused(why)) if why.contains("answered this server's election") => {}
                other => return Err(format!("rcvr right after the loss answered {other:?}")),
            }
            w.run_for(60_000);
            let epoch = recover_confirmed(w, survivor, &lost)?;
            leads_alone(w, survivor, epoch)?;
            w.run_until_cond(ELECT_MS, "the observer following the survivor", |w| w.view(4).up_to_date)?;
            let before = w.rec.acked.len();
            // The clients write on through the rest (and one of them asks for the reconfig).
            w.resume_clients(60_000);
            w.run_for(3_000);
            if w.rec.acked.len() <= before {
                return Err("no write acknowledged after the recovery".into());
            }
            let version = w.config_of(survivor).map(|c| c.version);
            let back = lost[0];
            w.restart(back);
            w.run_until_cond(ELECT_MS, "the lost voter following under the new configuration", move |w| {
                w.view(back).up_to_date && w.config_of(back).map(|c| c.version) == version
            })?;
            match w.reconfig(Some((back, "participant")), None, ELECT_MS)? {
                Ok(c)
                    if zk_quorum::reconfig::placement(&c, back)
                        == zk_quorum::reconfig::Placement::Participant => {}
                other => return Err(format!("adding server {back} back answered {other:?}")),
            }
            w.finish_now()
        },
    );
}

/// The lost voters went on without the survivor: they hold writes of epoch 2 it never logged
/// and epochs 3 and 4 of their own. The survivor (epochs 2) recovers alone and takes writes.
/// Had it led the next epoch but one, 4, its zxids would be theirs, and a lost voter coming
/// back would be told it holds the survivor's transactions by zxid (an Apache learner believes
/// that; a zkrs one also compares tree digests, and then asks for a snapshot, so this scenario
/// passes even without the jump). The jumped epoch makes the history diverge by zxid alone:
/// the lost voter is truncated (or replaced) to the survivor's history, none of its own writes
/// stays anywhere, and every tree ends equal.
#[test]
fn rcvr_a_stale_member_of_the_lost_quorum_is_brought_in_line() {
    let p =
        Params { clients: 2, run_ms: 0, reconfig: true, faults: false, settle_ms: 30_000, ..Params::three() };
    let mut w = World::new(5, p, std::env::var("ZAB_VERBOSE").is_ok());
    let run = |w: &mut World| -> R {
        let survivor = w.history(&[(1, 1, 3, "h"), (2, 1, 2, "h")]);
        let went_on = w.history(&[
            (1, 1, 3, "h"),
            (2, 1, 2, "h"),
            (2, 3, 4, "lost"),
            (3, 1, 3, "lost"),
            (4, 1, 3, "lost"),
        ]);
        w.preload(1, 2, 2, &survivor, false);
        w.preload(2, 4, 4, &went_on, false);
        w.preload(3, 4, 4, &went_on, true);
        w.start_without(&[2, 3]);
        w.run_for(3_000);
        let epoch = recover_confirmed(w, 1, &[2, 3])?;
        if epoch != 2 + EPOCH_JUMP + 1 {
            return Err(format!("recovered epoch {epoch}, not {}", 2 + EPOCH_JUMP + 1));
        }
        leads_alone(w, 1, epoch)?;
        let before = w.rec.acked.len();
        w.resume_clients(2_000);
        w.run_for(2_500);
        if w.rec.acked.len() <= before {
            return Err("no write acknowledged after the recovery".into());
        }
        w.restart(2);
        w.run_until_cond(ELECT_MS, "server 2 synced with the survivor", |w| {
            w.view(2).up_to_date && w.config_of(2).map(|c| c.version) == w.config_of(1).map(|c| c.version)
        })?;
        if w.syncs_of(2) == 0 {
            return Err("server 2 was never synced".into());
        }
        for path in ["/lost2.3", "/lost2.4", "/lost3.1", "/lost3.3", "/lost4.1", "/lost4.3"] {
            if w.holds(2, path) {
                return Err(format!("server 2 still holds {path}"));
            }
        }
        w.finish()?;
        for sid in 1..=3 {
            if w.holds(sid, "/lost3.1") {
                return Err(format!("server {sid} holds /lost3.1 at the end"));
            }
        }
        Ok(())
    };
    if let Err(e) = run(&mut w) {
        panic!("rcvr_a_stale_member_of_the_lost_quorum_is_brought_in_line: {e}\n{}", w.describe());
    }
}

/// What is written when the survivor loses its power in [`rcvr_a_survivor_that_crashes_midway_recovers_after`].
#[derive(Debug, Clone, Copy)]
enum Midway {
    /// `acceptedEpoch` written, `currentEpoch` not.
    OneEpochFile,
    /// Both epoch files written, the configuration not.
    BothEpochFiles,
    /// The configuration written too.
    Configuration,
}

/// The survivor loses its power at each step of a confirmed recovery (seeds take turns): after
/// the first epoch file, after both, after the configuration. Restarted, it either leads alone
/// at once (the configuration was written) or still looks, and a second recovery (with a new
/// token: the one of the election before the restart confirms nothing) finishes the job in a higher epoch. No
/// acknowledged write is lost, and the lost voters, back at the end, follow.
#[test]
fn rcvr_a_survivor_that_crashes_midway_recovers_after() {
    seeded("rcvr_a_survivor_that_crashes_midway_recovers_after", three_and_observer, |w, seed| {
        let (survivor, _lost) = lose_two(w, seed, 500 + seed % 1_000)?;
        w.run_for(61_000);
        let token = match w.recover(survivor, None) {
            Some(RecoveryAnswer::Unconfirmed { token, .. }) => token,
            other => return Err(format!("rcvr without a token answered {other:?}")),
        };
        let midway =
            [Midway::OneEpochFile, Midway::BothEpochFiles, Midway::Configuration][(seed % 3) as usize];
        let first = match w.recover(survivor, Some(&token)) {
            Some(RecoveryAnswer::Recovering { epoch, .. }) => epoch,
            other => return Err(format!("rcvr with its token answered {other:?}")),
        };
        w.run_until_moment(ELECT_MS, "the recovery's step", move |_, m| match (midway, m) {
            (
                Midway::OneEpochFile,
                Moment::Input(s, Input::EpochWritten { file: EpochFile::Accepted, .. }),
            ) => *s == survivor,
            (
                Midway::BothEpochFiles,
                Moment::Input(s, Input::EpochWritten { file: EpochFile::Current, .. }),
            ) => *s == survivor,
            (Midway::Configuration, Moment::Output(s, Output::InstallConfig(_))) => *s == survivor,
            _ => false,
        })?;
        w.power_loss(survivor, Keep::Durable, 0);
        w.restart(survivor);
        w.run_for(3_000);
        let led = match midway {
            Midway::Configuration => first,
            _ => {
                if w.leader().is_some() {
                    return Err(format!("a leader without the recovered configuration ({midway:?})"));
                }
                // The token named the election before the restart: it confirms nothing now.
                let again = match w.recover(survivor, Some(&token)) {
                    Some(RecoveryAnswer::Unconfirmed { token: t, .. }) if t != token => t,
                    other => return Err(format!("the old token after the restart answered {other:?}")),
                };
                match w.recover(survivor, Some(&again)) {
                    Some(RecoveryAnswer::Recovering { epoch, .. }) if epoch > first => epoch,
                    other => return Err(format!("the second rcvr ({midway:?}) answered {other:?}")),
                }
            }
        };
        leads_alone(w, survivor, led)?;
        w.resume_clients(2_000);
        w.run_for(2_000);
        w.finish_now()
    });
}

/// `rcvr` changes nothing where it must not act: on a leader and a follower of a serving
/// quorum (whatever the token), on a survivor while another voter answers its election, and on
/// a server that lost its quorum but runs without reconfiguration (a new configuration could
/// not come into force).
#[test]
fn rcvr_refused_while_a_quorum_serves_or_without_reconfiguration() {
    seeded(
        "rcvr_refused_while_a_quorum_serves_or_without_reconfiguration",
        three_and_observer,
        |w, _seed| {
            w.start();
            w.run_until_cond(ELECT_MS, "a leader", |w| w.leader().is_some())?;
            let l = w.leader().ok_or("no leader")?;
            let e = led_epoch(w, l).ok_or("no epoch")?;
            let f = (1..=3).find(|s| *s != l).expect("a follower");
            w.run_until_cond(ELECT_MS, "the follower up to date", move |w| w.view(f).up_to_date)?;
            for sid in [l, f] {
                let token = format!("{sid}-{:x}", w.config_of(sid).map_or(0, |c| c.version) as u64);
                match w.recover(sid, Some(&token)) {
                    Some(RecoveryAnswer::Refused(why)) if why.contains("quorum is not lost") => {}
                    other => {
                        return Err(format!("rcvr on server {sid} of a serving quorum answered {other:?}"))
                    }
                }
            }
            w.run_for(2_000);
            if w.leader() != Some(l) || led_epoch(w, l) != Some(e) {
                return Err(format!("the leadership moved: leader {:?}", w.leader()));
            }
            w.finish_now()
        },
    );
    // Five voters, three lost: the two survivors hear each other, and neither may recover
    // while the other runs (two recovered apart would be two ensembles). Once one is stopped for
    // a minute, the other may.
    let p = Params { voters: 5, clients: 0, run_ms: 0, faults: false, reconfig: true, ..Params::three() };
    let mut w = World::new(3, p, false);
    w.start();
    let run = |w: &mut World| -> R {
        w.run_until_cond(ELECT_MS, "a leader", |w| w.leader().is_some())?;
        for s in 3..=5 {
            w.power_loss(s, Keep::Durable, 0);
        }
        w.run_for(61_000);
        match w.recover(1, None) {
            Some(RecoveryAnswer::Refused(why)) if why.contains("voter 2 answered") => {}
            other => return Err(format!("rcvr beside a running survivor answered {other:?}")),
        }
        w.power_loss(2, Keep::Durable, 0);
        w.run_for(61_000);
        match w.recover(1, None) {
            Some(RecoveryAnswer::Unconfirmed { .. }) => Ok(()),
            other => Err(format!("rcvr once the other survivor stopped answered {other:?}")),
        }
    };
    if let Err(e) = run(&mut w) {
        panic!("two survivors: {e}\n{}", w.describe());
    }
    let p = Params { clients: 0, run_ms: 0, faults: false, ..Params::three() };
    let mut w = World::new(1, p, false);
    w.start_without(&[2, 3]);
    w.run_for(2_000);
    match w.recover(1, Some("1-0")) {
        Some(RecoveryAnswer::Refused(why)) if why.contains("reconfigEnabled") => {}
        other => panic!("rcvr without reconfiguration answered {other:?}"),
    }
}
