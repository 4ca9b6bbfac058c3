"""The scale-out stack with its bodies on a real object store, short: `scripts/stack.sh up --s3 ceph`
(what `make stack S3=ceph` runs) puts Ceph's RADOS Gateway in front of a one-node cluster
(scripts/testenv/ceph-rgw.sh) where test_stack.py has s3rver, and two of test_stack.py's tests run
on it unchanged: the API contract through the edge, both processes reading the bodies the other
wrote (test 1), and the gateway stopped (SIGSTOP) under creates, which answer 503 while the edge
keeps serving, and come back without a restart (test 5). The other tests are about PostgreSQL,
Redis and the edge, the same on either store. Skipped where Ceph is not installed.

Run: cd tests/stack && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_stack_ceph
"""

import shutil
import unittest

import test_stack

SHORT = ["test_1_api_contract_through_the_edge",
         "test_5_slow_bucket_sheds_creates_and_the_edge_keeps_serving"]
MISSING = [tool for tool in ("ceph", "ceph-mon", "ceph-osd", "ceph-mgr", "radosgw", "radosgw-admin")
           if shutil.which(tool) is None]


@unittest.skipIf(MISSING, f"Ceph is not installed ({', '.join(MISSING)} missing; "
                          "scripts/install-deps.sh test installs it)")
class StackOnCephTest(test_stack.StackTest):
    S3 = "ceph"
    # Patient timeouts, as test_stack.py's for PostgreSQL and Redis: on a loaded machine (the
    # gateway, a monitor, a manager and an OSD share its cores with the stack) a PUT to RGW took
    # over 1 s here and a read of a body over test_stack.py's 3 s, and these tests are about the
    # stack, not RGW's speed. The read's budget stays under Varnish's first-byte timeout (5 s,
    # deploy/varnish/sluice.vcl). A stopped gateway still fails every create, 5 s later.
    ARGS = ["--put-timeout", "5s", "--read-budget", "4500ms"]


def load_tests(loader, tests, pattern):
    return unittest.TestSuite(StackOnCephTest(name) for name in SHORT)


if __name__ == "__main__":
    unittest.main()
