"""The highlighter runs in worker processes: nothing a view asks of it can take the server down.

Each test runs the real binary. The first is the crash that GNU source-highlight's global parser
state caused when threads loaded languages at once (8 concurrent views in 8 languages killed the
process, 3 times out of 3); the second a paste whose highlighting cost grows with the square of its
size; the third a worker killed from outside.
"""

import concurrent.futures
import os
import signal
import time
import unittest

from promtext import metric, parse_metrics
from sluice_harness import SluiceServer, SluiceTestCase

LANGUAGES = ["c", "perl", "javascript", "cpp", "python", "ruby", "go", "rust"]
HTML = {"Accept": "text/html"}
# Quadratic for the library's regex engine: 16,000 parentheses take about 1.4 s of CPU alone.
PATHOLOGICAL = "x = " + "(" * 100_000


def worker_pids(server):
    """The server's child processes: its highlighter workers."""
    pids = []
    for task in os.listdir(f"/proc/{server.proc.pid}/task"):
        with open(f"/proc/{server.proc.pid}/task/{task}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


class HighlightWorkersTest(SluiceTestCase):
    def views(self, server, paths):
        def view(path):
            return server.get(path, headers=HTML, timeout=60)
        with concurrent.futures.ThreadPoolExecutor(len(paths)) as pool:
            return list(pool.map(view, paths))

    def test_concurrent_views_in_many_languages_never_crash_the_server(self):
        # About crashes, not speed: at the default render_timeout a loaded machine under ASan
        # answered every one of 160 views plain (render_timeout), and "some view highlighted"
        # failed with nothing wrong.
        server = self.server(["--render-timeout", "30s"])
        first = server.create_ok("int main(void) { return 0; }")["id"]
        # The reproduction: one paste, 8 languages at the same moment, on a cold server.
        for response in self.views(server, [f"/{first}?lang={lang}" for lang in LANGUAGES]):
            self.assertEqual(response.status, 200, response.body[:200])
        # Then 20 rounds of 8 different pastes in the 8 languages at once.
        ids = [server.create_ok(f"// paste {i}\nint main(void) {{ return {i}; }}\n")["id"]
               for i in range(8)]
        rungs = {}
        for round_number in range(20):
            order = LANGUAGES[round_number % 8:] + LANGUAGES[:round_number % 8]
            paths = [f"/{paste}?lang={lang}" for paste, lang in zip(ids, order)]
            for response in self.views(server, paths):
                self.assertEqual(response.status, 200, response.body[:200])
                rung = response.header("X-Sluice-Rung")
                rungs[rung] = rungs.get(rung, 0) + 1
        self.assertTrue(server.running(), server.log())
        self.assertGreater(rungs.get("highlighted", 0) + rungs.get("cached", 0), 0, rungs)
        self.assertFalse([r for r in rungs if "render_failed" in r], rungs)
        metrics = parse_metrics(server.get("/metrics").text)
        self.assertEqual(metric(metrics, "sluice_highlight_worker_ends_total", cause="failed"), 0)

    def test_a_pathological_paste_frees_its_slots_at_the_deadline_and_shutdown_is_bounded(self):
        render_timeout, drain_timeout = 1.0, 2.0
        server = self.server(args=["--render-timeout", f"{render_timeout:g}s",
                                         "--drain-timeout", f"{drain_timeout:g}s"])
        paste = server.create_ok(PATHOLOGICAL)["id"]
        langs = ["c", "cpp", "javascript", "python"]
        responses = self.views(server, [f"/{paste}?lang={lang}" for lang in langs])
        answered = time.monotonic()
        for response in responses:
            self.assertEqual(response.status, 200)
            self.assertEqual(response.header("X-Sluice-Rung"), "plain; reason=render_timeout")
            self.assertIn("((((", response.text)
        # Every slot back within render_timeout plus a grace, not after minutes of CPU.
        while True:
            metrics = parse_metrics(server.get("/metrics").text)
            if metric(metrics, "sluice_pool_in_use", pool="highlight") == 0:
                break
            self.assertLess(time.monotonic() - answered, render_timeout + 1.0,
                            "highlight slots still held")
            time.sleep(0.05)
        # Read again: one /metrics page is not one instant, and the page that showed the last
        # slot free may have read the end counter (rendered earlier on the page) just before the
        # last render ended. A render counts its end before it frees its slot, so a page read
        # after the slots were seen free shows every end.
        metrics = parse_metrics(server.get("/metrics").text)
        self.assertEqual(metric(metrics, "sluice_highlight_worker_ends_total", cause="deadline"),
                         len(langs))
        # The same views again are shown plain at once, without a slot or a worker.
        again = self.views(server, [f"/{paste}?lang={lang}" for lang in langs])
        self.assertEqual({r.header("X-Sluice-Rung") for r in again}, {"plain; reason=render_timeout"})
        metrics = parse_metrics(server.get("/metrics").text)
        self.assertEqual(metric(metrics, "sluice_highlight_worker_ends_total", cause="deadline"),
                         len(langs))

        # Shutdown with renders in progress: other languages, so the workers are really busy.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            busy = [pool.submit(server.get, f"/{paste}?lang={lang}", headers=HTML, timeout=60)
                    for lang in ["go", "rust", "java", "ruby"]]
            deadline = time.monotonic() + 10
            while metric(parse_metrics(server.get("/metrics").text), "sluice_pool_in_use",
                         pool="highlight") < 1:
                self.assertLess(time.monotonic(), deadline, "no render started")
                time.sleep(0.02)
            workers = worker_pids(server)
            self.assertTrue(workers)
            sent = time.monotonic()
            server.stop(expect_code=0)
            took = time.monotonic() - sent
            for future in busy:
                try:
                    future.result()
                except OSError:
                    pass  # a view cut by the shutdown is fine; a hang is not
        # drain_timeout + 1 s is the bound; 0.5 s more for a loaded test machine to schedule us.
        self.assertLess(took, drain_timeout + 1.5, f"SIGTERM to exit took {took:.2f} s")
        self.assertFalse([pid for pid in workers if alive(pid)], "workers outlived the server")

    def test_a_worker_killed_from_outside_costs_one_view_at_most(self):
        # A patient render timeout: a fresh worker under the sanitizers (make test-asan) takes
        # longer than the default 2 s to load a language, and this test is about the kill.
        server = self.server(args=["--highlight-slots", "1", "--highlight-cache-bytes", "0",
                                   "--render-timeout", "20s"])
        paste = server.create_ok("def f(x):\n    return x\n")["id"]
        first = server.get(f"/{paste}?lang=python", headers=HTML)
        self.assertEqual(first.header("X-Sluice-Rung"), "highlighted")
        [worker] = worker_pids(server)
        # SIGKILL, not SIGSEGV: under ASan (make test-asan) the worker would report the SEGV itself.
        os.kill(worker, signal.SIGKILL)
        rungs = [server.get(f"/{paste}?lang=python", headers=HTML).header("X-Sluice-Rung")
                 for _ in range(3)]
        self.assertEqual(rungs, ["plain; reason=render_failed", "highlighted", "highlighted"])
        self.assertTrue(server.running())
        self.assertNotIn(worker, worker_pids(server))


if __name__ == "__main__":
    unittest.main()
