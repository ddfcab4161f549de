#!/usr/bin/python3
"""Record real ZooKeeper client/server traffic as golden frames for zk-proto's tests.

Starts Apache ZooKeeper (Debian's package) on a loopback port with a throw-away dataDir, puts a
recording TCP proxy in front of it, and drives real clients through the proxy: kazoo (a separate
driver script, run with Debian's /usr/bin/python3), zkCli.sh (the Java client) and cli_mt (the C
client). A few exchanges no stock client produces (a handshake without the readOnly byte, an
unknown opcode, createTTL, multiRead, ...) are sent by a tiny raw client in this file; their
replies still come from the real server.

Every length-prefixed frame is written to frames.txt beside this script, one per line:

    conn <n> <label>        starts connection n, opened by the client called <label>
    > <hex>                 a client-to-server frame, without its 4-byte length prefix
    < <hex>                 a server-to-client frame, without its 4-byte length prefix

Frames are recorded before they are forwarded, so within a connection every request line comes
before its reply. Only the Python standard library is used here.

Usage: /usr/bin/python3 capture.py [output-file]
"""

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
CLI_MT = "/usr/lib/zookeeper/bin/cli_mt"
KAZOO_PYTHON = "/usr/bin/python3"
# A frame larger than this is not ZooKeeper traffic; the proxy stops recording that stream.
MAX_FRAME = 0xFFFFF


class Recorder:
    """Collects frames of every proxied connection, in arrival order per connection."""

    def __init__(self):
        self.lock = threading.Lock()
        self.conns = []  # list of (label, [(direction, bytes)])
        self.label = "unlabelled"

    def open(self):
        with self.lock:
            frames = []
            self.conns.append((self.label, frames))
            return frames

    def add(self, frames, direction, payload):
        with self.lock:
            frames.append((direction, payload))

    def write(self, path):
        with self.lock, open(path, "w") as out:
            out.write("# Golden frames recorded from Apache ZooKeeper 3.8 by capture.py; see its docstring.\n")
            n = 0
            for label, frames in self.conns:
                if not frames:
                    continue
                n += 1
                out.write("conn %d %s\n" % (n, label))
                for direction, payload in frames:
                    out.write("%s %s\n" % (direction, payload.hex()))


class Proxy:
    """A TCP proxy on 127.0.0.1 that splits both streams into frames and records them."""

    def __init__(self, upstream_port, recorder):
        self.upstream_port = upstream_port
        self.recorder = recorder
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.live = []  # sockets of open connections, so drop() can cut them
        self.live_lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            frames = self.recorder.open()
            with self.live_lock:
                self.live.extend([client, server])
            threading.Thread(target=self._pump, args=(client, server, frames, ">"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, frames, "<"), daemon=True).start()

    def _pump(self, src, dst, frames, direction):
        pending = b""
        recording = True
        while True:
            try:
                chunk = src.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            if recording:
                pending += chunk
                while len(pending) >= 4:
                    (n,) = struct.unpack(">i", pending[:4])
                    if n < 0 or n > MAX_FRAME:
                        recording = False
                        break
                    if len(pending) < 4 + n:
                        break
                    # Record before forwarding: a reply can then never precede its request.
                    self.recorder.add(frames, direction, pending[4 : 4 + n])
                    pending = pending[4 + n :]
            try:
                dst.sendall(chunk)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop(self):
        """Cuts every open connection, as a network failure would; clients then reconnect."""
        with self.live_lock:
            live, self.live = self.live, []
        for s in live:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_zookeeper(workdir):
    port = free_port()
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    cfg = os.path.join(workdir, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(
            "tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
            "4lw.commands.whitelist=*\nadmin.enableServer=false\nextendedTypesEnabled=true\n"
            % (data, port)
        )
    log = open(os.path.join(workdir, "server.log"), "w")
    proc = subprocess.Popen(
        ["java", "-Dzookeeper.log.dir=" + workdir, "-Dzookeeper.root.logger=INFO,CONSOLE",
         "-Xmx256m", "-cp", CLASSPATH, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"srvr")
                if s.recv(100).startswith(b"Zookeeper version:"):
                    return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("ZooKeeper did not start; see %s/server.log" % workdir)


# --- the clients ---------------------------------------------------------------------------


def run_kazoo(proxy):
    """Runs kazoo_driver.py; it asks on stdout for the proxy to cut its connection."""
    proc = subprocess.Popen([KAZOO_PYTHON, os.path.join(HERE, "kazoo_driver.py"), str(proxy.port)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.strip() == "DROP":
            proxy.drop()
            proc.stdin.write("dropped\n")
            proc.stdin.flush()
        else:
            print("kazoo: " + line.rstrip())
    if proc.wait() != 0:
        sys.exit("kazoo driver failed")


def run_zkcli(proxy, commands):
    """Feeds commands to one zkCli.sh session; the item DROP cuts the connection instead."""
    env = dict(os.environ, CLIENT_JVMFLAGS="-Dzookeeper.root.logger=ERROR,CONSOLE")
    proc = subprocess.Popen([ZKCLI, "-server", "127.0.0.1:%d" % proxy.port], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    time.sleep(3)  # JVM start and session setup
    for c in commands + ["quit"]:
        if c == "DROP":
            proxy.drop()
            time.sleep(4)  # the Java client waits up to a second, then reconnects
            continue
        proc.stdin.write(c + "\n")
        proc.stdin.flush()
        time.sleep(0.4)
    out, _ = proc.communicate(timeout=60)
    print("zkCli: " + out.strip().replace("\n", "\n       ")[-3000:])


def run_zkcli_one_shot(proxy, command):
    """One zkCli.sh invocation running a single command given on its command line."""
    out = subprocess.run([ZKCLI, "-server", "127.0.0.1:%d" % proxy.port] + command,
                         capture_output=True, text=True, timeout=120)
    print("zkCli one-shot: " + out.stdout.strip()[-500:])


def run_cli_mt(proxy, commands):
    """Feeds commands to the C client, pausing so each finishes before the next."""
    proc = subprocess.Popen([CLI_MT, "127.0.0.1:%d" % proxy.port], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.5)
    for c in commands:
        proc.stdin.write(c + "\n")
        proc.stdin.flush()
        time.sleep(0.5)
    proc.stdin.write("quit\n")
    proc.stdin.flush()
    out, _ = proc.communicate(timeout=30)
    print("cli_mt: " + out.strip()[-1500:])


class Raw:
    """A minimal hand-rolled client for exchanges the stock clients never produce."""

    def __init__(self, port, read_only_byte):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.xid = 0
        body = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + b"\0" * 16
        if read_only_byte:
            body += b"\0"
        self.send(body)
        self.recv()

    def send(self, body):
        self.s.sendall(struct.pack(">i", len(body)) + body)

    def recv(self):
        head = self._exact(4)
        if head is None:
            return None
        return self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def call(self, op, body=b""):
        self.xid += 1
        self.send(struct.pack(">ii", self.xid, op) + body)
        return self.recv()

    def close(self):
        self.s.close()


def jstr(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


def jbuf(b):
    return struct.pack(">i", len(b)) + b


OPEN_ACL = struct.pack(">ii", 1, 31) + jstr("world") + jstr("anyone")


def multi_header(op, done=False, err=-1):
    return struct.pack(">i?i", op, done, err)


def run_raw(proxy):
    # Handshake without the trailing readOnly byte, as pre-3.4 clients sent it.
    c = Raw(proxy.port, read_only_byte=False)
    c.call(1, jstr("/raw") + jbuf(b"r") + OPEN_ACL + struct.pack(">i", 0))
    # createContainer (19), createTTL (21) with and without a valid ttl.
    c.call(19, jstr("/raw/container") + jbuf(b"") + OPEN_ACL + struct.pack(">i", 4))
    c.call(21, jstr("/raw/ttl") + jbuf(b"t") + OPEN_ACL + struct.pack(">iq", 5, 60000))
    c.call(21, jstr("/raw/ttl-bad") + jbuf(b"t") + OPEN_ACL + struct.pack(">iq", 5, 0))
    # getChildren (8) with a watch, then checkWatches (17) and removeWatches (18).
    c.call(8, jstr("/raw") + b"\1")
    c.call(17, jstr("/raw") + struct.pack(">i", 1))
    c.call(18, jstr("/raw") + struct.pack(">i", 1))
    c.call(18, jstr("/raw") + struct.pack(">i", 2))  # no such watch: NOWATCHER
    # multiRead (22): getData and getChildren, one of them failing.
    c.call(22, multi_header(4) + jstr("/raw") + b"\0" + multi_header(8) + jstr("/raw") + b"\0"
           + multi_header(4) + jstr("/missing") + b"\0" + multi_header(-1, True))
    # A write multi with create2 and createTTL results, and check.
    c.call(14, multi_header(15) + jstr("/raw/m2") + jbuf(b"") + OPEN_ACL + struct.pack(">i", 0)
           + multi_header(13) + jstr("/raw") + struct.pack(">i", 0)
           + multi_header(21) + jstr("/raw/mttl") + jbuf(b"") + OPEN_ACL + struct.pack(">iq", 5, 1000)
           + multi_header(-1, True))
    # setData with null data, getData of it (null data in the reply).
    c.call(5, jstr("/raw/m2") + struct.pack(">i", -1) + struct.pack(">i", -1))
    c.call(4, jstr("/raw/m2") + b"\0")
    # Bad create mode, bad path, sync (9).
    c.call(1, jstr("/raw/bad") + jbuf(b"") + OPEN_ACL + struct.pack(">i", 99))
    c.call(1, jstr("/raw//bad") + jbuf(b"") + OPEN_ACL + struct.pack(">i", 0))
    c.call(9, jstr("/raw"))
    # setWatches2 (105) on a live session.
    def strings(*items):
        return struct.pack(">i", len(items)) + b"".join(jstr(i) for i in items)
    c.send(struct.pack(">iiq", -8, 105, 0) + strings("/raw") + strings() + strings("/raw")
           + strings() + strings("/raw/m2"))
    while True:
        reply = c.recv()
        if reply is None or struct.unpack(">i", reply[:4])[0] == -8:
            break
    # An opcode no client may send: UNIMPLEMENTED, then the server closes.
    c.xid += 1
    c.send(struct.pack(">ii", c.xid, 999))
    while c.recv() is not None:
        pass
    c.close()
    # A handshake with the readOnly byte set, and a close.
    c = Raw(proxy.port, read_only_byte=True)
    c.call(-11)
    c.close()
    time.sleep(0.5)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "frames.txt")
    workdir = tempfile.mkdtemp(prefix="zk-golden-")
    server, zk_port = start_zookeeper(workdir)
    recorder = Recorder()
    proxy = Proxy(zk_port, recorder)
    try:
        recorder.label = "kazoo"
        run_kazoo(proxy)
        recorder.label = "zkcli"
        run_zkcli(proxy, [
            "addauth digest alice:secret",
            "whoami",
            "create /z zdata",
            "create -e /z/eph e",
            "create -s /z/seq- s",
            "create -c /zc",
            "create -t 60000 /zt t",
            "getEphemerals",
            "getEphemerals /z",
            "getAllChildrenNumber /z",
            "getAcl /z",
            "setAcl /z auth:alice:cdrwa",
            "getAcl /z",
            "addWatch /z",
            "addWatch -m PERSISTENT_RECURSIVE /zc",
            "set /z zdata2",
            "create /zc/child c",
            "stat /z",
            "ls -s /z",
            "get -s /z",
            "delete /z/missing",
            "deleteall /zc",
            "DROP",
            "set /z zdata3",
        ])
        recorder.label = "zkcli-watches"
        run_zkcli(proxy, [
            "get -w /k",
            "ls -w /k",
            "stat -w /zmissing",
            "DROP",
            "create /zmissing m",
            "set /k k2",
            "delete /zmissing",
        ])
        recorder.label = "zkcli-oneshot"
        run_zkcli_one_shot(proxy, ["create", "/oneshot", "data"])
        recorder.label = "cli_mt"
        run_cli_mt(proxy, [
            "create /c",
            "create +e /c/e",
            "create +s /c/s",
            "create2 /c2",
            "set /c cdata",
            "get /c",
            "ls /c",
            "ls2 /c",
            "exists /c",
            "wexists /c/new",
            "create /c/new",
            "sync /c",
            "addauth digest bob:pw",
            "delete /c",
            "delete /c2",
        ])
        recorder.label = "raw"
        run_raw(proxy)
    finally:
        time.sleep(0.5)
        recorder.write(out)
        server.kill()
        server.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    print("wrote " + out)


if __name__ == "__main__":
    main()
