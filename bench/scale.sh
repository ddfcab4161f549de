#!/usr/bin/env bash
# How a server's cost grows with its work, zkrs-server and Apache ZooKeeper 3.8 (Debian's package)
# side by side, one axis at a time, each point on fresh servers (one server runs at a time). Writes
# Markdown tables and CSV files under OUT, and PNG plots when gnuplot is installed
# (apt-get install gnuplot-nox).
#
# Axes (AXES, default "tree sessions"):
#   tree      a tree of N znodes of VALUE bytes for each N in SIZES (and ZKRS_ONLY_SIZES, zkrs
#             alone): creates per second while populating, RSS after the load, get and set
#             throughput over DURATION s each (4 connections x 200 in flight, on a hot set of
#             1,000 keys beside the tree), the longest snapshot the server took on its own
#             meanwhile (mntr's zk_max_snapshottime; both take one about every 100,000 writes by
#             default), then kill -9, the time to serving again and the RSS after the restart;
#   sessions  N idle sessions for each N in SESSION_COUNTS (bench/idle_client.py): handshakes per
#             second while opening them, and RSS per session. The server and the client each hold N
#             sockets: N stays below the open-file limit, which the script raises to the hard limit
#             (20,000 on the workplace's VMs, where root cannot raise it), and larger N are skipped.
#
#   bench/scale.sh                                     # defaults below
#   SIZES="100000 1000000 10000000" APACHE_XMX=16g bench/scale.sh
#   AXES=sessions SESSION_COUNTS="1000 10000 50000" bench/scale.sh   # 50,000 needs the file limit
#   ZKRS_ONLY_SIZES="20000000 50000000" AXES=tree bench/scale.sh
#
# Apache runs with the heap APACHE_XMX (default 8g), given in every table; a point it cannot load
# within 10 minutes is reported as failed, not dropped. Each point starts with a warm-up: the
# populate itself for the tree, a first ping round for sessions. Figures move by 10-30% between
# runs on a shared VM: read the curves and ratios, not the last digit.
set -euo pipefail
cd "$(dirname "$0")/.."
AXES=${AXES:-tree sessions}
SIZES=${SIZES:-100000 1000000}
ZKRS_ONLY_SIZES=${ZKRS_ONLY_SIZES:-}
SESSION_COUNTS=${SESSION_COUNTS:-1000 5000 10000 19000}
DURATION=${DURATION:-10}
VALUE=${VALUE:-100}
APACHE_XMX=${APACHE_XMX:-8g}
OUT=${OUT:-target/scale}
BENCH=target/release/zkrs-bench
ZKRS=target/release/zkrs-server
. bench/lib.sh

[ -f /usr/share/java/zookeeper.jar ] || { echo "Apache ZooKeeper is not installed (apt-get install zookeeper)" >&2; exit 1; }
echo "== building (release)" >&2
cargo build --release -q -p zk-server --bins
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/zkrs-scale.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$WORK"' EXIT

# Starts IMPL (zkrs or apache) on DIR's zoo.cfg; prints its pid.
start() {
  if [ "$1" = zkrs ]; then start_zkrs_cfg "$ZKRS" "$2"; else start_apache_cfg "$2" "$APACHE_XMX"; fi
}

# One zkrs-bench run; prints "ops_per_sec p50_us p99_us".
load() { # port workload
  "$BENCH" --server "127.0.0.1:$1" --workload "$2" --conns 4 --inflight 200 --duration "$DURATION" \
    --value-size "$VALUE" --json 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ops_per_sec"], r["p50_us"], r["p99_us"])'
}

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }

# One point of the tree axis: prints a CSV line
# impl,znodes,creates_per_s,rss_mb,get_ops,set_ops,set_p50_us,set_p99_us,max_snapshot_ms,restart_s,rss_restart_mb,znodes_after
tree_point() { # impl znodes
  local impl=$1 n=$2 dir="$WORK/$1-$2" port t0 t1 rss get set snap count rss2
  port=$(port_free)
  # Snapshots as each server takes them by default (snapCount 100,000).
  write_cfg "$dir" "$port"
  PID=$(start "$impl" "$dir")
  if ! wait_serving "$port"; then echo "$impl,$n,failed to start,,,,,,,,,"; kill_wait "$PID"; return; fi
  echo "== tree: $impl, populating $n znodes" >&2
  t0=$(now)
  if ! "$BENCH" --server "127.0.0.1:$port" --workload populate --count "$n" --conns 4 --inflight 500 \
      --value-size "$VALUE" >/dev/null 2>"$dir/populate.err"; then
    echo "$impl,$n,failed to populate: $(tail -1 "$dir/populate.err"),,,,,,,,,"; kill_wait "$PID"; return
  fi
  t1=$(now)
  sleep 5
  rss=$(( $(rss_kb "$PID") / 1024 ))
  echo "== tree: $impl $n: get, set" >&2
  get=$(load "$port" get | cut -d' ' -f1)
  set=$(load "$port" set)
  snap=$(mntr_value "$port" zk_max_snapshottime)
  echo "== tree: $impl $n: kill -9, restart" >&2
  kill_wait "$PID"
  t0r=$(now)
  PID=$(start "$impl" "$dir")
  if ! wait_serving "$port"; then echo "$impl,$n,did not restart,,,,,,,,,"; kill_wait "$PID"; return; fi
  t1r=$(now)
  sleep 2
  rss2=$(( $(rss_kb "$PID") / 1024 ))
  count=$(srvr "$port" | awk '/Node count/ {print $3}')
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
  local creates
  creates=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
  echo "$impl,$n,$creates,$rss,$get,${set// /,},${snap:-},$(secs "$t0r" "$t1r"),$rss2,$count"
}

# One point of the sessions axis: prints impl,sessions,handshakes_per_s,rss_before_mb,rss_after_mb,bytes_per_session
sessions_point() { # impl count
  local impl=$1 n=$2 dir="$WORK/$1-s$2" port before after ready took
  port=$(port_free)
  write_cfg "$dir" "$port"
  PID=$(start "$impl" "$dir")
  wait_serving "$port"
  sleep 2
  before=$(rss_kb "$PID")
  echo "== sessions: $impl, $n" >&2
  coproc CLIENTS { python3 bench/idle_client.py "$port" "$n"; }
  read -r ready took <&"${CLIENTS[0]}" || true
  if [ "${ready:-}" != ready ]; then
    echo "$impl,$n,failed,,,"
  else
    sleep 3
    after=$(rss_kb "$PID")
    echo "$impl,$n,$(awk -v n="$n" -v t="$took" 'BEGIN {printf "%.0f", n / t}'),$((before / 1024)),$((after / 1024)),$(( (after - before) * 1024 / n ))"
  fi
  exec {CLIENTS[1]}>&-
  wait "$CLIENTS_PID" 2>/dev/null || true
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
}

# PNG plot of CSV columns against the second (log scale), one line per impl, when gnuplot is here.
plot() { # csv png title ylabel column
  command -v gnuplot >/dev/null || return 0
  gnuplot <<EOF
set terminal pngcairo size 800,500
set output '$2'
set datafile separator ','
set title '$3'
set xlabel '$(head -1 "$1" | cut -d, -f2)'
set ylabel '$4'
set logscale x
set key below
set grid
plot '< grep ^zkrs, $1' using 2:$5 with linespoints title 'zkrs', \
     '< grep ^apache, $1' using 2:$5 with linespoints title 'Apache ZooKeeper 3.8 (-Xmx$APACHE_XMX)'
EOF
}

ulimit -n "$(ulimit -Hn)"
MD="$OUT/scale.md"
echo "# bench/scale.sh, $(date -u +%F\ %H:%M) UTC, commit $(git rev-parse --short HEAD), Apache -Xmx$APACHE_XMX" > "$MD"

if [[ " $AXES " == *" tree "* ]]; then
  CSV="$OUT/tree.csv"
  echo "impl,znodes,creates_per_s,rss_mb,get_ops,set_ops,set_p50_us,set_p99_us,max_snapshot_ms,restart_s,rss_restart_mb,znodes_after" > "$CSV"
  for n in $SIZES; do
    tree_point zkrs "$n" >> "$CSV"
    tree_point apache "$n" >> "$CSV"
  done
  for n in $ZKRS_ONLY_SIZES; do tree_point zkrs "$n" >> "$CSV"; done
  {
    echo
    echo "## Tree size ($VALUE-byte znodes; get and set: 4 x 200 in flight, $DURATION s)"
    echo
    echo "| server | znodes | creates/s | RSS MB | get ops/s | set ops/s | set p50 us | set p99 us | longest snapshot ms | restart s | RSS after restart MB | znodes after restart |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    tail -n +2 "$CSV" | sed 's/^/| /; s/,/ | /g; s/$/ |/'
  } >> "$MD"
  plot "$CSV" "$OUT/tree-rss.png" "Resident memory after loading the tree" "MB" 4
  plot "$CSV" "$OUT/tree-set.png" "setData throughput with the tree loaded" "ops/s" 6
  plot "$CSV" "$OUT/tree-get.png" "getData throughput with the tree loaded" "ops/s" 5
  plot "$CSV" "$OUT/tree-restart.png" "kill -9 to serving again" "s" 10
  plot "$CSV" "$OUT/tree-set-p99.png" "setData p99 latency" "us" 8
fi

if [[ " $AXES " == *" sessions "* ]]; then
  CSV="$OUT/sessions.csv"
  echo "impl,sessions,handshakes_per_s,rss_before_mb,rss_after_mb,bytes_per_session" > "$CSV"
  for n in $SESSION_COUNTS; do
    if [ $((n + 100)) -ge "$(ulimit -n)" ]; then
      echo "== sessions: $n needs more open files than the limit, $(ulimit -n); skipped" >&2
      continue
    fi
    sessions_point zkrs "$n" >> "$CSV"
    sessions_point apache "$n" >> "$CSV"
  done
  {
    echo
    echo "## Idle sessions (raw-wire sessions that only ping)"
    echo
    echo "| server | sessions | handshakes/s | RSS before MB | RSS with them MB | bytes per session |"
    echo "|---|---:|---:|---:|---:|---:|"
    tail -n +2 "$CSV" | sed 's/^/| /; s/,/ | /g; s/$/ |/'
  } >> "$MD"
  plot "$CSV" "$OUT/sessions-bytes.png" "Resident memory per idle session" "bytes" 6
fi

cat "$MD"
echo "(tables and CSV in $OUT$(command -v gnuplot >/dev/null && echo ', with PNG plots' || echo '; install gnuplot-nox for the plots'))" >&2
