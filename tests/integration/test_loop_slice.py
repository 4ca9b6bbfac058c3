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


def own_default_slice():
    """This process's slice: the kernel's default, which no one here asked to change."""
    with open("/proc/self/sched") as f:
        return next(int(line.split(":")[1]) for line in f if line.startswith("se.slice"))


LOOPS = ("main", "loop-1", "loop-2")


class LoopSliceTest(SluiceTestCase):
    def started(self, args, loop_slice):
        """The server's threads once its three loops have started and asked: each loop thread
        names itself and asks as it starts, which may be after the main thread logs its own."""
        s = self.server(["--threads", "3", *args])
        wait_until(lambda: "event loops' time slice:" in s.log(), message="slice logged")
        said = re.search(r"event loops' time slice: (.*)", s.log()).group(1)
        wait_until(lambda: all(thread_slices(s.proc.pid).get(name) == [loop_slice]
                               for name in LOOPS),
                   message=f"each loop on a slice of {loop_slice} ns: {thread_slices(s.proc.pid)}")
        return thread_slices(s.proc.pid), said

    def assert_others_on_default(self, slices, default):
        for name, values in slices.items():
            if name not in LOOPS:
                self.assertEqual(set(values), {default}, (name, slices))

    def test_the_loops_carry_the_slice_they_ask_for_and_nothing_else_does(self):
        default = own_default_slice()
        # The kernel holds a request between 100 us and 100 ms; the log says what it took.
        for setting, expected_ns in (("100us", 100_000), ("250us", 250_000), ("20us", 100_000)):
            honoured = kernel_honours_slices()
            slices, said = self.started(["--loop-slice", setting],
                                        expected_ns if honoured else default)
            if honoured:
                self.assertEqual(said.strip(), f"{expected_ns // 1000}us")
                self.assertNotEqual(default, expected_ns)
            else:
                self.assertIn("ignores a requested slice", said)
            # The pools and committers the main thread started before it asked keep the default.
            self.assert_others_on_default(slices, default)

    def test_zero_leaves_every_thread_on_the_kernels_default(self):
        default = own_default_slice()
        slices, said = self.started(["--loop-slice", "0s"], default)
        self.assertIn("the kernel's default (loop_slice = 0s)", said)
        self.assert_others_on_default(slices, default)


if __name__ == "__main__":
    unittest.main()
