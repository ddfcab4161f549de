#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (corpus/<target>/) from the golden bytes captured from
Apache ZooKeeper 3.8 (zk-proto/tests/golden/frames.txt, zk-quorum/tests/golden/*.bin), the
compressed streams Java wrote (zk-log/tests/testdata/apache_snap_stream) and a few hand-made
inputs. Run it again after the golden files change; the output is deterministic.
The seeds built with the crates (transactions, segments, snapshots, Apache files, zoo.cfg,
certificates) are written by `cargo test -p zkrs-fuzz --test seeds -- --ignored`."""

import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
QGOLD = os.path.join(ROOT, "zk-quorum", "tests", "golden")


def put(target, data, limit=None):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if limit is not None and len(os.listdir(d)) >= limit:
        return
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gold(name):
    with open(os.path.join(QGOLD, name), "rb") as f:
        return f.read()


def client():
    # One file per distinct opcode (the header's second i32), the handshake apart.
    seen = set()
    first = True
    with open(os.path.join(ROOT, "zk-proto", "tests", "golden", "frames.txt")) as f:
        for line in f:
            if line.startswith("conn "):
                first = True
                continue
            if not line.startswith("> "):
                continue
            data = bytes.fromhex(line[2:].strip())
            if first:
                first = False
                put("client_connect", data, limit=6)
                continue
            if len(data) >= 8:
                op = struct.unpack(">i", data[4:8])[0]
                if op in seen:
                    continue
                seen.add(op)
            put("client_request", data)


def quorum():
    for n in sorted(os.listdir(QGOLD)):
        if n.startswith("apache380-quorum-") and n.endswith(".bin") and "snapshot-stream" not in n:
            put("quorum_packet", gold(n))
    # LearnerInfo (sid, protocol version, config version), LeaderInfo, AckEpoch, touches,
    # a forwarded request, revalidation.
    # Quorum SASL packets: {i64 magic, i32 status, buffer token}, as a learner and a server send them.
    magic = 0x5F2435013501EDCC

    def auth(status, token):
        if token is None:
            return struct.pack(">qii", magic, status, -1)
        return struct.pack(">qii", magic, status, len(token)) + token

    challenge = b'realm="zk-quorum-sasl-md5",nonce="0202",charset=utf-8,algorithm=md5-sess'
    response = (b'charset=utf-8,username="peer",realm="zk-quorum-sasl-md5",nonce="0202",nc=00000001,'
                b'cnonce="0101",digest-uri="zookeeper-quorum/zk-quorum-sasl-md5",maxbuf=65536,'
                b'response=00000000000000000000000000000000,qop=auth')
    put("quorum_auth", auth(0, b""))
    put("quorum_auth", auth(0, b"") + auth(0, response))
    put("quorum_auth", auth(0, challenge) + auth(1, b"rspauth=00000000000000000000000000000000"))
    put("quorum_auth", auth(-1, b"") + auth(0, None))
    put("quorum_payload", b"\x00" + struct.pack(">qiq", 2, 0x10000, 0))
    put("quorum_payload", b"\x01" + struct.pack(">i", 0x10000))
    put("quorum_payload", b"\x02" + struct.pack(">iq", 1, 1 << 32))
    put("quorum_payload", b"\x03" + struct.pack(">qiqi", 7, 4000, 8, 30000))
    put("quorum_payload", b"\x04" + struct.pack(">qii", 7, 1, 1) + bytes.fromhex("000000022f6b00000000"))
    put("quorum_payload", b"\x05" + struct.pack(">qi", 7, 4000))
    put("quorum_payload", b"\x06" + struct.pack(">qb", 7, 1))


def election():
    for n in sorted(os.listdir(QGOLD)):
        if n.startswith("apache380-notification-"):
            put("election_notification", gold(n))
    hs = gold("apache380-handshake-sid2.bin")
    note = gold("apache380-notification-sid2-looking.bin")
    put("election_handshake", hs)
    put("election_handshake", hs + struct.pack(">i", len(note)) + note)
    put("election_handshake", struct.pack(">q", 3) + struct.pack(">i", len(note)) + note)


def snap():
    # SNAP streams captured from Apache, split in the middle.
    put("apache_snap", b"\x80" + gold("apache380-quorum-snapshot-stream.bin"))
    with open(os.path.join(ROOT, "zk-tree", "tests", "data", "apache-3.8-snap.bin"), "rb") as f:
        put("apache_snap", b"\x80" + f.read())
    # A gzip and a snappy-java stream written by Java's own compressors (Fixture.java there);
    # the first byte picks the decoder: even gz, odd snappy.
    fixtures = os.path.join(ROOT, "zk-log", "tests", "testdata", "apache_snap_stream")
    for which, name in ((b"\x00", "content.gz"), (b"\x01", "blocks.snappy")):
        with open(os.path.join(fixtures, name), "rb") as f:
            put("apache_snap_stream", which + f.read())


def main():
    if len(sys.argv) > 1:
        sys.exit("usage: seed_corpus.py")
    client()
    quorum()
    election()
    snap()


main()
