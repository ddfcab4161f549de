#!/usr/bin/env bash
# Runs the same workloads against zkrs-server and Apache ZooKeeper (Debian's package) on this machine,
# one server at a time (the idle one is paused with SIGSTOP), and prints a table with the ratios:
# request workloads, then watch fan-out, session churn and multi (see zkrs-bench --help).
# Then resident memory with a populated tree, and the time from kill -9 to serving again.
#
#   bench/compare.sh                 # defaults: 10 s per run
#   DURATION=5 ZNODES=200000 bench/compare.sh
#   MODE_ROUNDS=3 bench/compare.sh   # rounds of the unloaded set in each log append mode (below)
#
# zkrs runs with its default txnLog.appendMode; after the workloads, the unloaded set (1 x 1) is
# also run on fresh zkrs servers in each append mode (pwrite, mmap), alternating, MODE_ROUNDS
# times, and the table gives each mode's median p50 against round trip + fdatasync + 40 us, with
# the fdatasync measured once before the rounds and again after each round (the disk drifts).
#
# Results go to stdout (a Markdown table) and bench/last-run.json.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
ZNODES=${ZNODES:-1000000}
MODE_ROUNDS=${MODE_ROUNDS:-3}
VALUE=${VALUE:-100}
WORK=$(mktemp -d /tmp/zkrs-compare.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

echo "== building (release)" >&2
cargo build --release -q -p zk-server --bins
BENCH=target/release/zkrs-bench
ZKRS=target/release/zkrs-server
[ -f /usr/share/java/zookeeper.jar ] || { echo "Apache ZooKeeper is not installed (apt-get install zookeeper)" >&2; exit 1; }

port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
srvr() { # port; a server still starting may take the connection and never answer: 2 s at most
  ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && timeout 2 cat <&3 ) 2>/dev/null || true
}
wait_serving() { # port; up to 5 minutes (a large tree takes Apache a while to load)
  for _ in $(seq 1 6000); do
    [[ $(srvr "$1") == Zookeeper* ]] && return 0
    sleep 0.05
  done
  echo "server on port $1 did not come up" >&2; return 1
}
write_cfg() { # dir port
  mkdir -p "$1/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n' "$1" "$2" > "$1/zoo.cfg"
}
start_zkrs() { # dir port [extra zoo.cfg line]
  write_cfg "$1" "$2"; [ -n "${3:-}" ] && echo "$3" >> "$1/zoo.cfg"
  RUST_LOG=warn "$ZKRS" "$1/zoo.cfg" > "$1/server.log" 2>&1 & echo $!
}
start_apache() { # dir port
  write_cfg "$1" "$2"
  java -Xmx8g -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain "$1/zoo.cfg" > "$1/server.log" 2>&1 & echo $!
}
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' /proc/$1/status; }

ZP=$(port_free); AP=$(port_free)
ZPID=$(start_zkrs "$WORK/zkrs" "$ZP"); APID=$(start_apache "$WORK/apache" "$AP")
wait_serving "$ZP"; wait_serving "$AP"

RESULTS="$WORK/results.jsonl"
run() { # name port pid other_pid workload conns inflight
  kill -STOP "$4"
  "$BENCH" --server 127.0.0.1:$2 --workload "$5" --conns "$6" --inflight "$7" --duration "$DURATION" \
    --value-size "$VALUE" --json 2>/dev/null | sed "s/^{/{\"impl\":\"$1\",/" >> "$RESULTS"
  kill -CONT "$4"
}
# watch: 32 watchers (+1 writer), counted in events/s; churn: 4 workers, each cycle a whole session;
# multi: 4 setData per multi, counted in multis/s.
for load in "get 4 200" "set 4 200" "create 4 200" "get 32 50" "mixed 4 200" "get 1 1" "set 1 1" \
  "watch 32 1" "churn 4 1" "multi 4 50"; do
  set -- $load
  echo "== $1, $2 connections x $3 in flight" >&2
  run apache "$AP" "$APID" "$ZPID" "$1" "$2" "$3"
  run zkrs "$ZP" "$ZPID" "$APID" "$1" "$2" "$3"
done

echo "== reference: loopback round trip (ping) and one fdatasync on the data disk" >&2
"$BENCH" --server 127.0.0.1:$ZP --workload ping --conns 1 --inflight 1 --duration 3 --json 2>/dev/null \
  | sed 's/^{/{"impl":"zkrs","metric":"ping",/' >> "$RESULTS"
echo "{\"impl\":\"disk\",\"metric\":\"fdatasync_us\",\"value\":$(python3 bench/fdatasync-probe.py "$WORK/zkrs/data")}" >> "$RESULTS"

echo "== unloaded set in each log append mode, fresh servers, alternating" >&2
kill -STOP "$APID" "$ZPID"
for r in $(seq 1 "$MODE_ROUNDS"); do
  for mode in pwrite mmap; do
    MP=$(port_free); MPID=$(start_zkrs "$WORK/zkrs-$mode-$r" "$MP" "txnLog.appendMode=$mode")
    wait_serving "$MP"
    "$BENCH" --server 127.0.0.1:$MP --workload set --conns 1 --inflight 1 --duration "$DURATION" \
      --value-size "$VALUE" --json 2>/dev/null \
      | sed "s/^{/{\"impl\":\"zkrs\",\"metric\":\"set_1x1_mode\",\"mode\":\"$mode\",\"round\":$r,/" >> "$RESULTS"
    kill -9 "$MPID"; wait "$MPID" 2>/dev/null || true
    # The disk's speed drifts by tens of per cent within minutes: its yardstick is measured
    # again right after each round, in that round's data directory.
    echo "{\"impl\":\"disk\",\"metric\":\"fdatasync_round_us\",\"mode\":\"$mode\",\"round\":$r,\"value\":$(python3 bench/fdatasync-probe.py "$WORK/zkrs-$mode-$r/data")}" >> "$RESULTS"
    rm -rf "$WORK/zkrs-$mode-$r"
  done
done
kill -CONT "$APID" "$ZPID"

# Memory and restart are measured on fresh servers holding the same tree: the workloads above
# leave each server with a different number of nodes (the faster one creates more).
echo "== fresh servers for memory and restart" >&2
kill -9 "$ZPID" "$APID" 2>/dev/null || true
wait "$ZPID" "$APID" 2>/dev/null || true
ZP=$(port_free); AP=$(port_free)
ZPID=$(start_zkrs "$WORK/zkrs-mem" "$ZP"); APID=$(start_apache "$WORK/apache-mem" "$AP")
wait_serving "$ZP"; wait_serving "$AP"
echo "== memory with $ZNODES znodes of $VALUE bytes" >&2
kill -STOP "$APID"; "$BENCH" --server 127.0.0.1:$ZP --workload populate --count "$ZNODES" --conns 4 --inflight 500 --value-size "$VALUE" >/dev/null 2>&1; kill -CONT "$APID"
kill -STOP "$ZPID"; "$BENCH" --server 127.0.0.1:$AP --workload populate --count "$ZNODES" --conns 4 --inflight 500 --value-size "$VALUE" >/dev/null 2>&1; kill -CONT "$ZPID"
sleep 2
ZRSS=$(rss_mb "$ZPID"); ARSS=$(rss_mb "$APID")
echo "{\"impl\":\"zkrs\",\"metric\":\"rss_mb\",\"value\":$ZRSS,\"znodes\":$ZNODES}" >> "$RESULTS"
echo "{\"impl\":\"apache\",\"metric\":\"rss_mb\",\"value\":$ARSS,\"znodes\":$ZNODES}" >> "$RESULTS"

echo "== restart after kill -9" >&2
restart() { # name dir port pid starter
  kill -9 "$4"
  while kill -0 "$4" 2>/dev/null; do sleep 0.02; done
  local t0=$(date +%s.%N)
  local pid
  if [ "$1" = zkrs ]; then RUST_LOG=warn "$ZKRS" "$2/zoo.cfg" >> "$2/server.log" 2>&1 & pid=$!
  else java -Xmx8g -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar org.apache.zookeeper.server.ZooKeeperServerMain "$2/zoo.cfg" >> "$2/server.log" 2>&1 & pid=$!; fi
  if ! wait_serving "$3"; then
    echo "$1 did not serve again after kill -9; its log:" >&2; tail -20 "$2/server.log" >&2
    kill -9 $pid 2>/dev/null || true
    return 0
  fi
  local t1=$(date +%s.%N)
  local count=$(srvr "$3" | awk '/Node count/ {print $3}')
  echo "{\"impl\":\"$1\",\"metric\":\"restart_s\",\"value\":$(awk "BEGIN{print $t1-$t0}"),\"znodes_after\":$count}" >> "$RESULTS"
  sleep 2
  echo "{\"impl\":\"$1\",\"metric\":\"rss_after_restart_mb\",\"value\":$(rss_mb $pid)}" >> "$RESULTS"
  kill -9 $pid
}
restart apache "$WORK/apache-mem" "$AP" "$APID"
restart zkrs "$WORK/zkrs-mem" "$ZP" "$ZPID"

cp "$RESULTS" bench/last-run.json
python3 - "$RESULTS" "$DURATION" <<'PY'
import json, sys, platform, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"Run {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores, {platform.machine()}; {sys.argv[2]} s per workload, value 100 B.\n")
print("| workload | conns x inflight | Apache ops/s | zkrs ops/s | ratio | Apache p50/p99 us | zkrs p50/p99 us |")
print("|---|---|---:|---:|---:|---:|---:|")
runs = {}
for r in rows:
    if "workload" in r:
        runs.setdefault((r["workload"], r["conns"], r["inflight"]), {})[r["impl"]] = r
def shape(w, c, i, r):
    # The workloads that count something other than requests say what, and how they are shaped.
    if w == "watch": return f"{w} (events/s)", f"{c} watchers + 1 writer"
    if w == "churn": return f"{w} (cycles/s)", f"{c} workers"
    if w == "multi": return f"{w} (multis/s)", f"{c} x {i}, {r.get('ops_per_multi', '?')} setData each"
    return w, f"{c} x {i}"
errors = []
for (w, c, i), d in runs.items():
    a, z = d.get("apache"), d.get("zkrs")
    if not (a and z): continue
    name, load = shape(w, c, i, z)
    ratio = z["ops_per_sec"] / a["ops_per_sec"] if a["ops_per_sec"] else float("nan")
    print(f"| {name} | {load} | {a['ops_per_sec']:.0f} | {z['ops_per_sec']:.0f} | {ratio:.2f}x | {a['p50_us']}/{a['p99_us']} | {z['p50_us']}/{z['p99_us']} |")
    errors += [f"{name} {load} on {r['impl']}: {r['errors']}" for r in (a, z) if r.get("errors")]
if errors:
    print("\nReplies with errors: " + "; ".join(errors) + ".")
m = {(r["impl"], r["metric"]): r for r in rows if "metric" in r}
if ("zkrs","ping") in m and ("disk","fdatasync_us") in m:
    rtt, fsync = m[("zkrs","ping")]["p50_us"], m[("disk","fdatasync_us")]["value"]
    g, s1 = runs.get(("get",1,1),{}).get("zkrs"), runs.get(("set",1,1),{}).get("zkrs")
    print(f"\nReference: loopback round trip (ping p50) {rtt} us; one fdatasync on the data disk (median) {fsync} us.")
    if g and s1:
        print(f"Unloaded zkrs get p50 {g['p50_us']} us (target <= round trip + 25 = {rtt+25}); "
              f"set p50 {s1['p50_us']} us (target <= round trip + fdatasync + 40 = {rtt+fsync+40}).")
modes, probes = {}, {}
for r in rows:
    if r.get("metric") == "set_1x1_mode":
        modes.setdefault(r["mode"], []).append(r)
    if r.get("metric") == "fdatasync_round_us":
        probes[(r["mode"], r["round"])] = r["value"]
if modes and ("zkrs","ping") in m and ("disk","fdatasync_us") in m:
    import statistics
    rtt = m[("zkrs","ping")]["p50_us"]
    target = rtt + m[("disk","fdatasync_us")]["value"] + 40
    beside = [v for v in probes.values()]
    line = f"target <= {target} us with the fdatasync measured before the rounds"
    if beside:
        line += f"; {rtt + statistics.median(beside) + 40:.0f} us with the median of those measured after each round"
    print(f"\nUnloaded set (1 x 1) by log append mode, fresh servers, alternating ({line}):\n")
    print("| txnLog.appendMode | rounds | p50 us, each round | fdatasync us after each | median p50 us | median p99 us | median ops/s |")
    print("|---|---:|---|---|---:|---:|---:|")
    for mode, rs in modes.items():
        p50s = [x["p50_us"] for x in rs]
        syncs = ", ".join(str(probes.get((mode, x["round"]), "-")) for x in rs)
        print(f"| {mode} | {len(rs)} | {', '.join(map(str, p50s))} | {syncs} | {statistics.median(p50s):.0f} | "
              f"{statistics.median(x['p99_us'] for x in rs):.0f} | {statistics.median(x['ops_per_sec'] for x in rs):.0f} |")
if ("apache","rss_mb") in m:
    a, z = m[("apache","rss_mb")]["value"], m[("zkrs","rss_mb")]["value"]
    print(f"\nResident memory with {m[('apache','rss_mb')]['znodes']} znodes: Apache {a} MB, zkrs {z} MB ({z/a:.2f}x).")
if ("apache","restart_s") in m:
    a, z = m[("apache","restart_s")], m[("zkrs","restart_s")]
    print(f"Restart after kill -9 to serving: Apache {a['value']:.2f} s ({a['znodes_after']} znodes after), zkrs {z['value']:.2f} s ({z['znodes_after']} znodes after).")
if ("apache","rss_after_restart_mb") in m and ("zkrs","rss_after_restart_mb") in m:
    a, z = m[("apache","rss_after_restart_mb")]["value"], m[("zkrs","rss_after_restart_mb")]["value"]
    print(f"Resident memory 2 s after that restart: Apache {a} MB, zkrs {z} MB ({z/a:.2f}x).")
PY
