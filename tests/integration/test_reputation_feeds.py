"""Reputation feeds (issue 46, item 4; docs/admission.md, "Reputation feeds"): netset files
(FireHOL's and Spamhaus DROP's formats, IPv4 and IPv6) and, per feed, what a create from a network
it lists gets, on every create route: `refuse` (403 feed_refused naming the feed, never the range),
`class:NAME` (budgets of the class's own, apart from everyone else's) and `challenge` (for now the
class "challenge"); reads never consult the feeds; hits and entries counted; the files read again
on SIGHUP off the event loops, under load without a failed request, a broken file keeping its
feed's networks; a feed that cannot be read at start refuses the start.

Every test client is 127.0.0.1: a server that trusts it as its proxy takes the client address from
X-Forwarded-For, which is how these tests come from a listed network or not.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_reputation_feeds
"""

import os
import shutil
import signal
import tempfile
import threading

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice, wait_until
from test_create_access import CREATED, ROUTES, create_on

FIREHOL = "# firehol_level1 (excerpt)\n#\n192.0.2.0/24\n198.51.100.7\n2001:db8:bad::/48\n"
DROP = "; Spamhaus DROP List\n203.0.113.0/24 ; SBL000001\n2001:db8:dc::/48 ; SBL000002\n"

LISTED_V4 = {"X-Forwarded-For": "192.0.2.10"}
LISTED_V6 = {"X-Forwarded-For": "2001:db8:bad:1::5"}
LISTED_ONE = {"X-Forwarded-For": "198.51.100.7"}
UNLISTED = {"X-Forwarded-For": "198.51.100.8"}
CLOUD_V4 = {"X-Forwarded-For": "203.0.113.5"}
CLOUD_V6 = {"X-Forwarded-For": "2001:db8:dc:7::1"}


class ReputationFeedsTest(SluiceTestCase):
    def start(self, feeds, *extra):
        """A server whose feeds are `feeds` = {name: (action, text)}, each written to a file."""
        s0 = self.server([], start=False)
        entries = []
        for name, (action, text) in feeds.items():
            path = os.path.join(s0.root, f"{name}.netset")
            with open(path, "w") as f:
                f.write(text)
            entries.append(f"{name}={action}:{path}")
        s0.args += ["--trusted-proxy", "127.0.0.1/32", "--forward-auth-header", "X-Forwarded-User",
                    "--feeds", ",".join(entries), *extra]
        return s0.start()

    def hits(self, s, feed, action):
        return metric(s.metrics(), "sluice_feed_hits_total", feed=feed, action=action) or 0

    def test_a_refuse_feed_refuses_every_create_route_and_no_read(self):
        s = self.start({"firehol": ("refuse", FIREHOL)})
        parent = s.create_ok(b"the parent\n", headers=UNLISTED)["id"]
        for route in ROUTES:
            for who in (LISTED_V4, LISTED_V6, LISTED_ONE):
                with self.subTest(route=route, who=who):
                    doc = self.assertJsonError(create_on(s, route, who, parent=parent), 403,
                                               "feed_refused")
                    self.assertIn("'firehol'", doc["error"])
                    # The feed is named; the range that matched never is.
                    self.assertNotIn("192.0.2", doc["error"])
                    self.assertNotIn("2001:db8", doc["error"])
            with self.subTest(route=route, who="unlisted"):
                self.assertStatus(create_on(s, route, UNLISTED, parent=parent), CREATED[route])
        self.assertEqual(self.hits(s, "firehol", "refuse"), 3 * len(ROUTES))
        # Reads never consult the feeds.
        for who in (LISTED_V4, LISTED_V6):
            self.assertStatus(s.get(f"/raw/{parent}", headers=who), 200)
            self.assertStatus(s.get(f"/api/v1/pastes/{parent}", headers=who), 200)
        self.assertEqual(self.hits(s, "firehol", "refuse"), 3 * len(ROUTES))
        self.assertEqual(metric(s.metrics(), "sluice_feed_entries", feed="firehol"), 3)
        # A creator the operator's proxy named is judged as a person, not by its network.
        self.assertStatus(s.create(b"x", headers={**LISTED_V4, "X-Forwarded-User": "ci"}), 201)

    def test_the_operators_text_names_the_feed(self):
        s = self.start({"drop": ("refuse", DROP)},
                       "--feed-refuse-text", "Listed in {feed}: write to abuse@example.org")
        doc = self.assertJsonError(s.create(b"x", headers=CLOUD_V4), 403, "feed_refused")
        self.assertEqual(doc["error"], "Listed in drop: write to abuse@example.org")

    def test_a_refused_browser_reads_a_page_with_the_feeds_text(self):
        s = self.start({"drop": ("refuse", DROP)}, "--feed-refuse-text", "Listed in <{feed}>")
        res = create_on(s, "form", CLOUD_V4, accept="text/html,application/xhtml+xml")
        self.assertStatus(res, 403)
        self.assertTrue(res.header("Content-Type").startswith("text/html"))
        self.assertIn("New pastes are not taken from this network", res.text)
        self.assertIn('<p id="access">Listed in &lt;drop&gt;</p>', res.text)

    def test_a_class_has_a_budget_of_its_own_on_every_route(self):
        # The class takes one create per route in all, then refuses every route; the unlisted
        # keep their own budgets. Nothing refills during the test.
        n = len(ROUTES)
        s = self.start({"cloud": ("class:datacenter", DROP)},
                       "--feed-class-ip-create-rate", "0.0001",
                       "--feed-class-ip-create-burst", "1000",
                       "--feed-class-global-create-rate", "0.0001",
                       "--feed-class-global-create-burst", str(n))
        parent = s.create_ok(b"the parent\n", headers=UNLISTED)["id"]
        for i, route in enumerate(ROUTES):
            who = CLOUD_V4 if i % 2 == 0 else CLOUD_V6
            with self.subTest(route=route):
                self.assertStatus(create_on(s, route, who, parent=parent), CREATED[route])
        for route in ROUTES:
            with self.subTest(route=route, spent=True):
                res = create_on(s, route, CLOUD_V4, parent=parent)
                doc = self.assertJsonError(res, 429, "feed_class")
                self.assertIn("datacenter", doc["error"])
                self.assertTrue(res.header("Retry-After"))
                self.assertStatus(create_on(s, route, UNLISTED, parent=parent), CREATED[route])
        self.assertEqual(self.hits(s, "cloud", "class:datacenter"), 2 * n)

    def test_a_class_key_has_a_lower_rate_than_its_own_budget(self):
        s = self.start({"cloud": ("class:datacenter", DROP)},
                       "--feed-class-ip-create-rate", "0.0001",
                       "--feed-class-ip-create-burst", "2")
        for _ in range(2):
            self.assertStatus(s.create(b"x", headers=CLOUD_V4), 201)
        self.assertJsonError(s.create(b"x", headers=CLOUD_V4), 429, "feed_class_key")
        # Another key of the class has its own bucket.
        self.assertStatus(s.create(b"x", headers={"X-Forwarded-For": "203.0.113.6"}), 201)

    def test_challenge_is_for_now_the_class_challenge(self):
        s = self.start({"tor": ("challenge", FIREHOL)},
                       "--feed-class-ip-create-rate", "0.0001",
                       "--feed-class-ip-create-burst", "1")
        self.assertStatus(s.create(b"x", headers=LISTED_V4), 201)
        doc = self.assertJsonError(s.create(b"x", headers=LISTED_V4), 429, "feed_class_key")
        self.assertIn("'challenge'", doc["error"])
        self.assertEqual(self.hits(s, "tor", "challenge"), 2)

    def test_a_feed_that_cannot_be_read_refuses_the_start(self):
        data = tempfile.mkdtemp(prefix="sluice-feeds-")
        self.addCleanup(shutil.rmtree, data, True)
        res = run_sluice(["serve", "--listen", "127.0.0.1:0", "--data-dir", data,
                          "--feeds", "drop=refuse:/nonexistent/drop.txt"])
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("feeds: drop: cannot read /nonexistent/drop.txt", res.stdout + res.stderr)
        res = run_sluice(["serve", "--feeds", "drop=block:/x"])
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("the action must be refuse, class:CLASS or challenge",
                      res.stdout + res.stderr)

    def test_sighup_reloads_the_feeds_under_load_and_a_broken_file_keeps_the_old_networks(self):
        s = self.start({"drop": ("refuse", DROP)})
        path = os.path.join(s.root, "drop.netset")
        parent = s.create_ok(b"read me\n", headers=UNLISTED)["id"]
        self.assertStatus(s.create(b"x", headers=LISTED_V4), 201)

        # Creates and reads from an unlisted network, back to back, through the reloads.
        statuses, stop = [], threading.Event()

        def loop():
            while not stop.is_set():
                for call in (lambda: s.create(b"in flight\n", headers=UNLISTED),
                             lambda: s.get(f"/raw/{parent}", headers=UNLISTED)):
                    try:
                        statuses.append(call().status)
                    except Exception as e:  # noqa: BLE001 - a dropped request is the failure
                        statuses.append(type(e).__name__)

        def loads(result):
            return metric(s.metrics(), "sluice_feed_loads_total", result=result) or 0

        worker = threading.Thread(target=loop)
        worker.start()
        try:
            wait_until(lambda: len(statuses) >= 10, message="requests before the reload")
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(DROP + "192.0.2.0/24 ; SBL000003\n")
            os.replace(tmp, path)
            s.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: loads("ok") == 1, message="the feeds reloaded")
            self.assertJsonError(s.create(b"x", headers=LISTED_V4), 403, "feed_refused")
            self.assertEqual(metric(s.metrics(), "sluice_feed_entries", feed="drop"), 3)

            # A broken file: the reload of the settings is fine, the feed keeps its networks.
            with open(path, "w") as f:
                f.write("203.0.113.0/24\nnot a network\n")
            s.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: loads("partial") == 1, message="the broken feed counted")
            count = len(statuses)
            wait_until(lambda: len(statuses) >= count + 10, message="requests after the reloads")
        finally:
            stop.set()
            worker.join()
        self.assertEqual(set(statuses), {200, 201}, statuses)
        self.assertJsonError(s.create(b"x", headers=LISTED_V4), 403, "feed_refused")
        self.assertEqual(metric(s.metrics(), "sluice_feed_load_errors_total", feed="drop"), 1)
        self.assertEqual(metric(s.metrics(), "sluice_config_reloads_total", result="ok"), 2)
        self.assertIn("feed drop:", s.log())
        self.assertIn("line 2", s.log())


if __name__ == "__main__":
    import unittest
    unittest.main()
