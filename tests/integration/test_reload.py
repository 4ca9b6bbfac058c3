"""Reload on SIGHUP (issue 15, item 2; docs/operations.md, "Reload"): the config file is read again and the
live settings apply to new requests without dropping a connection; settings that cannot change
while running are named in one warning and kept; an invalid file changes nothing; each reload is
counted in sluice_config_reloads_total{result}."""

import http.client
import os
import signal
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from promtext import metric
from sluice_harness import SluiceTestCase, SluiceServer, wait_until

CREATE = "/api/v1/pastes"

# Everything but the per-client create limits out of the way: every test client is 127.0.0.1.
BASE = {
    "listen": '"127.0.0.1:0"',
    "global_create_rate": "100000", "global_create_burst": "100000",
    "global_create_bytes_rate": "1e12", "global_create_bytes_burst": "1e12",
    "ip_create_bytes_rate": "1e12", "ip_create_bytes_burst": "1e12",
    "create_slots_per_client": "1000", "max_connections_per_client": "100000",
    "ip_read_rate": "100000", "ip_read_burst": "100000",
}


class ConfiguredServer(SluiceServer):
    """A server whose listen address comes from its config file, so a reload can try to change
    it (the harness passes --listen, and a flag would win over the file)."""

    def command(self):
        cmd = super().command()
        i = cmd.index("--listen")
        return cmd[:i] + cmd[i + 2:]


class ReloadTest(SluiceTestCase):
    def start(self, patient=True, **settings):
        # patient: the harness's generous store timeouts, as flags (which win over the file).
        server = ConfiguredServer(args=[], production_limits=True, patient=patient)
        self._servers.append(server)
        self.addCleanup(self._finish_server, server)
        self.config = os.path.join(server.root, "sluice.toml")
        self.write(**settings)
        server.args += ["--config", self.config]
        return server.start()

    def write(self, **settings):
        values = dict(BASE)
        values.update({k: str(v) for k, v in settings.items()})
        # Written whole and renamed, as an editor or a config manager does.
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join(f"{k} = {v}\n" for k, v in values.items()))
        os.replace(tmp, self.config)

    def reloads(self, s, result):
        return metric(s.metrics(), "sluice_config_reloads_total", result=result) or 0

    def hup_and_wait(self, s, result):
        before = self.reloads(s, result)
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.reloads(s, result) == before + 1, timeout=5,
                   message=f"a reload counted as {result}")

    def create_bucket(self, s):
        res = s.get("/api/v1/limits")
        self.assertStatus(res, 200)
        return res.json()["buckets"]["ip_create_count"]

    def test_a_new_rate_applies_under_load_without_a_reset_or_a_5xx(self):
        s = self.start(ip_create_rate=2, ip_create_burst=4)
        self.assertEqual(self.create_bucket(s)["rate_per_second"], 2)

        # Open loop: a create every 50 ms whatever the answers, from a pool of kept-alive
        # connections (a 429 closes its connection; http.client then opens a new one).
        results = []  # (time sent, status or exception name)
        lock = threading.Lock()
        local = threading.local()
        stop = threading.Event()
        opened = []

        def one(sent):
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
                with lock:
                    opened.append(conn)
            try:
                conn.request("POST", CREATE, body=b"reload under load\n",
                             headers={"Content-Type": "text/plain"})
                res = conn.getresponse()
                res.read()
                if res.getheader("Connection", "").lower() == "close":
                    conn.close()
                outcome = res.status
            except Exception as e:  # a reset, a refused connection, a timeout
                conn.close()
                local.conn = None
                outcome = type(e).__name__
            with lock:
                results.append((sent, outcome))

        pool = ThreadPoolExecutor(max_workers=8)

        def schedule():
            start = time.monotonic()
            n = 0
            while not stop.is_set():
                n += 1
                pool.submit(one, time.monotonic())
                pause = start + n * 0.05 - time.monotonic()
                if pause > 0:
                    time.sleep(pause)

        sender = threading.Thread(target=schedule)
        sender.start()
        try:
            time.sleep(1.5)
            self.write(ip_create_rate=100, ip_create_burst=100)
            hup_at = time.monotonic()
            s.proc.send_signal(signal.SIGHUP)
            seen = None
            while time.monotonic() < hup_at + 1.0:
                seen = self.create_bucket(s)
                if seen["rate_per_second"] == 100:
                    break
                time.sleep(0.02)
            self.assertEqual(seen["rate_per_second"], 100, "the new rate within a second")
            self.assertEqual(seen["burst"], 100)
            time.sleep(2.0)
        finally:
            stop.set()
            sender.join()
            pool.shutdown(wait=True)
            for conn in opened:
                conn.close()

        outcomes = [o for _, o in results]
        self.assertTrue(all(o in (201, 429) for o in outcomes),
                        f"only 201 and 429 (no reset, no 5xx): {sorted(set(map(str, outcomes)))}")
        before = [o for t, o in results if t < hup_at]
        settled = [o for t, o in results if t > hup_at + 1.0]
        self.assertIn(429, before, "the old limit of 2/s was in force under 20/s")
        self.assertGreater(len(settled), 10)
        self.assertNotIn(429, settled, "20/s is under the new limit of 100/s")
        self.assertEqual(self.reloads(s, "ok"), 1)
        self.assertIn("reload: applied ip_create_burst, ip_create_rate", s.log())

    def test_an_invalid_file_changes_nothing_and_says_why(self):
        s = self.start(ip_create_rate=3, ip_create_burst=6)
        for bad in ({"ip_create_rate": -1},  # a value its declaration refuses
                    {"ip_create_rate": 50, "no_such_key": 1},  # a typo must not half-apply
                    {"ip_create_rate": '"fast"'}):  # not a number
            self.write(**bad)
            self.hup_and_wait(s, "invalid")
            bucket = self.create_bucket(s)
            self.assertEqual((bucket["rate_per_second"], bucket["burst"]), (3, 6), bad)
        with open(self.config, "w") as f:
            f.write("ip_create_rate = [[[\n")  # not TOML
        self.hup_and_wait(s, "invalid")
        self.assertEqual(self.create_bucket(s)["rate_per_second"], 3)
        self.assertIn("reload refused, nothing changed", s.log())
        self.assertIn("ip_create_rate", s.log().split("reload refused, nothing changed")[1])
        self.assertEqual(self.reloads(s, "ok"), 0)
        # Fixed, it applies.
        self.write(ip_create_rate=4, ip_create_burst=6)
        self.hup_and_wait(s, "ok")
        self.assertEqual(self.create_bucket(s)["rate_per_second"], 4)

    def test_a_new_listen_address_is_named_in_one_warning_and_ignored(self):
        s = self.start(ip_create_rate=3, ip_create_burst=6)
        self.write(listen='"127.0.0.1:1"', threads=3, ip_create_rate=7, ip_create_burst=6)
        self.hup_and_wait(s, "partial")
        warnings = [line for line in s.log().splitlines() if "cannot change while running" in line]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("listen", warnings[0])
        self.assertIn("threads", warnings[0])
        self.assertNotIn("ip_create_rate", warnings[0])
        # Still served where it was, with the live change applied.
        self.assertEqual(self.create_bucket(s)["rate_per_second"], 7)
        self.assertEqual(s.create(b"still here\n").status, 201)

    def test_the_service_limits_apply_to_the_next_create(self):
        s = self.start(ip_create_rate=100, ip_create_burst=100)
        self.assertEqual(s.create(b"x" * 200).status, 201)
        self.write(ip_create_rate=100, ip_create_burst=100, max_paste_bytes=100)
        self.hup_and_wait(s, "ok")
        self.assertJsonError(s.create(b"x" * 200), 413)
        self.assertEqual(s.create(b"x" * 100).status, 201)

    def test_flags_keep_precedence_over_the_file_on_reload(self):
        s = self.start(ip_create_rate=3, ip_create_burst=6)
        # The harness's admin flags are flags too: a file that changes admin_listen is overruled.
        self.write(ip_create_rate=3, ip_create_burst=6, admin_listen='"127.0.0.1:1"')
        self.hup_and_wait(s, "ok")
        self.assertNotIn("cannot change while running", s.log())
        self.assertEqual(s.admin_request("GET", "/metrics").status, 200)

    def test_a_lower_put_timeout_answers_503_at_the_new_value(self):
        # Not patient, so the file decides the timeouts; every PUT takes 500 ms.
        slow = dict(fault_injection="true", faults='"blob.put:latency=500ms"',
                    create_budget='"5s"', insert_timeout='"2s"')
        s = self.start(patient=False, put_timeout='"3s"', **slow)
        self.assertEqual(s.create(b"slow but in time\n").status, 201)
        self.write(put_timeout='"100ms"', **slow)
        self.hup_and_wait(s, "ok")
        res = s.create(b"too slow now\n")
        self.assertJsonError(res, 503, "deadline_exceeded")
        self.assertIsNotNone(res.header("Retry-After"))
        # Not patient, so its log is queued (src/app/log_queue.h): the line may trail the answer.
        wait_until(lambda: "reload: applied put_timeout" in s.log(), message="the reload's line")

    def test_the_view_ladder_follows_a_reload(self):
        html = {"Accept": "text/html"}
        # Every render takes 300 ms (render_delay, a test-only brake).
        slow = dict(fault_injection="true", render_delay='"300ms"')

        def rung(text):
            paste = s.create_ok(text)
            res = s.get(f"/{paste['id']}?lang=python", headers=html)
            self.assertStatus(res, 200)
            return res.header("X-Sluice-Rung")

        def highlight_cap():
            return metric(s.metrics(), "sluice_pool_limit", pool="highlight")

        s = self.start(render_timeout='"5s"', highlight_slots=2, **slow)
        self.assertEqual(rung("def f():\n    return 1\n"), "highlighted")
        self.write(render_timeout='"50ms"', highlight_slots=1, **slow)
        self.hup_and_wait(s, "ok")
        self.assertEqual(rung("def g():\n    return 2\n"), "plain; reason=render_timeout")
        self.assertEqual(highlight_cap(), 1)
        # More slots than the workers started: capped there, named, counted as partial.
        self.write(render_timeout='"50ms"', highlight_slots=3, **slow)
        self.hup_and_wait(s, "partial")
        self.assertEqual(highlight_cap(), 2)
        self.assertIn("highlight_slots = 3 is more than the 2 highlighter workers", s.log())


if __name__ == "__main__":
    unittest.main()
