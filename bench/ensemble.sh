#!/usr/bin/env bash
# Ensemble throughput, zkrs and Apache ZooKeeper 3.8 side by side: a 3-server ensemble of each on
# loopback (the idle one paused with SIGSTOP), each workload spread over all three servers (one
# zkrs-bench process per server, run together); ops/s summed, latency percentiles the worst of
# the three. Writes go through followers to the leader, so this measures replication.
#
#   bench/ensemble.sh                 # 10 s per workload
#   DURATION=5 bench/ensemble.sh
#   WORKLOADS="create set" SIDES=zkrs EXTRA_CFG='snapCount=100000000' bench/ensemble.sh
#       # some workloads, one side only, extra zoo.cfg lines for both sides. For ratios run all
#       # four: Apache's JVM meets a workload run alone cold (its create rate about halves).
#   PERF_OUT=/tmp/prof SIDES=zkrs WORKLOADS=create bench/ensemble.sh
#       # perf record of the servers during each run: /tmp/prof.<side>.<workload>
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
WORKLOADS=${WORKLOADS:-get set create mixed}
SIDES=${SIDES:-apache zkrs}
EXTRA_CFG=${EXTRA_CFG:-}
WORK=$(mktemp -d /tmp/zkrs-ensemble.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; pkill -9 -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
cargo build --release -q -p zk-server --bins
ZKRS=${ZKRS_SERVER:-$PWD/target/release/zkrs-server}  # ZKRS_SERVER: another build, for A/B runs
BENCH=$PWD/target/release/zkrs-bench
CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar
[ -f /usr/share/java/zookeeper.jar ] || { echo "Apache ZooKeeper is not installed (apt-get install zookeeper)" >&2; exit 1; }
port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mode() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && cat <&3 ) 2>/dev/null | awk '/^Mode:/ {print $2}'; }

declare -A CPORT PIDS
start_ensemble() { # kind
  local kind=$1 lines="" q e
  for i in 1 2 3; do q=$(port_free); e=$(port_free); CPORT[$kind$i]=$(port_free); lines+="server.$i=127.0.0.1:$q:$e"$'\n'; done
  for i in 1 2 3; do
    local d=$WORK/$kind/$i; mkdir -p "$d/data"; echo $i > "$d/data/myid"
    printf 'tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n%s%s\n' \
      "$d" "${CPORT[$kind$i]}" "$lines" "$EXTRA_CFG" > "$d/zoo.cfg"
    if [ "$kind" = zkrs ]; then RUST_LOG=warn "$ZKRS" "$d/zoo.cfg" > "$d/server.log" 2>&1 &
    else (cd "$d" && exec java -Xmx2g -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg") > "$d/server.log" 2>&1 &
    fi
    PIDS[$kind$i]=$!
  done
  for _ in $(seq 1 1200); do
    local n=0; for i in 1 2 3; do case $(mode "${CPORT[$kind$i]}") in leader|follower) n=$((n+1));; esac; done
    [ $n = 3 ] && return 0; sleep 0.1
  done
  echo "$kind ensemble did not settle" >&2; exit 1
}
pause() { for i in 1 2 3; do kill -"$2" "${PIDS[$1$i]}"; done; }
# A paused ensemble, resumed, may have to elect again (its leader heard nothing for longer than
# syncLimit): wait until it serves again before timing it.
settled() {
  sleep 1
  for _ in $(seq 1 600); do
    local n=0; for i in 1 2 3; do case $(mode "${CPORT[$1$i]}") in leader|follower) n=$((n+1));; esac; done
    [ $n = 3 ] && return 0; sleep 0.1
  done
  echo "$1 ensemble did not settle after being resumed" >&2; exit 1
}

for kind in $SIDES; do start_ensemble "$kind"; done
RESULTS=$WORK/results.jsonl
# get first: it creates the keys set and mixed then find (three bench processes creating them at
# once on a fresh ensemble race for them).
for load in $WORKLOADS; do
  set -- "$load" 2 100
  for kind in $SIDES; do
    other=zkrs; [ $kind = zkrs ] && other=apache
    [[ " $SIDES " == *" $other "* ]] && pause $other STOP
    settled $kind
    echo "== $kind: $1, 3 servers x $2 connections x $3 in flight" >&2
    benches=()
    for i in 1 2 3; do
      "$BENCH" --server 127.0.0.1:${CPORT[$kind$i]} --workload "$1" --conns "$2" --inflight "$3" \
        --duration "$DURATION" --json > "$WORK/out.$kind.$i" 2>/dev/null &
      benches+=($!)
    done
    if [ -n "${PERF_OUT:-}" ]; then
      # Profile the three servers of this side over the middle of the run.
      sleep $((DURATION / 4))
      perf record -F 499 -g -o "$PERF_OUT.$kind.$1" -p "${PIDS[${kind}1]},${PIDS[${kind}2]},${PIDS[${kind}3]}" \
        -- sleep $((DURATION / 2)) >/dev/null 2>&1 || echo "perf record failed" >&2
    fi
    wait "${benches[@]}" || true
    for i in 1 2 3; do sed "s/^{/{\"impl\":\"$kind\",\"member\":$i,/" "$WORK/out.$kind.$i" >> "$RESULTS"; done
    [[ " $SIDES " == *" $other "* ]] && pause $other CONT
  done
done
python3 - "$RESULTS" "$DURATION" <<'PY'
import json, sys, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"Run {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores; {sys.argv[2]} s per workload; "
      "3-server ensembles, each workload on all three servers at once.\n")
print("| workload | per server | Apache ops/s | zkrs ops/s | ratio | Apache worst p50/p99 us | zkrs worst p50/p99 us |")
print("|---|---|---:|---:|---:|---:|---:|")
agg = {}
for r in rows:
    a = agg.setdefault((r["workload"], r["conns"], r["inflight"]), {}).setdefault(r["impl"], {"ops": 0, "p50": 0, "p99": 0, "n": 0, "errors": 0})
    a["ops"] += r["ops_per_sec"]; a["p50"] = max(a["p50"], r["p50_us"]); a["p99"] = max(a["p99"], r["p99_us"]); a["n"] += 1
    a["errors"] += r.get("errors", 0) or 0
for (w, c, i), d in agg.items():
    a, z = d.get("apache"), d.get("zkrs")
    if (a is None) != (z is None) and (a or z)["n"] == 3:
        # One side only (SIDES): its figures, no ratio.
        one = a or z
        cells = [f"{one['ops']:.0f}", "-"] if a else ["-", f"{one['ops']:.0f}"]
        lat = [f"{one['p50']}/{one['p99']}", "-"] if a else ["-", f"{one['p50']}/{one['p99']}"]
        print(f"| {w} | {c} x {i} | {cells[0]} | {cells[1]} | - | {lat[0]} | {lat[1]} |")
        continue
    if not (a and z and a["n"] == 3 and z["n"] == 3):
        print(f"| {w} | {c} x {i} | (a bench process gave no result: apache {a and a['n']}, zkrs {z and z['n']} of 3) |")
        continue
    print(f"| {w} | {c} x {i} | {a['ops']:.0f} | {z['ops']:.0f} | {z['ops']/a['ops']:.2f}x | {a['p50']}/{a['p99']} | {z['p50']}/{z['p99']} |")
errs = [f"{w} on {k}: {v['errors']}" for (w, _, _), d in agg.items() for k, v in d.items() if v["errors"]]
print("\nReplies with errors: " + ("; ".join(errs) if errs else "none") + ".")
PY
