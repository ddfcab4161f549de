# Shared by the bench scripts that start servers of their own (source it; nothing runs here).
# Servers listen on 127.0.0.1 only, with every four-letter word on and no per-IP connection limit.

# A free loopback port.
port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# N free loopback ports, all different (one at a time, the kernel may hand the same one out twice).
ports_free() {
  python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# `srvr` on a port; a server still starting may take the connection and never answer: 2 s at most.
srvr() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && timeout 2 cat <&3 ) 2>/dev/null || true; }

# One figure of `mntr` on a port: mntr_value PORT zk_znode_count
mntr_value() {
  ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf mntr >&3 && timeout 5 cat <&3 ) 2>/dev/null |
    awk -v k="$2" '$1 == k {print $2}'
}

# Waits until a port answers srvr as a serving server; up to 10 minutes (a large tree takes a
# while to load). Fails with a message otherwise.
wait_serving() {
  local _
  for _ in $(seq 1 12000); do
    [[ $(srvr "$1") == Zookeeper* ]] && return 0
    sleep 0.05
  done
  echo "server on port $1 did not come up" >&2
  return 1
}

# Writes DIR/zoo.cfg for a standalone server on PORT with its data in DIR/data, then any extra
# lines given (each argument one line).
write_cfg() {
  local dir=$1 port=$2
  shift 2
  mkdir -p "$dir/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n' \
    "$dir" "$port" > "$dir/zoo.cfg"
  local line
  for line in "$@"; do echo "$line" >> "$dir/zoo.cfg"; done
}

# Starts BINARY (zkrs-server) on DIR/zoo.cfg in the background, logging to DIR/server.log; prints
# its pid.
start_zkrs_cfg() {
  RUST_LOG=warn "$1" "$2/zoo.cfg" >> "$2/server.log" 2>&1 &
  echo $!
}

# Starts Apache ZooKeeper (Debian's package) on DIR/zoo.cfg with the heap XMX (e.g. 8g) and any
# JVM flags in APACHE_JVM_OPTS in the background, logging to DIR/server.log; prints its pid.
start_apache_cfg() {
  # shellcheck disable=SC2086 # APACHE_JVM_OPTS: extra JVM flags, split on spaces
  java "-Xmx$2" ${APACHE_JVM_OPTS:-} -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain "$1/zoo.cfg" >> "$1/server.log" 2>&1 &
  echo $!
}

# Resident memory of a pid, in kB.
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# Kills a pid with SIGKILL and waits until it is gone.
kill_wait() {
  kill -9 "$1" 2>/dev/null || true
  while kill -0 "$1" 2>/dev/null; do sleep 0.02; done
}
