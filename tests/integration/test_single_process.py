"""One serving process per data dir and per port.

A second `sluice serve` on the same data dir, or joining a port another process listens on (which
SO_REUSEPORT would otherwise allow), must refuse to start with a message that says why, and the
first process must go on serving as before.
"""

import os
import socket
import unittest

from sluice_harness import SluiceTestCase, run_sluice


class SingleProcessTest(SluiceTestCase):
    def second_start(self, first, listen, data_dir):
        return run_sluice(["serve", "--listen", listen, "--data-dir", data_dir], timeout=30)

    def assertFirstStillServes(self, first, paste):
        self.assertTrue(first.running(), first.log())
        self.assertEqual(first.get(f"/raw/{paste}").text, "still here\n")
        self.assertEqual(first.get("/raw/" + first.create_ok("and writable\n")["id"]).status, 200)

    def test_its_threads_are_named_and_the_process_keeps_its_own(self):
        # ps -L, top -H and perf tell the committer from a loop by these names; pidof and
        # killall match the process's, the main thread's (src/app/server_process.cc).
        s = self.server(["--threads", "2"])
        s.create_ok("named\n")
        task_dir = f"/proc/{s.proc.pid}/task"
        names = set()
        for tid in os.listdir(task_dir):
            try:
                with open(os.path.join(task_dir, tid, "comm")) as f:
                    names.add(f.read().strip())
            except FileNotFoundError:
                continue  # a thread that ended while listed
        with open(f"/proc/{s.proc.pid}/comm") as f:
            self.assertEqual(f.read().strip(), "sluice")
        for expected in ("loop-1", "commit-meta", "ckpt-meta", "commit-files"):
            self.assertIn(expected, names)

    def test_a_second_process_on_the_same_port_and_data_dir_is_refused(self):
        first = self.server()
        paste = first.create_ok("still here\n")["id"]
        second = self.second_start(first, f"127.0.0.1:{first.port}", first.data_dir)
        self.assertNotEqual(second.returncode, 0, second.stdout + second.stderr)
        said = second.stdout + second.stderr
        self.assertIn("in use by another sluice process", said)
        self.assertIn(f"pid {first.proc.pid}", said)
        self.assertIn("sluice.lock", said)
        self.assertFirstStillServes(first, paste)

    def test_a_second_process_on_the_same_data_dir_and_another_port_is_refused(self):
        first = self.server()
        paste = first.create_ok("still here\n")["id"]
        second = self.second_start(first, "127.0.0.1:0", first.data_dir)
        self.assertNotEqual(second.returncode, 0)
        self.assertIn("in use by another sluice process", second.stdout + second.stderr)
        self.assertFirstStillServes(first, paste)

    def test_joining_a_port_another_process_listens_on_is_refused(self):
        first = self.server()
        paste = first.create_ok("still here\n")["id"]
        other_dir = os.path.join(first.root, "other-data")
        second = self.second_start(first, f"127.0.0.1:{first.port}", other_dir)
        self.assertNotEqual(second.returncode, 0)
        said = second.stdout + second.stderr
        self.assertIn(f"127.0.0.1:{first.port}", said)
        self.assertIn("already listening", said)
        self.assertFirstStillServes(first, paste)

    def test_a_port_held_by_any_other_program_is_refused_too(self):
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as another sluice would
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        self.addCleanup(holder.close)
        port = holder.getsockname()[1]
        server = self.server(start=False, port=port)
        result = run_sluice(["serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
                             server.data_dir], timeout=30)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("already listening", result.stdout + result.stderr)

    def test_the_lock_goes_with_the_process_even_after_kill_9(self):
        # Patient: the read after the restart checks the lock, not the speed of a cold process on
        # a busy machine (a 20 ms metadata read once timed out in CI beside the sanitizer builds).
        first = self.server()
        paste = first.create_ok("still here\n")["id"]
        first.kill()
        first.start()
        self.assertEqual(first.get(f"/raw/{paste}").text, "still here\n")


if __name__ == "__main__":
    unittest.main()
