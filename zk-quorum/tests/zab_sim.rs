//! The deterministic ensemble simulation (see `sim/mod.rs`): random runs of both backends, and
//! the named regression scenarios of ZAB-FACTS.md §5 on the real stack (and on the model).
//!
//! `ZAB_SEEDS=N` sets the seeds per configuration; `ZAB_SEED=S` replays one seed with a trace
//! (with the test's name as filter); `ZAB_VERBOSE=1` traces the scenarios.

mod sim;

use sim::model::ModelStore;
use sim::stack::StackStore;
use sim::{hist, run_many, scenario, seeds, Keep, Params, Sim, Store, R};

#[test]
fn three_voters() {
    run_many::<ModelStore>("three_voters", "three voters", Params::three(), seeds(200), 0);
}

#[test]
fn three_voters_crashing_on_slow_disks() {
    run_many::<ModelStore>(
        "three_voters_crashing_on_slow_disks",
        "three voters, slow disks",
        Params::crashy(),
        seeds(200),
        20_000,
    );
}

#[test]
fn three_voters_electing_with_fle() {
    run_many::<ModelStore>(
        "three_voters_electing_with_fle",
        "three voters, FLE",
        Params { fle: true, elect_loss_p: 0.05, elect_dup_p: 0.05, conn_drop_p: 0.0005, ..Params::three() },
        seeds(200),
        30_000,
    );
}

#[test]
fn five_voters_and_an_observer_electing_with_fle() {
    run_many::<ModelStore>(
        "five_voters_and_an_observer_electing_with_fle",
        "five voters + observer, FLE",
        Params { fle: true, ..Params::five() },
        seeds(200),
        40_000,
    );
}

#[test]
fn five_voters_and_an_observer() {
    run_many::<ModelStore>(
        "five_voters_and_an_observer",
        "five voters + observer",
        Params::five(),
        seeds(200),
        10_000,
    );
}

#[test]
fn stack_three_voters() {
    run_many::<StackStore>(
        "stack_three_voters",
        "stack, three voters",
        Params::stack(false),
        seeds(100),
        50_000,
    );
}

#[test]
fn stack_three_voters_electing_with_fle() {
    run_many::<StackStore>(
        "stack_three_voters_electing_with_fle",
        "stack, three voters, FLE",
        Params::stack(true),
        seeds(100),
        60_000,
    );
}
