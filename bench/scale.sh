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
#   watches   for each SESSIONSxPATHS in WATCH_SHAPES: PATHS znodes, then SESSIONS sessions each
#             setting an exists watch on every one of them (bench/tree_client.py): RSS with the
#             sessions alone and with their watches, so bytes per watch without the sessions' own
#             cost, and the time the watches took to set; then one setData fanning out to
#             FANOUT_WATCHERS sessions each watching it (zkrs-bench's watch workload, DURATION s):
#             notification latency p50/p99/max from the setData being sent.
#   recursive for each R in RECURSIVE_COUNTS: R persistent recursive watches (10 sessions, on
#             paths beside the written ones, so none fires), then setData for DURATION s: the
#             cost every write pays for the recursive watches it must look for among its
#             ancestors, and the memory of a recursive watch.
#   children  N persistent-sequential creates under one parent for each N in CHILDREN_COUNTS:
#             creates per second, RSS, and one getChildren of that parent (median of three: its
#             time and its reply's size).
#   values    setData of each size in VALUE_SIZES bytes (64 keys, 4 connections x 4 in flight,
#             DURATION s; jute.maxbuffer raised to fit on both servers): MB/s against this disk's
#             own rate measured in the same run (dd: 256 MiB with one fdatasync at the end, and
#             64 x 1 MiB each synced).
#
#   bench/scale.sh                                     # defaults below
#   SIZES="100000 1000000 10000000" APACHE_XMX=16g bench/scale.sh
#   AXES=sessions SESSION_COUNTS="1000 10000 50000" bench/scale.sh   # 50,000 needs the file limit
#   ZKRS_ONLY_SIZES="20000000 50000000" AXES=tree bench/scale.sh
#   AXES="watches recursive children values" bench/scale.sh
#   IMPLS=zkrs AXES=watches bench/scale.sh              # one server only (IMPLS: zkrs apache)
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
WATCH_SHAPES=${WATCH_SHAPES:-10x100000 10000x100}
FANOUT_WATCHERS=${FANOUT_WATCHERS:-10000}
RECURSIVE_COUNTS=${RECURSIVE_COUNTS:-0 1000 100000}
CHILDREN_COUNTS=${CHILDREN_COUNTS:-100000 1000000}
VALUE_SIZES=${VALUE_SIZES:-1024 10240 102400 1048576 4194304}
DURATION=${DURATION:-10}
VALUE=${VALUE:-100}
APACHE_XMX=${APACHE_XMX:-8g}
IMPLS=${IMPLS:-zkrs apache}
OUT=${OUT:-target/scale}
BENCH=${BENCH:-target/release/zkrs-bench}
ZKRS=${ZKRS:-target/release/zkrs-server}
. bench/lib.sh

[[ " $IMPLS " != *" apache "* ]] || [ -f /usr/share/java/zookeeper.jar ] || { echo "Apache ZooKeeper is not installed (apt-get install zookeeper)" >&2; exit 1; }
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

# A Markdown table of CSV's rows (its first line, the CSV header, left out) under HEADER ("| a | b |");
# the first column aligned left, the others right.
md_table() { # csv header
  local cols i
  cols=$(($(tr -cd '|' <<< "$2" | wc -c) - 1))
  echo "$2"
  printf '|---|'; for ((i = 1; i < cols; i++)); do printf -- '---:|'; done; echo
  tail -n +2 "$1" | sed 's/^/| /; s/,/ | /g; s/$/ |/'
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

# One point of the watch axis: prints
# impl,sessions,paths,watches,rss_sessions_mb,rss_watches_mb,bytes_per_watch,set_watches_s
watch_point() { # impl sessions paths
  local impl=$1 s=$2 p=$3 dir="$WORK/$1-w$2x$3" port word took n mid after
  port=$(port_free)
  write_cfg "$dir" "$port"
  PID=$(start "$impl" "$dir")
  if ! wait_serving "$port"; then echo "$impl,$s,$p,failed to start,,,,"; kill_wait "$PID"; return; fi
  echo "== watches: $impl, $s sessions x $p paths" >&2
  "$BENCH" --server "127.0.0.1:$port" --workload populate --count "$p" --conns 1 --inflight 500 \
    --value-size "$VALUE" >/dev/null 2>&1
  coproc WATCHERS { python3 bench/tree_client.py watches "$port" "$s" "$p" /zkrs-bench/pop-c0-; }
  read -r word took <&"${WATCHERS[0]}" || true
  if [ "${word:-}" != open ]; then
    echo "$impl,$s,$p,failed to open the sessions,,,,"
  else
    sleep 3
    mid=$(rss_kb "$PID")
    echo go >&"${WATCHERS[1]}"
    read -r word took n <&"${WATCHERS[0]}" || true
    if [ "${word:-}" != ready ]; then
      echo "$impl,$s,$p,failed to set the watches,,,,"
    else
      sleep 3
      after=$(rss_kb "$PID")
      echo "$impl,$s,$p,$n,$((mid / 1024)),$((after / 1024)),$(( (after - mid) * 1024 / n )),$took"
    fi
  fi
  [ -z "${WATCHERS[1]:-}" ] || exec {WATCHERS[1]}>&-
  wait "${WATCHERS_PID:-}" 2>/dev/null || true
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
}

# One point of the recursive axis: prints impl,watches,rss_before_mb,rss_after_mb,bytes_per_watch,set_ops_per_s,set_p50_us,set_p99_us
recursive_point() { # impl watches
  local impl=$1 r=$2 dir="$WORK/$1-r$2" port word took n mid after=0 per=0 res
  port=$(port_free)
  write_cfg "$dir" "$port"
  PID=$(start "$impl" "$dir")
  if ! wait_serving "$port"; then echo "$impl,$r,failed to start,,,,,"; kill_wait "$PID"; return; fi
  echo "== recursive watches: $impl, $r" >&2
  mid=$(rss_kb "$PID")
  if [ "$r" -gt 0 ]; then
    coproc WATCHERS { python3 bench/tree_client.py watches "$port" 10 $((r / 10)) /recursive/w recursive; }
    read -r word took <&"${WATCHERS[0]}" || true
    if [ "${word:-}" != open ]; then
      echo "$impl,$r,failed to open the sessions,,,,,"
      kill_wait "$PID"; PID=; rm -rf "$dir"; return
    fi
    sleep 3
    mid=$(rss_kb "$PID")
    echo go >&"${WATCHERS[1]}"
    read -r word took n <&"${WATCHERS[0]}" || true
    if [ "${word:-}" != ready ]; then
      echo "$impl,$r,failed to set the watches,,,,,"
      kill_wait "$PID"; PID=; rm -rf "$dir"; return
    fi
    sleep 3
    after=$(rss_kb "$PID")
    per=$(( (after - mid) * 1024 / n ))
  else
    after=$mid
  fi
  res=$(load "$port" set | tr ' ' ',')
  echo "$impl,$r,$((mid / 1024)),$((after / 1024)),$per,$res"
  if [ "$r" -gt 0 ]; then
    exec {WATCHERS[1]}>&-
    wait "${WATCHERS_PID:-}" 2>/dev/null || true
  fi
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
}

# One point of the fan-out: prints impl,watchers,events_per_s,p50_us,p99_us,max_us
fanout_point() { # impl watchers
  local impl=$1 w=$2 dir="$WORK/$1-f$2" port r
  port=$(port_free)
  write_cfg "$dir" "$port"
  PID=$(start "$impl" "$dir")
  if ! wait_serving "$port"; then echo "$impl,$w,failed to start,,,"; kill_wait "$PID"; return; fi
  echo "== watches: $impl, one setData to $w watchers" >&2
  r=$("$BENCH" --server "127.0.0.1:$port" --workload watch --conns "$w" --duration "$DURATION" --json \
    2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ops_per_sec"], r["p50_us"], r["p99_us"], r["max_us"])') ||
    r="failed"
  echo "$impl,$w,${r// /,}"
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
}

# One point of the children axis: prints
# impl,children,creates_per_s,rss_mb,get_children_s,reply_bytes,children_listed
children_point() { # impl count
  local impl=$1 n=$2 dir="$WORK/$1-c$2" port t0 t1 rss runs=() listed bytes
  port=$(port_free)
  write_cfg "$dir" "$port"
  PID=$(start "$impl" "$dir")
  if ! wait_serving "$port"; then echo "$impl,$n,failed to start,,,,"; kill_wait "$PID"; return; fi
  echo "== children: $impl, $n sequential children of one parent" >&2
  t0=$(now)
  if ! "$BENCH" --server "127.0.0.1:$port" --workload populate-seq --count "$n" --conns 4 --inflight 500 \
      --value-size "$VALUE" >/dev/null 2>"$dir/populate.err"; then
    echo "$impl,$n,failed to populate: $(tail -1 "$dir/populate.err"),,,,"; kill_wait "$PID"; return
  fi
  t1=$(now)
  sleep 3
  rss=$(( $(rss_kb "$PID") / 1024 ))
  for _ in 1 2 3; do
    read -r _ listed bytes took < <(python3 bench/tree_client.py children "$port" /zkrs-bench/seq) || true
    runs+=("${took:-nan}")
  done
  local median
  median=$(printf '%s\n' "${runs[@]}" | sort -g | sed -n 2p)
  echo "$impl,$n,$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}'),$rss,$median,${bytes:-},${listed:-}"
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
}

# One point of the value axis: prints impl,value_bytes,ops_per_s,mb_per_s,p50_us,p99_us,errors
value_point() { # impl size
  local impl=$1 v=$2 dir="$WORK/$1-v$2" port r max
  port=$(port_free)
  max=$((v * 2 + 65536))
  write_cfg "$dir" "$port" "jute.maxbuffer=$max"
  if [ "$impl" = zkrs ]; then PID=$(start zkrs "$dir"); else
    PID=$(APACHE_JVM_OPTS="-Djute.maxbuffer=$max" start apache "$dir"); fi
  if ! wait_serving "$port"; then echo "$impl,$v,failed to start,,,,"; kill_wait "$PID"; return; fi
  echo "== values: $impl, $v bytes" >&2
  r=$("$BENCH" --server "127.0.0.1:$port" --workload set --keys 64 --conns 4 --inflight 4 \
    --value-size "$v" --duration "$DURATION" --json 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ops_per_sec"], round(r["ops_per_sec"] * r["value_size"] / 1e6, 1), r["p50_us"], r["p99_us"], r["errors"])') ||
    r="failed"
  echo "$impl,$v,${r// /,}"
  kill_wait "$PID"
  PID=
  rm -rf "$dir"
}

# This disk's own sequential write rate, MB/s: "one_sync synced_each".
disk_rate() {
  local f="$WORK/dd.bin" a b
  a=$(dd if=/dev/zero of="$f" bs=1M count=256 conv=fdatasync 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
  b=$(dd if=/dev/zero of="$f" bs=1M count=64 oflag=dsync 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
  rm -f "$f"
  # dd prints "N MB/s" or "N GB/s".
  echo "$a" "$b" | awk '{x = ($2 == "GB/s") ? $1 * 1000 : $1; y = ($4 == "GB/s") ? $3 * 1000 : $3; print x, y}'
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
    for impl in $IMPLS; do tree_point "$impl" "$n" >> "$CSV"; done
  done
  for n in $ZKRS_ONLY_SIZES; do tree_point zkrs "$n" >> "$CSV"; done
  {
    echo
    echo "## Tree size ($VALUE-byte znodes; get and set: 4 x 200 in flight, $DURATION s)"
    echo
    md_table "$CSV" "| server | znodes | creates/s | RSS MB | get ops/s | set ops/s | set p50 us | set p99 us | longest snapshot ms | restart s | RSS after restart MB | znodes after restart |"
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
    for impl in $IMPLS; do sessions_point "$impl" "$n" >> "$CSV"; done
  done
  {
    echo
    echo "## Idle sessions (raw-wire sessions that only ping)"
    echo
    md_table "$CSV" "| server | sessions | handshakes/s | RSS before MB | RSS with them MB | bytes per session |"
  } >> "$MD"
  plot "$CSV" "$OUT/sessions-bytes.png" "Resident memory per idle session" "bytes" 6
fi

if [[ " $AXES " == *" watches "* ]]; then
  CSV="$OUT/watches.csv"
  echo "impl,sessions,paths,watches,rss_sessions_mb,rss_watches_mb,bytes_per_watch,set_watches_s" > "$CSV"
  for shape in $WATCH_SHAPES; do
    s=${shape%x*} p=${shape#*x}
    if [ $((s + 100)) -ge "$(ulimit -n)" ]; then
      echo "== watches: $s sessions need more open files than the limit, $(ulimit -n); skipped" >&2
      continue
    fi
    for impl in $IMPLS; do watch_point "$impl" "$s" "$p" >> "$CSV"; done
  done
  FCSV="$OUT/fanout.csv"
  echo "impl,watchers,events_per_s,p50_us,p99_us,max_us" > "$FCSV"
  if [ $((FANOUT_WATCHERS + 100)) -lt "$(ulimit -n)" ]; then
    for impl in $IMPLS; do fanout_point "$impl" "$FANOUT_WATCHERS" >> "$FCSV"; done
  fi
  {
    echo
    echo "## Watches (exists watches on $VALUE-byte znodes; bytes per watch: RSS with the watches minus RSS with the sessions alone)"
    echo
    md_table "$CSV" "| server | sessions | paths each | watches | RSS with the sessions MB | RSS with the watches MB | bytes per watch | seconds to set them |"
    echo
    echo "One setData, a data watch on it in each of $FANOUT_WATCHERS sessions (re-armed after each event), $DURATION s: notification latency from the setData being sent."
    echo
    md_table "$FCSV" "| server | watchers | events/s | p50 us | p99 us | max us |"
  } >> "$MD"
fi

if [[ " $AXES " == *" recursive "* ]]; then
  CSV="$OUT/recursive.csv"
  echo "impl,watches,rss_before_mb,rss_after_mb,bytes_per_watch,set_ops_per_s,set_p50_us,set_p99_us" > "$CSV"
  for r in $RECURSIVE_COUNTS; do
    for impl in $IMPLS; do recursive_point "$impl" "$r" >> "$CSV"; done
  done
  {
    echo
    echo "## Persistent recursive watches that do not fire (10 sessions; setData 4 x 200 in flight, $DURATION s)"
    echo
    md_table "$CSV" "| server | recursive watches | RSS before MB | RSS with them MB | bytes per watch | set ops/s | set p50 us | set p99 us |"
  } >> "$MD"
fi

if [[ " $AXES " == *" children "* ]]; then
  CSV="$OUT/children.csv"
  echo "impl,children,creates_per_s,rss_mb,get_children_s,reply_bytes,children_listed" > "$CSV"
  for n in $CHILDREN_COUNTS; do
    for impl in $IMPLS; do children_point "$impl" "$n" >> "$CSV"; done
  done
  {
    echo
    echo "## Children of one parent (persistent-sequential creates, 4 connections x 500 in flight; getChildren: median of three)"
    echo
    md_table "$CSV" "| server | children | creates/s | RSS MB | getChildren s | reply bytes | children listed |"
  } >> "$MD"
  plot "$CSV" "$OUT/children-get.png" "getChildren of a parent with N children" "s" 5
  plot "$CSV" "$OUT/children-creates.png" "Sequential creates into one parent" "creates/s" 3
fi

if [[ " $AXES " == *" values "* ]]; then
  CSV="$OUT/values.csv"
  echo "impl,value_bytes,ops_per_s,mb_per_s,p50_us,p99_us,errors" > "$CSV"
  read -r disk_one disk_each < <(disk_rate)
  for v in $VALUE_SIZES; do
    for impl in $IMPLS; do value_point "$impl" "$v" >> "$CSV"; done
  done
  {
    echo
    echo "## Value sizes (setData on 64 keys, 4 connections x 4 in flight, $DURATION s)"
    echo
    echo "This disk, measured in the same run with dd: $disk_one MB/s written with one fdatasync at the end, $disk_each MB/s in 1 MiB writes each synced."
    echo
    md_table "$CSV" "| server | value bytes | sets/s | MB/s | p50 us | p99 us | errors |"
  } >> "$MD"
  plot "$CSV" "$OUT/values-mbps.png" "setData MB/s by value size" "MB/s" 4
fi

cat "$MD"
echo "(tables and CSV in $OUT$(command -v gnuplot >/dev/null && echo ', with PNG plots' || echo '; install gnuplot-nox for the plots'))" >&2
