"""The admin listener and moderation (docs/moderation.md): the token,
abuse reports that withhold a paste (451), the operator's dismissal, takedown and blocks.

One server serves every test of a class; each test reports from its own X-Forwarded-For addresses
(the loopback balancer is trusted), in networks of its own (reports count once per IPv4 /24), so
the per-client report limit and the one-report-per-network rule never cross tests.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_admin
"""

import json
import re
import unittest

import os
import tempfile

from sluice_harness import SluiceTestCase, run_sluice, wait_until


def form_token(s, paste_id, client):
    """What a browser gets from GET /report/ID: the form's cookie and the same value in the form."""
    form = s.get(f"/report/{paste_id}", headers={"Accept": "text/html", "X-Forwarded-For": client})
    cookie = form.header("Set-Cookie")
    match = re.search(r'name="token" value="([^"]+)"', form.text)
    assert cookie and match, (form.status, cookie)
    return cookie.split(";")[0], match.group(1)


def report(s, paste_id, client, reason="spam", note=""):
    body = json.dumps({"reason": reason, "note": note})
    return s.request("POST", f"/api/v1/pastes/{paste_id}/report", body=body,
                     headers={"Content-Type": "application/json", "X-Forwarded-For": client})


class ModerationTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server(["--trusted-proxy", "127.0.0.1", "--report-hide-threshold",
                                        "3", "--report-burst", "3", "--report-rate", "0.001"])

    def create(self, text, client="192.0.2.250"):
        res = self.s.request("POST", "/api/v1/pastes", body=text,
                             headers={"X-Forwarded-For": client})
        self.assertStatus(res, 201)
        return res.json()["id"]

    def admin(self, method, path, doc=None, **kw):
        return self.s.admin_request(method, path, body=None if doc is None else json.dumps(doc),
                                    **kw)

    def assertWithheld(self, paste_id, reason):
        self.assertJsonError(self.s.get(f"/raw/{paste_id}"), 451, reason)
        self.assertJsonError(self.s.get(f"/api/v1/pastes/{paste_id}"), 451, reason)
        self.assertJsonError(self.s.get(f"/{paste_id}"), 451, reason)
        self.assertJsonError(self.s.get(f"/{paste_id}.py"), 451, reason)
        page = self.s.get(f"/{paste_id}", headers={"Accept": "text/html"})
        self.assertStatus(page, 451)
        self.assertIn("text/html", page.header("Content-Type"))
        self.assertIn(reason, page.text)

    # ---- the admin listener ----------------------------------------------------------------

    def test_token_missing_or_wrong_is_401(self):
        self.assertJsonError(self.s.admin_request("GET", "/admin/reports", token=None), 401,
                             "admin_token")
        self.assertJsonError(self.s.admin_request("GET", "/admin/reports", token="wrong"), 401,
                             "admin_token")
        # Same length as the right one, last byte wrong.
        near = self.s.admin_token[:-1] + "X"
        self.assertJsonError(self.s.admin_request("GET", "/admin/reports", token=near), 401)
        self.assertStatus(self.s.admin_request("GET", "/admin/reports"), 200)

    def test_admin_paths_are_404_on_the_public_port(self):
        for path in ("/debug/faults", "/admin/reports", "/admin/audit"):
            self.assertJsonError(self.s.get(path), 404)
        self.assertJsonError(self.s.request("POST", "/admin/blocks", body="{}"), 404)
        self.assertStatus(self.s.get("/metrics"), 200)  # metrics_on_public defaults to true
        self.assertStatus(self.s.admin_request("GET", "/metrics"), 200)

    # ---- reports, withholding, dismissal ---------------------------------------------------

    def test_three_networks_withhold_then_dismiss_serves_again(self):
        paste_id = self.create("reported text")
        self.assertStatus(self.s.get(f"/raw/{paste_id}"), 200)  # now in the process cache
        first = report(self.s, paste_id, "198.51.101.1", "spam", "ads")
        self.assertStatus(first, 202)
        self.assertEqual(first.json()["counted"], True)
        again = report(self.s, paste_id, "198.51.101.2", "malware")  # same /24, another key
        self.assertStatus(again, 200)
        self.assertEqual(again.json()["counted"], False)
        self.assertStatus(report(self.s, paste_id, "198.51.102.1", "malware"), 202)
        self.assertStatus(self.s.get(f"/raw/{paste_id}"), 200)  # two networks: still served
        third = report(self.s, paste_id, "198.51.103.1", "spam")
        self.assertStatus(third, 202)
        self.assertEqual(third.json()["under_review"], True)
        self.assertWithheld(paste_id, "under_review")

        queue = self.admin("GET", "/admin/reports").json()["pastes"]
        mine = [p for p in queue if p["id"] == paste_id]
        self.assertEqual(len(mine), 1, queue)
        self.assertEqual(mine[0]["reports"], 3)
        self.assertEqual(mine[0]["networks"], 3)
        self.assertEqual(mine[0]["votes"], 3)
        self.assertEqual(mine[0]["reasons"], ["malware", "spam"])
        self.assertEqual(mine[0]["moderation"], "withheld")
        shown = self.admin("GET", f"/admin/pastes/{paste_id}").json()
        self.assertEqual(shown["content"], "reported text")

        self.assertStatus(self.admin("POST", f"/admin/pastes/{paste_id}/dismiss", {}), 200)
        res = self.s.get(f"/raw/{paste_id}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, b"reported text")
        queue = self.admin("GET", "/admin/reports").json()["pastes"]
        self.assertNotIn(paste_id, [p["id"] for p in queue])
        actions = [(a["action"], a["target"]) for a in self.admin("GET", "/admin/audit").json()["audit"]]
        self.assertIn(("withhold", paste_id), actions)
        self.assertIn(("dismiss", paste_id), actions)

    def test_report_form_from_the_paste_page(self):
        paste_id = self.create("form text")
        page = self.s.get(f"/{paste_id}", headers={"Accept": "text/html"})
        self.assertIn(f'href="/report/{paste_id}"', page.text)
        form = self.s.get(f"/report/{paste_id}", headers={"Accept": "text/html"})
        self.assertStatus(form, 200)
        self.assertIn('name="reason"', form.text)
        # A browser that says neither Sec-Fetch-Site nor Origin: the form's token decides.
        cookie, token = form_token(self.s, paste_id, "198.51.110.40")
        sent = self.s.request("POST", f"/report/{paste_id}",
                              body=f"reason=illegal&note=see+here&token={token}",
                              headers={"Content-Type": "application/x-www-form-urlencoded",
                                       "Accept": "text/html", "Cookie": cookie,
                                       "X-Forwarded-For": "198.51.110.40"})
        self.assertStatus(sent, 200)
        queue = self.admin("GET", "/admin/reports").json()["pastes"]
        mine = [p for p in queue if p["id"] == paste_id]
        self.assertEqual(mine[0]["reasons"], ["illegal"], queue)
        self.assertEqual(mine[0]["latest_note"], "see here")

    def test_bad_reports_are_400_and_404(self):
        paste_id = self.create("x")
        self.assertJsonError(report(self.s, paste_id, "198.51.100.50", "boring"), 400, "bad_reason")
        self.assertJsonError(report(self.s, paste_id, "198.51.100.50", "spam", "n" * 1001), 400,
                             "note_too_long")
        self.assertJsonError(report(self.s, "AAAAAAAAAAAA", "198.51.100.50"), 404)
        self.assertJsonError(report(self.s, "not-an-id", "198.51.100.50"), 404)

    def test_report_rate_limit_is_429(self):
        ids = [self.create(f"rate {i}") for i in range(4)]
        for paste_id in ids[:3]:
            self.assertStatus(report(self.s, paste_id, "198.51.100.60"), 202)
        refused = self.assertJsonError(report(self.s, ids[3], "198.51.100.60"), 429, "report_rate")
        self.assertTrue(refused)
        self.assertTrue(report(self.s, ids[3], "198.51.100.60").header("Retry-After"))

    # ---- takedown and blocks ---------------------------------------------------------------

    def test_takedown_is_451_and_the_body_goes(self):
        paste_id = self.create("to be taken down")
        self.assertStatus(self.s.get(f"/raw/{paste_id}"), 200)
        res = self.admin("POST", f"/admin/pastes/{paste_id}/takedown", {"reason": "malware"})
        self.assertStatus(res, 200)
        self.assertWithheld(paste_id, "taken_down")
        wait_until(lambda: self.admin("GET", f"/admin/pastes/{paste_id}").json()["content"] is None,
                   timeout=15, interval=0.2, message="body deleted through the outbox")
        shown = self.admin("GET", f"/admin/pastes/{paste_id}").json()
        self.assertEqual(shown["moderation"], "taken_down")
        self.assertTrue(shown["deleted"])
        self.assertJsonError(self.admin("POST", f"/admin/pastes/{paste_id}/dismiss", {}), 400,
                             "taken_down")
        self.assertWithheld(paste_id, "taken_down")
        self.assertJsonError(self.admin("POST", "/admin/pastes/AAAAAAAAAAAA/takedown", {}), 404)

    def test_block_refuses_creates_not_reads(self):
        paste_id = self.create("readable", client="203.0.113.77")
        res = self.admin("POST", "/admin/blocks",
                         {"prefix": "203.0.113.0/24", "duration": "1h", "reason": "spam run"})
        self.assertStatus(res, 201)
        refused = self.s.request("POST", "/api/v1/pastes", body="more spam",
                                 headers={"X-Forwarded-For": "203.0.113.9"})
        self.assertJsonError(refused, 403, "blocked")
        read = self.s.get(f"/raw/{paste_id}", headers={"X-Forwarded-For": "203.0.113.9"})
        self.assertStatus(read, 200)
        self.create("elsewhere", client="192.0.2.9")
        self.assertJsonError(self.admin("POST", "/admin/blocks", {"prefix": "nonsense"}), 400,
                             "bad_prefix")
        self.assertJsonError(self.admin("POST", "/admin/blocks", {"prefix": "192.0.2.1",
                                                                  "duration": "soon"}),
                             400, "bad_duration")
        actions = [(a["action"], a["target"]) for a in self.admin("GET", "/admin/audit").json()["audit"]]
        self.assertIn(("block", "203.0.113.0/24"), actions)


    # ---- sluice admin ----------------------------------------------------------------------

    def test_sluice_admin_cli(self):
        paste_id = self.create("cli text")
        base = ["admin", "--admin", f"http://127.0.0.1:{self.s.admin_port}",
                "--token-file", self.s.admin_token_file]
        res = run_sluice(base + ["show", paste_id])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(json.loads(res.stdout)["content"], "cli text")
        res = run_sluice(base + ["takedown", paste_id, "--reason", "from the cli"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertJsonError(self.s.get(f"/raw/{paste_id}"), 451, "taken_down")
        res = run_sluice(base + ["block", "198.18.0.0/24", "--for", "10m", "--reason", "cli"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(json.loads(res.stdout)["prefix"], "198.18.0.0/24")
        refused = self.s.request("POST", "/api/v1/pastes", body="x",
                                 headers={"X-Forwarded-For": "198.18.0.5"})
        self.assertJsonError(refused, 403, "blocked")
        res = run_sluice(base + ["audit"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("from the cli", res.stdout)
        with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as f:
            f.write("not-the-admin-token-at-all\n")
        self.addCleanup(os.unlink, f.name)
        res = run_sluice(["admin", "--admin", f"http://127.0.0.1:{self.s.admin_port}",
                          "--token-file", f.name, "reports"])
        self.assertEqual(res.returncode, 1, res)
        self.assertIn("401", res.stderr)


class AdminWithoutTokenTest(SluiceTestCase):
    def test_refuses_everything_and_says_so(self):
        s = self.server(["--admin-token-file", "", "--metrics-on-public", "false"])
        self.assertJsonError(s.admin_request("GET", "/metrics"), 401, "admin_token_unset")
        self.assertJsonError(s.admin_request("GET", "/admin/reports", token="anything"), 401,
                             "admin_token_unset")
        self.assertJsonError(s.get("/metrics"), 404)
        self.assertIn("every admin request is refused with 401", s.log())

    def test_admin_listen_empty_turns_it_off(self):
        s = self.server(["--admin-listen", ""])
        self.assertIsNone(s.admin_port)
        self.assertStatus(s.get("/healthz"), 200)


if __name__ == "__main__":
    unittest.main()
