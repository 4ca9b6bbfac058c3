#!/usr/bin/env python3
"""Probe of the disk's durable-write limits, printed beside sluice's create figure.

Usage: fsync_probe.py DIR [SECONDS_PER_TEST]
Writes 10 KB files under DIR (use the data dir's filesystem) and prints one line per test:
  serial_fsync     one thread: create, write 10 KB, fsync, close, in a loop        (files/s)
  fsync_16threads  16 threads doing the same (the GIL is released inside fsync)     (files/s)
  syncfs_batch_N   write N files, then one syncfs for the whole batch               (files/s)
  sluice_batch_N   the file protocol before it left syncfs: write N temp files,
                   syncfs, rename all, syncfs                                       (files/s)
  files_batch_N    the file protocol now (bodies over inline_body_bytes,
                   src/store/fs/fs_blob_store.cc): write N temp files,
                   sync_file_range(SYNC_FILE_RANGE_WRITE) each, fdatasync each, rename each into
                   its own shard folder, fsync each of those N folders               (files/s)
  wal_batch_N      the embedded store's protocol for smaller bodies (a body and its row in
                   meta.db's WAL): append N records of 10 KB to one file that already has its
                   blocks, then one fdatasync; wraps at 64 MB as SQLite's kept WAL does (records/s)
Files are kept until a test ends, then deleted and flushed outside the timed part: the root
filesystem here is mounted with `discard`, and a flush that also commits unlinks pays for the
discards (several times slower), which is not what a create pays.
Standard library only (syncfs and sync_file_range through ctypes).
"""
import ctypes
import os
import sys
import threading
import time

SIZE = 10 * 1024
BODY = (b"fsync probe " * (SIZE // 12 + 1))[:SIZE]

libc = ctypes.CDLL(None, use_errno=True)


def syncfs(fd):
    if libc.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def write_file(path, do_fsync):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, BODY)
        if do_fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def clean(root):
    """Deletes what a test wrote and flushes the deletes, untimed."""
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            for inner in os.listdir(path):
                os.unlink(os.path.join(path, inner))
            os.rmdir(path)
        else:
            os.unlink(path)
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs(dfd)
    finally:
        os.close(dfd)


def serial_fsync(root, seconds):
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        write_file(os.path.join(root, f"s{n}"), True)
        n += 1
    return n / (time.monotonic() - t0)


def threaded_fsync(root, seconds, threads=16):
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def work(k):
        i = 0
        while time.monotonic() < stop:
            write_file(os.path.join(root, f"t{k}_{i}"), True)
            i += 1
        counts[k] = i

    t0 = time.monotonic()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def batch(root, seconds, size, with_rename):
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        n, b, t0 = 0, 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            names = [os.path.join(root, f"b{b}_{i}") for i in range(size)]
            for p in names:
                write_file(p + ".tmp" if with_rename else p, False)
            syncfs(dfd)
            if with_rename:
                for p in names:
                    os.rename(p + ".tmp", p)
                syncfs(dfd)
            n += size
            b += 1
        return n / (time.monotonic() - t0)
    finally:
        os.close(dfd)


SYNC_FILE_RANGE_WRITE = 2


def files_batch(root, seconds, size):
    """Per-file flushes: each batch renames into `size` distinct shard folders (made untimed first),
    as random ids over 3,844 shards mostly do."""
    shards = [os.path.join(root, f"d{i}") for i in range(size)]
    for d in shards:
        os.mkdir(d)
    n, b, t0 = 0, 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        tmps = [os.path.join(root, f"b{b}_{i}.tmp") for i in range(size)]
        fds = []
        for p in tmps:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, BODY)
            fds.append(fd)
        for fd in fds:
            libc.sync_file_range(fd, ctypes.c_int64(0), ctypes.c_int64(0),
                                 ctypes.c_uint(SYNC_FILE_RANGE_WRITE))
        for fd in fds:
            os.fdatasync(fd)
            os.close(fd)
        for i, p in enumerate(tmps):
            os.rename(p, os.path.join(shards[i], f"b{b}_{i}"))
        for d in shards:
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        n += size
        b += 1
    return n / (time.monotonic() - t0)


def wal_batch(root, seconds, size, wal_bytes=64 * 1024 * 1024):
    path = os.path.join(root, "wal")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # Untimed: the blocks exist before the test, as in a WAL that has reached its working size.
        chunk = b"\0" * (1024 * 1024)
        for _ in range(wal_bytes // len(chunk)):
            os.write(fd, chunk)
        os.fsync(fd)
        records = BODY * size
        n, offset, t0 = 0, 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            if offset + len(records) > wal_bytes:
                offset = 0
            os.pwrite(fd, records, offset)
            os.fdatasync(fd)
            offset += len(records)
            n += size
        return n / (time.monotonic() - t0)
    finally:
        os.close(fd)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    root = os.path.join(sys.argv[1], f"fsync-probe-{os.getpid()}")
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    os.makedirs(root)
    try:
        clean(root)
        tests = [("serial_fsync", lambda: serial_fsync(root, seconds)),
                 ("fsync_16threads", lambda: threaded_fsync(root, seconds))]
        for size in (16, 64, 256):
            tests.append((f"syncfs_batch_{size}", lambda s=size: batch(root, seconds, s, False)))
        tests.append(("sluice_batch_64", lambda: batch(root, seconds, 64, True)))
        tests.append(("files_batch_64", lambda: files_batch(root, seconds, 64)))
        for size in (16, 64):
            tests.append((f"wal_batch_{size}", lambda s=size: wal_batch(root, seconds, s)))
        for name, run in tests:
            print(f"{name} {run():.0f}", flush=True)
            clean(root)
    finally:
        clean(root)
        os.rmdir(root)


if __name__ == "__main__":
    main()
