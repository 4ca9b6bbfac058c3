"""The time slice each event loop asks of the kernel's scheduler (src/app/thread_slice.h, the
loop_slice setting): the loop threads carry it, the committers and pools keep the kernel's default,
and the start log says what the kernel did with the request. Read from the kernel's own account of
each thread, /proc/PID/task/TID/sched (se.slice). Linux 6.12 and later honour a requested slice;
on an older kernel the log must say that the default stays, and no thread may differ."""

import os
import platform
import re
import unittest

from sluice_harness import SluiceTestCase, wait_until


def kernel_honours_slices():
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", platform.release()).groups())
    return (major, minor) >= (6, 12)


def thread_slices(pid):
    """{thread name: [se.slice of each thread of that name]}, the process's own thread as 'main'."""
    slices = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            name = "main" if int(tid) == pid else f.read().strip()
        with open(f"/proc/{pid}/task/{tid}/sched") as f:
            slice_ns = next(int(line.split(":")[1]) for line in f if line.startswith("se.slice"))
        slices.setdefault(name, []).append(slice_ns)
    return slices


class LoopSliceTest(SluiceTestCase):
    def started(self, args):
        s = self.server(["--threads", "3", *args])
        wait_until(lambda: "event loops' time slice:" in s.log(), message="slice logged")
        said = re.search(r"event loops' time slice: (.*)", s.log()).group(1)
        return thread_slices(s.proc.pid), said

    def test_the_loops_carry_the_slice_they_ask_for_and_nothing_else_does(self):
        # The kernel holds a request between 100 us and 100 ms; the log says what it took.
        for setting, expected_ns in (("100us", 100_000), ("250us", 250_000), ("20us", 100_000)):
            slices, said = self.started(["--loop-slice", setting])
            loops = slices["main"] + slices["loop-1"] + slices["loop-2"]
            default = slices["commit-meta"][0]
            if kernel_honours_slices():
                self.assertEqual(said.strip(), f"{expected_ns // 1000}us")
                self.assertEqual(loops, [expected_ns] * 3, slices)
                self.assertNotEqual(default, expected_ns, slices)
            else:
                self.assertIn("ignores a requested slice", said)
                self.assertEqual(loops, [default] * 3, slices)
            # The pools and committers the main thread started before it asked keep the default.
            for name, values in slices.items():
                if name not in ("main", "loop-1", "loop-2"):
                    self.assertEqual(set(values), {default}, (name, slices))

    def test_zero_leaves_every_thread_on_the_kernels_default(self):
        slices, said = self.started(["--loop-slice", "0s"])
        self.assertIn("the kernel's default (loop_slice = 0s)", said)
        everything = {value for values in slices.values() for value in values}
        self.assertEqual(len(everything), 1, slices)


if __name__ == "__main__":
    unittest.main()
