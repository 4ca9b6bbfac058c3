"""Two chaos-lab scenarios, short, in `make test`: the real stack (scripts/stack.sh
--fault-proxies: Varnish, nginx, 2 sluice processes, PostgreSQL, Redis, s3rver) with the fault on
the wire (tools/faultproxy), at a tenth of the spec's scale.

- Slow bucket: every S3 answer 1 s late (the proxy in front of s3rver), 35 creates/s offered to
  2 processes x 5 slots: 10/s admitted (slots x processes / latency), 71% shed with fast 503s,
  hot reads at the edge and /healthz untouched.
- Redis lost: refused (and its connections reset), then black-holed, then back, under 20 creates/s:
  no create fails, every process fails open while it is gone and takes the shared limits back after.

The figures and tolerances are chaoslab's (tests/lib/chaoslab.py); `make lab` runs these and the
other scenarios at the spec's scale. Run: cd tests/stack && PYTHONPATH=../lib SLUICE_BIN=...
python3 -m unittest -v test_lab_short
"""

import unittest

import chaoslab
import loadgen as lg

SCALE = 0.1
PROCESSES = 2


class LabShortTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._lock = lg.ScenarioLock().acquire()  # never beside a scenario suite
        cls.lab = chaoslab.LabStack(processes=PROCESSES)
        try:
            cls.lab.up()
        except Exception:
            cls._lock.release()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.lab.down()
        cls._lock.release()

    def check(self, res):
        table = "\n".join(f"  {f}: predicted {p}, measured {m} "
                          f"{'' if ok is None else ('ok' if ok else 'MISS')}"
                          for f, p, m, ok in res.rows)
        print(f"\n[lab] {res.title}\n{table}\n  " + "\n  ".join(res.notes), flush=True)
        problem = res.run.schedule_problem() if res.run else None
        if problem and not res.passed():
            self.skipTest(f"the load generator fell behind ({problem}): the run measured the "
                          "machine, not the stack")
        self.assertTrue(res.passed(), f"{res.title}: {res.failures()}\n{self.lab.logs(20)}")

    def test_1_slow_bucket_sheds_to_slots_over_latency(self):
        res = chaoslab.slow_bucket(self.lab, SCALE, duration=10.0, latency=1.0, shed_p99_ms=100.0)
        self.assertAlmostEqual(res.figures["predicted"], 10.0)
        self.check(res)

    def test_2_redis_lost_is_no_create_outage(self):
        res = chaoslab.redis_lost(self.lab, SCALE, duration=22.0, lost_at=4.0, refuse_for=5.0,
                                  hang_for=5.0, creates_rate=20.0, restart=False)
        self.check(res)


if __name__ == "__main__":
    unittest.main()
