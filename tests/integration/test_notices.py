"""Notice intake (issue 45, item 2; docs/moderation.md, "Notices"): a notice from an abuse desk,
through POST /admin/notices or `sluice admin notice`, withholds the pastes it names at once (451
withheld_notice on every read route, apart from the community vote's under_review), is stored (it
survives a restart), is idempotent by sender and reference, waits in the queue on the takedown
clock (kind="notice"), and the operator's takedown or restore closes it, audited with its
reference. The e-mail path reads tests/fixtures/abuse-notice.eml (MIME, quoted-printable, base64,
links in the text) through `sluice admin notice --email`.

NoticesTest runs on the embedded store; test_notices_postgres.py runs the same on PostgreSQL.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_notices
"""

import base64
import json
import os
import re
import subprocess

from promtext import metric
from sluice_harness import SluiceTestCase, clean_env, sluice_bin, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "abuse-notice.eml")
AGE = "sluice_moderation_oldest_open_age_seconds"
JSON = {"Content-Type": "application/json"}

# Every public route that reads a paste (src/http/routes.cc), GET and HEAD.
READ_ROUTES = ["/{id}", "/raw/{id}", "/api/v1/pastes/{id}", "/documents/{id}", "/{id}/rendered",
               "/{id}/diff", "/new?from={id}"]


def fixture_with(ids):
    """The fixture e-mail with PASTEID0000N replaced by ids[N-1], in its quoted-printable part as
    written and in its base64 parts decoded, replaced and encoded again."""
    with open(FIXTURE, "rb") as f:
        text = f.read().decode("ascii")

    def substitute(s):
        for n, paste_id in enumerate(ids, 1):
            s = s.replace(f"PASTEID{n:05d}", paste_id)
        return s

    def reencode(m):
        decoded = base64.b64decode(m.group(2))
        if b"PASTEID" not in decoded:
            return m.group(0)
        return m.group(1) + base64.encodebytes(substitute(decoded.decode()).encode()).decode()

    text = re.sub(r"(Content-Transfer-Encoding: base64\n\n)([A-Za-z0-9+/=\n]+?)(?=\n--)", reencode,
                  text)
    return substitute(text).encode("ascii")


def by_sender(s):
    """The transparency report's notices by kind of sender, summed over its months."""
    counts = {}
    for month in s.get("/transparency?format=json").json()["months"]:
        for kind, n in month["notices"]["by_sender"].items():
            counts[kind] = counts.get(kind, 0) + n
    return counts


class NoticeScenarios:
    """The scenarios, mixed into a SluiceTestCase that says which store (server_args)."""

    def server_args(self):
        return []

    def start(self):
        return self.server(self.server_args())

    def notice(self, s, pastes, reference="CASE-1", sender="abuse@hoster.example", **extra):
        body = {"sender": sender, "reference": reference, "category": "phishing",
                "pastes": pastes, **extra}
        return s.admin_request("POST", "/admin/notices", body=json.dumps(body), headers=JSON)

    def admin_cli(self, s, *args, stdin=None):
        env = clean_env({"SLUICE_ADMIN": f"http://127.0.0.1:{s.admin_port}",
                         "SLUICE_ADMIN_TOKEN_FILE": s.admin_token_file})
        return subprocess.run([sluice_bin(), "admin", *args], input=stdin, capture_output=True,
                              env=env, timeout=30)

    def assertWithheldEverywhere(self, s, paste_id):
        for route in READ_ROUTES:
            path = route.format(id=paste_id)
            res = s.get(path, headers={"Accept": "application/json"})
            doc = self.assertJsonError(res, 451, "withheld_notice")
            self.assertIn("notice", doc["error"], path)
            self.assertStatus(s.head(path), 451)
        # A browser gets the page of its own reason, not the community vote's.
        page = s.get(f"/{paste_id}", headers={"Accept": "text/html"})
        self.assertStatus(page, 451)
        self.assertIn(b"withheld after a notice", page.body)

    def test_a_notice_withholds_at_once_survives_a_restart_and_is_idempotent(self):
        s = self.start()
        a = s.create_ok("a phishing page")["id"]
        b = s.create_ok("its second copy")["id"]
        kept = s.create_ok("an innocent paste")["id"]
        self.assertStatus(s.get(f"/raw/{a}"), 200)  # cached before the notice
        res = self.notice(s, [f"{s.base_url}/{a}", f"{s.base_url}/raw/{b}#key"],
                          deadline="2h")
        self.assertStatus(res, 201)
        doc = res.json()
        self.assertTrue(doc["created"])
        notice = doc["notice"]
        self.assertEqual([(p["id"], p["outcome"]) for p in notice["pastes"]],
                         [(a, "withheld"), (b, "withheld")])
        self.assertTrue(notice["deadline_given"])
        self.assertAlmostEqual(notice["deadline_at"] - notice["arrived_at"], 7200, delta=5)
        for paste_id in (a, b):
            self.assertWithheldEverywhere(s, paste_id)
        self.assertStatus(s.get(f"/raw/{kept}"), 200)

        # The same sender and reference: the same notice, 200, nothing new.
        again = self.notice(s, [a, kept])
        self.assertStatus(again, 200)
        self.assertFalse(again.json()["created"])
        self.assertEqual(again.json()["notice"]["id"], notice["id"])
        self.assertStatus(s.get(f"/raw/{kept}"), 200)

        # In the queue with its clock, and the gauge of kind="notice".
        queue = s.admin_request("GET", "/admin/notices").json()["notices"]
        self.assertEqual([n["reference"] for n in queue], ["CASE-1"])
        self.assertGreaterEqual(queue[0]["waiting_seconds"], 0)
        self.assertGreater(queue[0]["seconds_left"], 7000)
        self.assertLess(metric(s.metrics(), AGE, kind="notice"), 60)

        s.restart()
        for paste_id in (a, b):
            self.assertWithheldEverywhere(s, paste_id)
        self.assertStatus(self.notice(s, [a]), 200)
        queue = s.admin_request("GET", "/admin/notices").json()["notices"]
        self.assertEqual([n["id"] for n in queue], [notice["id"]])

        # The operator acts: a takedown of one, a restore of the other, each audited with the
        # notice's reference; then nothing waits.
        res = s.admin_request("POST", f"/admin/pastes/{a}/takedown",
                              body=json.dumps({"reason": "phishing"}), headers=JSON)
        self.assertStatus(res, 200)
        self.assertEqual(len(s.admin_request("GET", "/admin/notices").json()["notices"]), 1)
        res = s.admin_request("POST", f"/admin/pastes/{b}/dismiss",
                              body=json.dumps({"note": "not phishing"}), headers=JSON)
        self.assertStatus(res, 200)
        self.assertEqual(s.admin_request("GET", "/admin/notices").json()["notices"], [])
        self.assertJsonError(s.get(f"/raw/{a}"), 451, "taken_down")
        self.assertStatus(s.get(f"/raw/{b}"), 200)
        audit = s.admin_request("GET", "/admin/audit").json()["audit"]
        by_action = {(e["action"], e["target"]): e["detail"] for e in audit}
        self.assertIn("notice CASE-1 from abuse@hoster.example", by_action[("takedown", a)])
        self.assertIn("notice CASE-1 from abuse@hoster.example", by_action[("dismiss", b)])
        self.assertIn("CASE-1", by_action[("withhold_notice", a)])
        metrics = s.metrics()
        self.assertEqual(metric(metrics, AGE, kind="notice"), 0)
        for action in ("takedown", "restore"):
            self.assertEqual(metric(metrics, "sluice_moderation_time_to_action_seconds_count",
                                    action=action, kind="notice"), 1, action)

    def test_pastes_missing_or_down_are_answered_each_and_none_valid_stores_nothing(self):
        s = self.start()
        live = s.create_ok("a live paste")["id"]
        down = s.create_ok("a paste taken down")["id"]
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{down}/takedown", body="{}",
                                          headers=JSON), 200)
        missing = "AAAAAAAAAAAA"
        res = self.notice(s, [missing, down], reference="NONE-VALID")
        doc = self.assertJsonError(res, 422, "no_withholdable_paste")
        self.assertEqual({p["id"]: p["outcome"] for p in doc["pastes"]},
                         {missing: "not_found", down: "taken_down"})
        self.assertEqual(s.admin_request("GET", "/admin/notices").json()["notices"], [])

        res = self.notice(s, [missing, live, down], reference="SOME-VALID")
        self.assertStatus(res, 201)
        self.assertEqual({p["id"]: p["outcome"] for p in res.json()["notice"]["pastes"]},
                         {missing: "not_found", live: "withheld", down: "taken_down"})
        self.assertJsonError(s.get(f"/raw/{live}"), 451, "withheld_notice")

    def test_bad_notices_get_a_clear_error_and_store_nothing(self):
        s = self.start()
        paste_id = s.create_ok("text")["id"]
        cases = [
            ({"sender": "a@b.example", "reference": "R", "pastes": []}, "bad_pastes"),
            ({"sender": "a@b.example", "reference": "R", "pastes": ["https://x.example/a/b/c"]},
             "bad_pastes"),
            ({"sender": "", "reference": "R", "pastes": [paste_id]}, "bad_sender"),
            ({"sender": "a@b.example", "pastes": [paste_id]}, "bad_reference"),
            ({"sender": "a\nb", "reference": "R", "pastes": [paste_id]}, "bad_sender"),
            ({"sender": "a@b.example", "reference": "R", "category": "x", "pastes": [paste_id]},
             "bad_category"),
            ({"sender": "a@b.example", "reference": "R", "deadline": "soon",
              "pastes": [paste_id]}, "bad_deadline"),
            ({"sender": "a@b.example", "reference": "R", "pastes": [paste_id] * 101},
             "too_many_pastes"),
            ({"sender": "a@b.example", "reference": "R", "pastes": [paste_id], "x": "y"},
             "bad_json"),
        ]
        for body, reason in cases:
            res = s.admin_request("POST", "/admin/notices", body=json.dumps(body), headers=JSON)
            self.assertJsonError(res, 400, reason)
        self.assertJsonError(s.admin_request("POST", "/admin/notices", body="[1]", headers=JSON),
                             400, "bad_json")
        self.assertJsonError(s.admin_request("POST", "/admin/notices", body="{}"), 415)
        self.assertJsonError(s.admin_request("POST", "/admin/notices", body="{}", headers=JSON,
                                             token="wrong-token-wrong-token"), 401)
        # Over the admin listener's body limit (16 KB): refused before anything is parsed.
        big = {"sender": "a@b.example", "reference": "R" * 20000, "pastes": [paste_id]}
        self.assertStatus(s.admin_request("POST", "/admin/notices", body=json.dumps(big),
                                          headers=JSON), 413)
        self.assertEqual(s.admin_request("GET", "/admin/notices").json()["notices"], [])
        self.assertStatus(s.get(f"/raw/{paste_id}"), 200)

    def test_max_notices_bounds_the_stored_notices(self):
        s = self.server(self.server_args() + ["--max-notices", "1"])
        a = s.create_ok("one")["id"]
        b = s.create_ok("two")["id"]
        self.assertStatus(self.notice(s, [a], reference="FIRST"), 201)
        self.assertJsonError(self.notice(s, [b], reference="SECOND"), 507, "notices_full")
        self.assertStatus(s.get(f"/raw/{b}"), 200)
        self.assertStatus(self.notice(s, [a], reference="FIRST"), 200)  # still idempotent
        # Once the operator has acted on it, the closed notice makes room for the next one; the
        # action stays in the audit trail.
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{a}/dismiss",
                                          body=json.dumps({"note": "fine"}), headers=JSON), 200)
        self.assertStatus(self.notice(s, [b], reference="SECOND"), 201)
        self.assertJsonError(s.get(f"/raw/{b}"), 451, "withheld_notice")
        self.assertEqual([n["reference"] for n in
                          s.admin_request("GET", "/admin/notices").json()["notices"]], ["SECOND"])
        audit = s.admin_request("GET", "/admin/audit").json()["audit"]
        self.assertTrue(any("notice FIRST" in e.get("detail", "") for e in audit), audit)

    def test_the_cli_flags_and_the_abuse_email(self):
        s = self.start()
        # The store may be shared with the class's other tests (test_notices_postgres.py): what
        # this test adds is counted from here.
        before = by_sender(s)
        x = s.create_ok("flagged by id")["id"]
        res = self.admin_cli(s, "notice", "--paste", x, "--sender", "legal@registrar.example",
                             "--sender-kind", "registrar", "--reference", "REG-77", "--category",
                             "illegal", "--deadline", "2026-12-31T23:00:00Z")
        self.assertEqual(res.returncode, 0, res.stderr)
        out = json.loads(res.stdout)
        self.assertEqual(out["notice"]["deadline_at"], 1798758000)
        self.assertJsonError(s.get(f"/raw/{x}"), 451, "withheld_notice")

        ids = [s.create_ok(f"phishing copy {n}")["id"] for n in range(3)]
        mail = fixture_with(ids)
        res = self.admin_cli(s, "notice", "--email", stdin=mail)
        self.assertEqual(res.returncode, 0, res.stderr)
        notice = json.loads(res.stdout)["notice"]
        self.assertEqual(notice["sender"], "abuse@hostingco.example")
        self.assertEqual(notice["reference"], "20261205091240.4711@abuse.hostingco.example")
        self.assertEqual([p["id"] for p in notice["pastes"]], ids)
        for paste_id in ids:
            self.assertJsonError(s.get(f"/raw/{paste_id}"), 451, "withheld_notice")
        # The mail server delivers it again: the same notice.
        res = self.admin_cli(s, "notice", "--email", stdin=mail)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertFalse(json.loads(res.stdout)["created"])
        listed = self.admin_cli(s, "notices")
        self.assertEqual(len(json.loads(listed.stdout)["notices"]), 2)
        # The transparency report counts them by the kind of sender each gave: the registrar's
        # flag, and the e-mail's none. Each process reads the counters again within seconds.
        def counted_since():
            counts = by_sender(s)
            return {kind: n - before.get(kind, 0) for kind, n in counts.items()
                    if n != before.get(kind, 0)}
        wait_until(lambda: counted_since() == {"registrar": 1, "unclassified": 1}, timeout=30,
                   message="the notices counted by kind of sender")
        res = self.admin_cli(s, "notice", "--paste", x, "--sender", "a@b.example",
                             "--sender-kind", "neighbour", "--reference", "N-1")
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(b"sender_kind must be one of", res.stdout + res.stderr)

    def test_a_malformed_or_oversized_email_is_refused_and_nothing_is_sent(self):
        s = self.start()
        paste_id = s.create_ok("text")["id"]
        link = f"https://paste.example.org/{paste_id}\n".encode()
        for mail, says in [
            (b"", b"empty"),
            (b"just some text " + link, b"not an e-mail"),
            (b"From: nobody\n\n" + link, b"From"),
            (b"From: a@b.example\nMessage-ID: <x@y>\n\n" + b"x" * (1 << 20) + link, b"over"),
            (b"From: a@b.example\nMessage-ID: <x@y>\n\nno link here\n", b"no paste"),
            (b"From: a@b.example\n\n" + link, b"Message-ID"),
        ]:
            res = self.admin_cli(s, "notice", "--email", stdin=mail)
            self.assertEqual(res.returncode, 2, (mail[:60], res.stderr))
            self.assertIn(says, res.stderr, mail[:60])
        self.assertEqual(s.admin_request("GET", "/admin/notices").json()["notices"], [])
        self.assertStatus(s.get(f"/raw/{paste_id}"), 200)


class NoticesTest(NoticeScenarios, SluiceTestCase):
    """On the embedded store."""

if __name__ == "__main__":
    import unittest

    unittest.main()
