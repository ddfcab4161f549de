#!/usr/bin/env python3
"""The disk's yardstick for a commit: like the log, a preallocated file overwritten in place,
150 bytes with pwrite then fdatasync, 400 times. Prints the median fdatasync in microseconds.

    bench/fdatasync-probe.py DIR      # DIR on the disk the log uses
"""
import os, statistics, sys, time

path = os.path.join(sys.argv[1], "fdatasync-probe")
fd = os.open(path, os.O_CREAT | os.O_RDWR)
os.write(fd, b"\0" * (1 << 20)); os.fsync(fd)
times = []
for i in range(400):
    os.pwrite(fd, b"x" * 150, i * 150)
    t = time.perf_counter(); os.fdatasync(fd); times.append((time.perf_counter() - t) * 1e6)
os.close(fd); os.unlink(path)
print("%d" % statistics.median(times))
