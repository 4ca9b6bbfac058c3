#!/usr/bin/env python3
"""How long a paste deleted on one process stays served by another, with no Redis (issue 43, item 3).

One PostgreSQL (scripts/testenv/postgres.sh, in a temporary folder), two sluice processes on it
sharing a folder of bodies, every setting at its default (local_cache_ttl 5 s). For each of
PASTES pastes: created on a, read twice on b (the second read is from b's memory), deleted on a
with its token; then b is asked every 50 ms until it answers 404, or WAIT seconds have passed.
Printed: the seconds from the delete's 204 to b's first 404 (median, max), and how many pastes b
still served when the wait ran out.

Run: PYTHONPATH=tests/lib:tests/integration SLUICE_BIN=build/dev/sluice \\
     python3 bench/fleet_cache_bench.py [--pastes 10] [--wait 30]
(bench/results/fleet-cache.md keeps the figures of both binaries.)
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from sluice_harness import SluiceServer, sluice_bin, wait_until  # noqa: E402
from promtext import metric  # noqa: E402
import test_postgres  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pastes", type=int, default=10)
    ap.add_argument("--wait", type=float, default=30.0)
    args = ap.parse_args()

    pg = test_postgres.PostgresServer()
    blobs = tempfile.mkdtemp(prefix="sluice-fleet-cache-")
    servers = []
    try:
        for _ in range(2):
            s = SluiceServer(["--meta", pg.url, *test_postgres.PostgresMetaTest.RELAXED],
                             data_dir=blobs)
            s.start()
            servers.append(s)
            wait_until(lambda s=s: metric(s.metrics(), "sluice_meta_pool_connections",
                                          pool="write") >= 1, message="write pool warm")
        a, b = servers
        docs = []
        for i in range(args.pastes):
            doc = a.create_ok(f"paste {i}, deleted on a\n".encode())
            for _ in range(2):
                assert b.get(f"/raw/{doc['id']}").status == 200
            docs.append(doc)
        # Deleted one after the other, then watched together: each paste's clock starts at its
        # own delete.
        deleted = {}
        for doc in docs:
            assert a.delete(doc["id"], token=doc["delete_token"]).status == 204
            deleted[doc["id"]] = time.monotonic()
        served_for = {}
        end = time.monotonic() + args.wait
        while len(served_for) < len(docs) and time.monotonic() < end:
            for paste_id, at in deleted.items():
                if paste_id not in served_for and b.get(f"/raw/{paste_id}").status == 404:
                    served_for[paste_id] = time.monotonic() - at
            time.sleep(0.05)
        still = len(docs) - len(served_for)
        seconds = sorted(served_for.values())
        print(f"binary: {sluice_bin()}")
        print(f"pastes: {len(docs)}; 404 on b after the delete on a, s: "
              f"median {statistics.median(seconds):.2f}, max {max(seconds):.2f}" if seconds else
              f"pastes: {len(docs)}; none 404 on b")
        print(f"still served by b after {args.wait:g} s: {still} of {len(docs)}")
    finally:
        for s in servers:
            s.stop(expect_code=None)
            s.cleanup()
        pg.stop()
        shutil.rmtree(blobs, ignore_errors=True)


if __name__ == "__main__":
    main()
