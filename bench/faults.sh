#!/usr/bin/env bash
# Seeded real-process fault runs (zk-server/tests/netns_faults.rs): an ensemble in network
# namespaces under partitions, slow links, kill -9, SIGSTOP, a full log disk and wall-clock jumps,
# with clients whose histories are checked. Each run writes report.md, timeline.svg and the
# servers' logs under target/faults/<target>-n<servers>-seed<seed>/. Needs root.
#
#   bench/faults.sh                                   # 10 seeds (100..109), 5 servers, 60 s each
#   FAULT_SEEDS=1..50 FAULT_SECS=120 bench/faults.sh  # seeds 1 to 50, two minutes each
#   FAULT_TARGET=apache FAULT_SERVERS=3 bench/faults.sh   # the same schedules on Apache ZooKeeper
#   FAULT_SEEDS=336..336 FAULT_TARGET=mixed FAULT_SERVERS=3 \
#     FAULT_ZKRS_LOG=info,zk_server::core=debug \
#     FAULT_APACHE_DEBUG=org.apache.zookeeper.server.quorum.CommitProcessor bench/faults.sh
#                                                     # one seed again, with closer logs
# (FAULT_SEEDS=N alone means N seeds from 100.)
#
# Wall-clock jumps need libfaketime (Debian's libfaketime; ./test.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
export FAULT_SEEDS=${FAULT_SEEDS:-10} FAULT_SECS=${FAULT_SECS:-60} FAULT_SERVERS=${FAULT_SERVERS:-5}
export FAULT_TARGET=${FAULT_TARGET:-zkrs}
exec cargo test --release -p zk-server --test netns_faults seeded_fault_runs -- --ignored --nocapture
