"""The read-only window of a cutover (docs/scale-out.md, "Outgrowing one box"): while it is open,
every write a copy of the store would miss (creates by every route, forks, deletes, claims of burn
pastes, reports, the operator's moderation) answers 503 with reason read_only, a Retry-After and,
for a browser, a page that says so, and changes nothing; reads go on (200). It is opened and
closed without a restart, by the admin listener (`sluice admin read-only on|off`) and by the
`read_only` setting on SIGHUP; /api/v1/limits and the sluice_read_only gauge show it.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_read_only
"""

import json
import os
import signal
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice, wait_until
from test_api import form_headers, multipart

CLIENT = {"X-Forwarded-For": "198.51.100.7"}


class ReadOnlyWindowTest(SluiceTestCase):
    def start(self, **settings):
        s = self.server(["--trusted-proxy", "127.0.0.1"], start=False)
        self.config = os.path.join(s.root, "sluice.toml")
        self.write(**settings)
        s.args += ["--config", self.config]
        return s.start()

    def write(self, **settings):
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
        os.replace(tmp, self.config)

    def read_only(self, s):
        res = s.get("/api/v1/limits")
        self.assertStatus(res, 200)
        return res.json()["read_only"]

    def gauge(self, s):
        return metric(s.metrics(), "sluice_read_only")

    def admin_cli(self, s, *args):
        return run_sluice(["admin", "--admin", f"http://127.0.0.1:{s.admin_port}",
                           "--token-file", s.admin_token_file, "read-only", *args])

    def hup(self, s, want):
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.read_only(s) == want, timeout=10,
                   message=f"read_only {want} after SIGHUP")

    def assertReadOnly(self, res):
        self.assertJsonError(res, 503, "read_only")
        self.assertTrue(res.header("Retry-After"), res)
        self.assertEqual(res.json()["retry_after"], int(res.header("Retry-After")))

    # ---- what the window refuses, and what it does not ------------------------------------

    def make(self, s):
        """Pastes to write to in the window: a plain one, a burn one, a reported one."""
        plain = s.create_ok("read me in the window")
        burn = s.request("POST", "/api/v1/pastes?burn=1", body="burn me").json()
        return plain, burn

    def every_write(self, s, plain, burn):
        """Each write route once; returns (name, response)."""
        form = multipart([("content", "from the form", None), ("ttl", "1h", None)])
        report = json.dumps({"reason": "spam"})
        json_headers = {"Content-Type": "application/json", **CLIENT}
        return [
            ("create api", s.create("new paste", headers=CLIENT)),
            ("create json", s.request("POST", "/api/v1/pastes",
                                      body=json.dumps({"content": "j"}), headers=json_headers)),
            ("create form", s.request("POST", "/", body=form, headers=form_headers(CLIENT))),
            ("create raw root", s.request("POST", "/", body="curl", headers=CLIENT)),
            ("create haste", s.request("POST", "/documents", body="haste", headers=CLIENT)),
            ("fork", s.request("POST", f"/api/v1/pastes?parent={plain['id']}", body="forked",
                               headers=CLIENT)),
            ("delete api", s.delete(plain["id"], token=plain["delete_token"])),
            ("delete form", s.request("POST", f"/delete/{plain['id']}",
                                      body=f"token={plain['delete_token']}", headers={
                                          "Content-Type": "application/x-www-form-urlencoded"})),
            ("claim api", s.request("POST", f"/api/v1/pastes/{burn['id']}/claim")),
            ("claim form", s.request("POST", f"/claim/{burn['id']}")),
            ("report api", s.request("POST", f"/api/v1/pastes/{plain['id']}/report", body=report,
                                     headers=json_headers)),
            ("admin takedown", s.admin_request("POST", f"/admin/pastes/{plain['id']}/takedown",
                                               body="{}")),
            ("admin dismiss", s.admin_request("POST", f"/admin/pastes/{plain['id']}/dismiss",
                                              body="{}")),
            ("admin block", s.admin_request("POST", "/admin/blocks",
                                            body=json.dumps({"prefix": "203.0.113.0/24"}))),
            ("admin block content", s.admin_request(
                "POST", "/admin/blocked-contents",
                body=json.dumps({"sha256": "ab" * 32}),
                headers={"Content-Type": "application/json"})),
            ("admin unblock content", s.admin_request("DELETE",
                                                      "/admin/blocked-contents/" + "ab" * 32)),
        ]

    def assertReadsServe(self, s, plain, burn):
        for path in (f"/raw/{plain['id']}", f"/api/v1/pastes/{plain['id']}",
                     f"/documents/{plain['id']}", f"/{plain['id']}", "/"):
            with self.subTest(read=path):
                self.assertStatus(s.get(path), 200)
        # A burn paste's page asks before it burns: that GET writes nothing and is served.
        page = s.get(f"/{burn['id']}", headers={"Accept": "text/html"})
        self.assertStatus(page, 200)

    def test_every_write_answers_503_read_only_and_changes_nothing_while_reads_serve(self):
        s = self.start()
        plain, burn = self.make(s)
        self.assertFalse(self.read_only(s))
        self.assertEqual(self.gauge(s), 0)

        done = self.admin_cli(s, "on")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(json.loads(done.stdout)["read_only"])
        self.assertTrue(self.read_only(s))
        self.assertEqual(self.gauge(s), 1)

        for name, res in self.every_write(s, plain, burn):
            with self.subTest(write=name):
                self.assertReadOnly(res)
        self.assertReadsServe(s, plain, burn)
        # Nothing changed: the paste is neither deleted, reported nor taken down, and the burn
        # paste keeps its one view.
        self.assertEqual(s.get(f"/raw/{plain['id']}").text, "read me in the window")
        self.assertEqual(s.query("SELECT COUNT(*) FROM pastes")[0][0], 2)
        self.assertEqual(s.query("SELECT COUNT(*) FROM paste_reports")[0][0], 0)
        self.assertEqual(s.query("SELECT COUNT(*) FROM blocks")[0][0], 0)
        self.assertEqual(s.query("SELECT COUNT(*) FROM blocked_contents")[0][0], 0)
        self.assertEqual(s.query("SELECT views_left, deleted FROM pastes WHERE id = ?",
                                 (burn["id"],)), [(1, 0)])
        refused = metric(s.metrics(), "sluice_read_only_refusals_total")
        self.assertGreaterEqual(refused, 15)

        done = self.admin_cli(s, "off")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertFalse(self.read_only(s))
        self.assertEqual(self.gauge(s), 0)
        self.assertStatus(s.create("after the window", headers=CLIENT), 201)
        claimed = s.request("POST", f"/api/v1/pastes/{burn['id']}/claim")
        self.assertStatus(claimed, 200)
        self.assertStatus(s.delete(plain["id"], token=plain["delete_token"]), 204)

    def test_a_browser_gets_a_page_that_says_the_server_is_read_only(self):
        s = self.start()
        self.assertEqual(self.admin_cli(s, "on").returncode, 0)
        form = multipart([("content", "hello", None), ("ttl", "1h", None)])
        res = s.request("POST", "/", body=form, headers=form_headers({"Accept": "text/html"}))
        self.assertStatus(res, 503)
        self.assertIn("text/html", res.header("Content-Type"))
        self.assertTrue(res.header("Retry-After"))
        self.assertIn("read-only for a few minutes", res.text)
        self.assertIn("a maintenance window", res.text)
        self.assertNotIn("overload", res.text)

    def test_sighup_opens_and_closes_the_window_from_the_setting(self):
        s = self.start(read_only_retry_after="2m")
        self.assertStatus(s.create("before", headers=CLIENT), 201)
        self.write(read_only=True, read_only_retry_after="2m")
        self.hup(s, True)
        res = s.create("in the window", headers=CLIENT)
        self.assertReadOnly(res)
        self.assertEqual(res.header("Retry-After"), "120")
        self.write(read_only=False, read_only_retry_after="2m")
        self.hup(s, False)
        self.assertStatus(s.create("after", headers=CLIENT), 201)

    def test_a_reload_for_another_setting_keeps_the_window_the_admin_opened(self):
        s = self.start()
        self.assertEqual(self.admin_cli(s, "on").returncode, 0)
        before = metric(s.metrics(), "sluice_config_reloads_total", result="ok") or 0
        self.write(log_level="debug")
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: (metric(s.metrics(), "sluice_config_reloads_total", result="ok")
                            or 0) == before + 1, timeout=10, message="the reload")
        self.assertTrue(self.read_only(s))
        self.assertReadOnly(s.create("still in the window", headers=CLIENT))
        status = self.admin_cli(s, "status")
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertTrue(json.loads(status.stdout)["read_only"])

    def test_the_admin_route_refuses_a_body_that_does_not_say_on_or_off(self):
        s = self.start()
        for body in ("{}", '{"read_only": "yes"}', "[]", '{"other": true}'):
            with self.subTest(body=body):
                self.assertJsonError(s.admin_request("PUT", "/admin/read-only", body=body), 400,
                                     "bad_json")
        self.assertFalse(self.read_only(s))
        self.assertJsonError(s.request("PUT", "/admin/read-only", body='{"read_only": true}'),
                             404)
        self.assertEqual(self.admin_cli(s, "sideways").returncode != 0, True)


if __name__ == "__main__":
    unittest.main()
