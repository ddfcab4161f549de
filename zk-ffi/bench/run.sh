#!/bin/sh
# C API async throughput: the same program (async_throughput.c, built against Apache's header)
# on libzkrs and on Debian's libzookeeper_mt, against one zkrs-server (release builds).
# Usage: zk-ffi/bench/run.sh [N] [WINDOW] [SIZE] [REPEATS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
n=${1:-100000}
window=${2:-1000}
size=${3:-100}
repeats=${4:-3}
ref=/usr/lib/x86_64-linux-gnu/libzookeeper_mt.so.2
(cd "$root" && cargo build --release -p zk-ffi -p zk-server --bin zkrs-server >&2)
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
gcc -O2 -DTHREADED -I"$root/include/zookeeper" -o "$work/bench" "$here/async_throughput.c" \
    -L"$root/target/release" -lzkrs -lpthread
mkdir -p "$work/zkrs" "$work/data"
ln -s "$root/target/release/libzkrs.so" "$work/zkrs/libzookeeper_mt.so.2"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\n' "$work/data" "$port" > "$work/zoo.cfg"
"$root/target/release/zkrs-server" "$work/zoo.cfg" > "$work/server.log" 2>&1 &
server=$!
for i in $(seq 50); do
    python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1])),1); s.sendall(b"srvr"); sys.exit(0 if b"Mode" in s.recv(4096) else 1)' "$port" 2>/dev/null && break
    sleep 0.2
done
for op in get set; do
    for r in $(seq "$repeats"); do
        printf 'libzkrs          %s\n' "$(LD_LIBRARY_PATH="$work/zkrs" "$work/bench" 127.0.0.1:"$port" $op "$n" "$window" "$size")"
        if [ -e "$ref" ]; then
            printf 'libzookeeper_mt  %s\n' "$(env -u LD_LIBRARY_PATH "$work/bench" 127.0.0.1:"$port" $op "$n" "$window" "$size")"
        fi
    done
done
