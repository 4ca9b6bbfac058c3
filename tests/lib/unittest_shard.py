"""Runs one shard of a unittest module: python3 -m unittest_shard MODULE INDEX COUNT.

The shard holds every COUNT-th test of the module in the order of their ids, starting at INDEX, so
the shards together run each test exactly once. It exists for the suites that start a server per
test: under AddressSanitizer, tests/integration/test_api.py's 126 servers took 170 s in one process
and ended `make test`'s sanitizer stage alone on one core (bench/results/make-test.md); CMakeLists.txt
registers such a suite as COUNT ctest entries instead (SLUICE_SHARDED_SERVER_SUITES).
"""
import sys
import unittest


def flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from flatten(item)
        else:
            yield item


def shard_of(tests, index, count):
    ordered = sorted(tests, key=lambda test: test.id())
    return [test for position, test in enumerate(ordered) if position % count == index]


def main(argv):
    if len(argv) != 4:
        sys.exit(f"usage: {argv[0]} MODULE INDEX COUNT")
    module, index, count = argv[1], int(argv[2]), int(argv[3])
    if not 0 <= index < count:
        sys.exit(f"shard {index} is not one of 0..{count - 1}")
    tests = list(flatten(unittest.defaultTestLoader.loadTestsFromName(module)))
    mine = shard_of(tests, index, count)
    # A shard that selects nothing would pass without testing anything: a module with fewer tests
    # than shards is a registration mistake, not a pass.
    if not mine:
        sys.exit(f"shard {index} of {count} of {module} holds no test ({len(tests)} in all)")
    print(f"{module}: shard {index} of {count}, {len(mine)} of {len(tests)} tests", flush=True)
    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(mine))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main(sys.argv)
