"""The review page on the admin listener (docs/moderation.md, "The review page"), against the real
binary: a sign-in with the admin token sets a session cookie that is not the token; a wrong token
and a forged cookie are refused; sign-ins are rate-limited without locking out forward-auth; a
forged POST (no or a wrong CSRF token, a foreign Origin, a cross-site fetch, no session) is
refused 403 and changes nothing; a forward-auth name is honoured from trusted_proxy only; each
action (take down, dismiss, keep, restore) works and is audited; a paste is shown as plain text,
a large one cut, an encrypted one as opaque; the JSON admin API keeps its bearer token.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_review_page
"""

import http.client
import json
import os
import re
import unittest
import urllib.parse

from sluice_harness import ADMIN_TOKEN, SluiceTestCase

HERE = os.path.dirname(os.path.realpath(__file__))
VECTORS = os.path.join(HERE, "..", "vectors", "envelope_v1.json")
BROWSER = {"Accept": "text/html"}
CSRF = re.compile(rb'name="csrf" value="([0-9a-f]{64})"')


class Page:
    """One browser's view of the review page: its cookie, sent back as a browser would."""

    def __init__(self, server, headers=None):
        self.s = server
        self.cookie = None
        self.headers = dict(headers or {})
        self.origin = f"http://127.0.0.1:{server.admin_port}"

    def request(self, method, path, form=None, headers=None):
        pairs = dict(BROWSER)
        pairs.update(self.headers)
        if self.cookie:
            pairs["Cookie"] = self.cookie
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            pairs["Content-Type"] = "application/x-www-form-urlencoded"
            pairs.setdefault("Origin", self.origin)
            pairs.setdefault("Sec-Fetch-Site", "same-origin")
        pairs.update(headers or {})
        pairs = {k: v for k, v in pairs.items() if v is not None}
        return self.s.admin_request(method, path, body=body, headers=pairs, token=None)

    def login(self, token=ADMIN_TOKEN, headers=None):
        res = self.request("POST", "/admin/login", {"token": token}, headers)
        set_cookie = res.header("Set-Cookie")
        if res.status == 303 and set_cookie:
            self.cookie = set_cookie.split(";")[0]
        return res

    def csrf(self, path="/admin/review"):
        page = self.request("GET", path)
        assert page.status == 200, page
        return CSRF.search(page.body).group(1).decode()


def report(s, paste_id, client):
    res = s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                    body=json.dumps({"reason": "spam", "note": "ads"}),
                    headers={"Content-Type": "application/json", "X-Forwarded-For": client})
    assert res.status == 202, res


def audit_actions(s, paste_id):
    rows = s.admin_request("GET", "/admin/audit").json()["audit"]
    return [r["action"] for r in rows if r["target"] == paste_id]


class ReviewPageTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        # The reporters' addresses come through X-Forwarded-For from the test itself.
        self.s = self.server(["--trusted-proxy", "127.0.0.1", "--report-hide-threshold", "1"])

    def reported(self, text="buy cheap watches", client="198.51.100.7"):
        paste_id = self.s.create_ok(text)["id"]
        report(self.s, paste_id, client)
        return paste_id

    def test_sign_in_sets_a_session_cookie_that_is_not_the_token(self):
        paste_id = self.reported()
        page = Page(self.s)
        res = page.request("GET", "/admin/review")
        self.assertStatus(res, 303)
        self.assertEqual(res.header("Location"), "/admin/login")
        res = page.login()
        self.assertStatus(res, 303)
        self.assertEqual(res.header("Location"), "/admin/review")
        cookie = res.header("Set-Cookie")
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/admin"):
            self.assertIn(attribute, cookie)
        self.assertNotIn("Secure", cookie, "plain http: a Secure cookie would never come back")
        self.assertNotIn(ADMIN_TOKEN, cookie)
        queue = page.request("GET", "/admin/review")
        self.assertStatus(queue, 200)
        self.assertIn(f'href="/admin/review/{paste_id}"'.encode(), queue.body)
        self.assertRegex(queue.body.decode(), r'class="clock">\d+ seconds?')
        self.assertIn(b"withheld (451)", queue.body)
        # Behind a TLS proxy the form was on https: the cookie is then Secure.
        res = Page(self.s).login(headers={"Origin": "https://review.example",
                                          "Sec-Fetch-Site": None})
        self.assertStatus(res, 403)  # not this server's origin
        res = Page(self.s).login(headers={"Origin": f"https://127.0.0.1:{self.s.admin_port}",
                                          "Sec-Fetch-Site": None})
        self.assertIn("; Secure", res.header("Set-Cookie"))

    def test_a_wrong_token_and_a_forged_cookie_are_refused(self):
        page = Page(self.s)
        res = page.login("not-the-admin-token-at-all")
        self.assertStatus(res, 401)
        self.assertIsNone(res.header("Set-Cookie"))
        self.assertIn(b"Wrong admin token", res.body)
        self.assertStatus(page.login(), 303)
        expiry, sid, mac = page.cookie.split("=", 1)[1].split(".")
        for forged in (f"{int(expiry) + 86400}.{sid}.{mac}", f"{expiry}.{sid}.{'0' * 64}",
                       ADMIN_TOKEN, ""):
            page.cookie = "sluice_review=" + forged
            res = page.request("GET", "/admin/review")
            self.assertStatus(res, 303)
            self.assertEqual(res.header("Location"), "/admin/login")

    def test_the_session_does_not_open_the_json_api(self):
        page = Page(self.s)
        page.login()
        self.assertJsonError(page.request("GET", "/admin/reports", headers={"Accept": "*/*"}),
                             401, "admin_token")

    def test_the_public_listener_has_no_review_page(self):
        for path in ("/admin/review", "/admin/login"):
            self.assertStatus(self.s.get(path), 404)

    def test_forged_posts_are_refused_and_change_nothing(self):
        paste_id = self.reported()
        page = Page(self.s)
        page.login()
        token = page.csrf()
        path = f"/admin/review/{paste_id}"
        forged = [
            ("no token", {"action": "takedown"}, {}),
            ("a wrong token", {"action": "takedown", "csrf": "0" * 64}, {}),
            ("a foreign origin", {"action": "takedown", "csrf": token},
             {"Origin": "https://evil.example", "Sec-Fetch-Site": None}),
            ("a cross-site fetch", {"action": "takedown", "csrf": token},
             {"Sec-Fetch-Site": "cross-site"}),
        ]
        for name, form, headers in forged:
            with self.subTest(name):
                res = page.request("POST", path, form, headers)
                self.assertStatus(res, 403)
                self.assertIn(b"<html", res.body, "a browser gets a page")
        # No session: a cross-site form carries no SameSite=Strict cookie.
        res = Page(self.s).request("POST", path, {"action": "takedown", "csrf": token})
        self.assertStatus(res, 403)
        # Another session's token is not this one's.
        other = Page(self.s)
        other.login()
        self.assertStatus(other.request("POST", path, {"action": "dismiss", "csrf": token}), 403)
        self.assertEqual(audit_actions(self.s, paste_id), ["withhold"])
        self.assertEqual(self.s.get(f"/raw/{paste_id}").status, 451)
        shown = self.s.admin_request("GET", f"/admin/pastes/{paste_id}").json()
        self.assertEqual(shown["moderation"], "withheld")

    def test_each_action_works_and_is_audited(self):
        page = Page(self.s)
        page.login()
        down, dismissed, kept = self.reported("one"), self.reported("two"), self.reported("three")
        for paste_id, action in ((down, "takedown"), (dismissed, "dismiss"), (kept, "keep")):
            token = page.csrf(f"/admin/review/{paste_id}")
            res = page.request("POST", f"/admin/review/{paste_id}",
                               {"action": action, "csrf": token, "reason": f"{action} it"})
            self.assertStatus(res, 303)
            self.assertEqual(res.header("Location"),
                             f"/admin/review?done={action}&id={paste_id}")
        self.assertEqual(self.s.get(f"/raw/{down}").status, 451)
        self.assertEqual(self.s.get(f"/raw/{dismissed}").status, 200)
        self.assertEqual(self.s.get(f"/raw/{kept}").status, 200)
        self.assertEqual(audit_actions(self.s, down), ["takedown", "withhold"])
        self.assertEqual(audit_actions(self.s, dismissed), ["dismiss", "withhold"])
        self.assertEqual(audit_actions(self.s, kept), ["dismiss", "withhold"])
        rows = self.s.admin_request("GET", "/admin/audit").json()["audit"]
        self.assertIn("takedown it", [r["detail"] for r in rows if r["target"] == down][0])
        # keep: a later report queues the paste and never withholds it again.
        report(self.s, kept, "203.0.113.9")
        self.assertEqual(self.s.get(f"/raw/{kept}").status, 200)
        queue = self.s.admin_request("GET", "/admin/reports").json()["pastes"]
        self.assertEqual([(p["id"], p["keep"]) for p in queue], [(kept, True)])
        # restore: a withheld paste served again.
        restored = self.reported("four")
        self.assertEqual(self.s.get(f"/raw/{restored}").status, 451)
        token = page.csrf(f"/admin/review/{restored}")
        res = page.request("POST", f"/admin/review/{restored}",
                           {"action": "restore", "csrf": token})
        self.assertStatus(res, 303)
        self.assertEqual(self.s.get(f"/raw/{restored}").status, 200)
        self.assertEqual(audit_actions(self.s, restored), ["dismiss", "withhold"])
        self.assertIn("audit: review page: restore of " + restored, self.s.log())
        # Nonsense is a 400, not an action.
        token = page.csrf()
        res = page.request("POST", f"/admin/review/{restored}", {"action": "burn", "csrf": token})
        self.assertStatus(res, 400)
        # The page's own sign-out ends the cookie.
        res = page.request("POST", "/admin/logout", {"csrf": token})
        self.assertStatus(res, 303)
        self.assertIn("Max-Age=0", res.header("Set-Cookie"))

    def test_a_notices_pastes_lead_the_first_page_and_a_restore_closes_the_notice(self):
        noticed = self.s.create_ok("a phishing kit")["id"]
        reported = self.reported()
        body = {"sender": "abuse@hoster.example", "reference": "CASE-7", "category": "phishing",
                "pastes": [noticed]}
        res = self.s.admin_request("POST", "/admin/notices", body=json.dumps(body),
                                   headers={"Content-Type": "application/json"})
        self.assertStatus(res, 201)
        page = Page(self.s)
        page.login()
        html = page.request("GET", "/admin/review").text
        # The notice's row first, then the reported paste's.
        self.assertLess(html.index(f'id="row-{noticed}"'), html.index(f'id="row-{reported}"'))
        row = html[html.index(f'id="row-{noticed}"'):]
        row = row[:row.index("</tr>")]
        self.assertIn("<td>notice</td>", row)
        self.assertIn("CASE-7 from abuse@hoster.example (phishing)", row)
        self.assertIn("withheld by a notice (451)", row)
        self.assertIn('value="restore"', row)
        token = page.csrf()
        res = page.request("POST", f"/admin/review/{noticed}",
                           {"action": "restore", "csrf": token})
        self.assertStatus(res, 303)
        self.assertEqual(self.s.get(f"/raw/{noticed}").status, 200)
        notices = self.s.admin_request("GET", "/admin/notices").json()["notices"]
        self.assertEqual(notices, [])
        self.assertNotIn(f'id="row-{noticed}"', page.request("GET", "/admin/review").text)

    def test_a_paste_is_plain_text_cut_when_large_and_opaque_when_encrypted(self):
        page = Page(self.s)
        page.login()
        hostile = self.reported("<script>alert(1)</script>\n# not a heading\n**not bold**")
        res = page.request("GET", f"/admin/review/{hostile}")
        self.assertStatus(res, 200)
        self.assertIn(b"&lt;script&gt;alert(1)&lt;/script&gt;", res.body)
        self.assertNotIn(b"<script>alert", res.body)
        self.assertIn(b"**not bold**", res.body)
        self.assertIn("script-src 'self'", res.header("Content-Security-Policy"))
        large = self.reported("x" * 200_000)
        res = page.request("GET", f"/admin/review/{large}")
        self.assertIn(b'id="cut"', res.body)
        self.assertLess(len(res.body), 80_000)
        with open(VECTORS, encoding="utf-8") as f:
            envelope = json.load(f)["vectors"][1]["envelope"]
        created = self.s.request("POST", "/api/v1/pastes?encrypted=1", body=envelope)
        self.assertStatus(created, 201)
        sealed = created.json()["id"]
        report(self.s, sealed, "198.51.100.8")
        res = page.request("GET", f"/admin/review/{sealed}")
        self.assertIn(b'id="opaque"', res.body)
        self.assertNotIn(b"<pre", res.body)

    def test_sign_ins_are_rate_limited_and_forward_auth_is_not_locked_out(self):
        s = self.server(["--trusted-proxy", "127.0.0.1",
                         "--forward-auth-header", "X-Forwarded-User"])
        stranger = Page(s, {"X-Forwarded-For": "203.0.113.5"})
        answers = [stranger.login("wrong-guess-0123456789").status for _ in range(6)]
        self.assertEqual(answers, [401] * 5 + [429])
        res = stranger.login()
        self.assertStatus(res, 429)
        self.assertIsNotNone(res.header("Retry-After"))
        # Strangers from many addresses spend the global bucket (20, then one a second)...
        answers = []
        for i in range(250):
            answers.append(Page(s, {"X-Forwarded-For": f"10.0.{i // 200}.{i % 200}"}).login(
                "wrong-guess-xx").status)
            if answers[-1] == 429:
                break
        self.assertEqual(answers[-1], 429, "strangers from many addresses are refused too")
        # ...and the operator behind the single sign-on proxy is still let in.
        operator = Page(s, {"X-Forwarded-User": "alice@example.org"})
        res = operator.request("GET", "/admin/review")
        self.assertStatus(res, 200)
        self.assertIn(b"Sign out alice@example.org", res.body)

    def test_forward_auth_is_honoured_from_a_trusted_proxy_only(self):
        trusted = self.server(["--trusted-proxy", "127.0.0.1",
                               "--forward-auth-header", "X-Forwarded-User"])
        paste_id = trusted.create_ok("a text")["id"]
        report(trusted, paste_id, "198.51.100.7")
        alice = Page(trusted, {"X-Forwarded-User": "alice@example.org"})
        token = alice.csrf(f"/admin/review/{paste_id}")
        res = alice.request("POST", f"/admin/review/{paste_id}",
                            {"action": "takedown", "csrf": token})
        self.assertStatus(res, 303)
        self.assertIn(f"audit: review page: takedown of {paste_id} by alice@example.org",
                      trusted.log())
        # The form token is the name's: another name cannot use it.
        bob = Page(trusted, {"X-Forwarded-User": "bob"})
        self.assertStatus(bob.request("POST", f"/admin/review/{paste_id}",
                                      {"action": "dismiss", "csrf": token}), 403)
        # A name no proxy could have sent is nobody's.
        self.assertStatus(Page(trusted, {"X-Forwarded-User": "a b"}).request(
            "GET", "/admin/review"), 303)

        # The same header from a peer that is not a trusted proxy is the client's own writing.
        untrusted = self.server(["--trusted-proxy", "192.0.2.1",
                                 "--forward-auth-header", "X-Forwarded-User"])
        res = Page(untrusted, {"X-Forwarded-User": "alice@example.org"}).request(
            "GET", "/admin/review")
        self.assertStatus(res, 303)
        self.assertEqual(res.header("Location"), "/admin/login")


if __name__ == "__main__":
    unittest.main()
