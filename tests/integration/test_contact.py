"""The public contact: /.well-known/security.txt, /abuse, the footer and /robots.txt (issue 45).

A public pastebin whose operator cannot be reached gets its abuse notices sent to its host and
registrar, which is how such sites lose their domain. sluice's contact surface is there by default,
made from settings once at start (src/http/public_contact.h), and says honestly what the operator
has not set (docs/moderation.md, "The public contact").

security.txt is checked against RFC 9116's grammar here (section 4 and the ABNF of section 5,
with RFC 3339's date-time): Debian packages no validator, and the PyPI one (sectxt) is not a
dependency the repository installs.
"""

import datetime
import json
import re
import tempfile
import unittest

from sluice_harness import SluiceTestCase, run_sluice

CONTACTS = "mailto:abuse@paste.example, https://paste.example/contact"
PUBLIC_URL = "https://paste.example"
POLICY = "Pastes breaking Dutch law are removed <b>fast</b> & for good."

# RFC 9116 section 5 (ABNF): a field is "name: value", a comment starts with "#", lines end with
# CRLF or LF; RFC 3339 5.6's date-time for Expires.
FIELD = re.compile(r"^([A-Za-z0-9!#$%&'*+.^_`|~-]+): (\S(?:.*\S)?)$")
# The fields RFC 9116 6.4 registers; another would be a typo here.
REGISTERED = {"acknowledgments", "canonical", "contact", "encryption", "expires", "hiring",
              "policy", "preferred-languages", "csaf"}
DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$")
LANGUAGE_TAG = re.compile(r"^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*$")


def parse_security_txt(testcase, text):
    """The fields of `text`, each a list of values, after checking RFC 9116's rules on it."""
    fields = {}
    # Every line ends with a line break, the last one too; no byte-order mark (RFC 9116 4).
    testcase.assertTrue(text.endswith("\n"), repr(text))
    testcase.assertFalse(text.startswith("\ufeff"))
    for line in text.split("\n")[:-1]:
        if line == "" or line.startswith("#"):
            continue
        m = FIELD.match(line)
        testcase.assertIsNotNone(m, f"not a field line (RFC 9116 5): {line!r}")
        testcase.assertIn(m.group(1).lower(), REGISTERED, line)
        fields.setdefault(m.group(1).lower(), []).append(m.group(2))
    # 2.5.3: at least one Contact, each a URI; web URIs must be https.
    testcase.assertTrue(fields.get("contact"), text)
    for uri in fields["contact"]:
        testcase.assertRegex(uri, r"^(mailto:[^\s@]+@[^\s@]+|https://\S+|tel:\S+)$")
    # 2.5.5: exactly one Expires, an RFC 3339 date-time, in the future, less than a year ahead
    # (recommended).
    testcase.assertEqual(len(fields.get("expires", [])), 1, text)
    expires = fields["expires"][0]
    testcase.assertRegex(expires, DATE_TIME)
    when = datetime.datetime.fromisoformat(expires.replace("Z", "+00:00"))
    now = datetime.datetime.now(datetime.timezone.utc)
    testcase.assertGreater(when, now)
    testcase.assertLess(when, now + datetime.timedelta(days=366))
    # 2.5.8: Preferred-Languages at most once, comma-separated tags.
    testcase.assertLessEqual(len(fields.get("preferred-languages", [])), 1)
    for value in fields.get("preferred-languages", []):
        for tag in value.split(","):
            testcase.assertRegex(tag.strip(), LANGUAGE_TAG)
    # 2.5.2, 2.5.7: Canonical and Policy are https URIs.
    for name in ("canonical", "policy"):
        for uri in fields.get(name, []):
            testcase.assertTrue(uri.startswith("https://"), f"{name}: {uri}")
    return fields


class ContactSetTest(SluiceTestCase):
    """A server whose operator set every contact setting."""

    def setUp(self):
        super().setUp()
        self.srv = self.server([
            "--abuse-contact", CONTACTS, "--public-url", PUBLIC_URL,
            "--contact-languages", "en, nl", "--takedown-deadline", "3h",
            "--abuse-policy-text", POLICY, "--security-txt-lifetime", "2160h",
            "--fault-injection", "true",
            # A report answers after the queue's count is read again, within twice this: room
            # for a machine busy with other suites.
            "--moderation-timeout", "10s"])

    def test_security_txt_has_rfc_9116_fields_from_the_settings(self):
        res = self.srv.get("/.well-known/security.txt")
        self.assertStatus(res, 200)
        self.assertEqual(res.header("Content-Type"), "text/plain; charset=utf-8")
        self.assertIn("max-age", res.header("Cache-Control"))
        fields = parse_security_txt(self, res.text)
        self.assertEqual(fields["contact"],
                         ["mailto:abuse@paste.example", "https://paste.example/contact"])
        self.assertEqual(fields["preferred-languages"], ["en, nl"])
        self.assertEqual(fields["canonical"], [PUBLIC_URL + "/.well-known/security.txt"])
        self.assertEqual(fields["policy"], [PUBLIC_URL + "/abuse"])
        # Expires counts security_txt_lifetime (90 days) from the start of today (UTC).
        when = datetime.datetime.fromisoformat(fields["expires"][0].replace("Z", "+00:00"))
        today = datetime.datetime.now(datetime.timezone.utc).replace(
            hour=0, minute=0, second=0, microsecond=0)
        self.assertIn(when - today, (datetime.timedelta(days=90), datetime.timedelta(days=89)))

    def test_head_answers_the_fields_without_the_body_and_post_is_405(self):
        for path in ("/.well-known/security.txt", "/robots.txt", "/abuse"):
            get = self.srv.get(path)
            head = self.srv.head(path)
            self.assertStatus(head, 200)
            self.assertEqual(head.body, b"")
            self.assertEqual(head.header("Content-Type"), get.header("Content-Type"))
            self.assertEqual(head.header("Content-Length"), str(len(get.body)))
            post = self.srv.request("POST", path, body="x")
            self.assertJsonError(post, 405)
            self.assertEqual(post.header("Allow"), "GET, HEAD")

    def test_abuse_page_shows_the_contacts_deadline_policy_and_queue(self):
        res = self.srv.get("/abuse", headers={"Accept": "text/html"})
        self.assertStatus(res, 200)
        self.assertTrue(res.header("Content-Type").startswith("text/html"))
        page = res.text
        self.assertIn('<a href="mailto:abuse@paste.example">abuse@paste.example</a>', page)
        self.assertIn('<a href="https://paste.example/contact">https://paste.example/contact</a>',
                      page)
        self.assertIn("within 3 hours", page)
        # The operator's words, escaped: they are text, never markup.
        self.assertIn("removed &lt;b&gt;fast&lt;/b&gt; &amp; for good.", page)
        self.assertIn("/api/v1/pastes/ID/report", page)
        self.assertIn("/.well-known/security.txt", page)
        self.assertIn('id="pending">Pastes waiting for review now: 0<', page)
        self.assertNotIn('id="no-contact"', page)

    def test_abuse_page_counts_the_review_queue(self):
        paste = self.srv.create_ok("cheap watches")["id"]
        report = self.srv.request("POST", f"/api/v1/pastes/{paste}/report",
                                  body=json.dumps({"reason": "spam"}),
                                  headers={"Content-Type": "application/json"})
        self.assertStatus(report, 202)
        self.assertIn("Pastes waiting for review now: 1<", self.srv.get("/abuse").text)

    def test_abuse_page_is_in_the_readers_language(self):
        page = self.srv.get("/abuse", headers={"Accept-Language": "de"}).text
        self.assertIn('<html lang="de">', page)
        self.assertIn("Missbrauch melden", page)
        self.assertIn("Kontakt bei Missbrauch:", page)
        self.assertNotIn("Pastes waiting for review now", page)

    def test_every_page_names_the_abuse_contact_in_its_footer(self):
        paste = self.srv.create_ok("hello")["id"]
        html = {"Accept": "text/html"}
        for path in ("/", f"/{paste}", "/status", "/abuse", "/no-such-paste-id"):
            res = self.srv.get(path, headers=html)
            footer = res.text[res.text.index('<footer class="site">'):]
            self.assertIn('<a href="/abuse">Report abuse</a>', footer, path)
            self.assertIn('Abuse contact: <a href="mailto:abuse@paste.example">'
                          'abuse@paste.example</a>', footer, path)

    def test_robots_txt_keeps_crawlers_off_pastes_by_default(self):
        res = self.srv.get("/robots.txt")
        self.assertStatus(res, 200)
        self.assertEqual(res.header("Content-Type"), "text/plain; charset=utf-8")
        rules = [line.split(":", 1) for line in res.text.splitlines()
                 if line and not line.startswith("#")]
        rules = [(k.strip().lower(), v.strip()) for k, v in rules]
        self.assertEqual(rules[0], ("user-agent", "*"))
        self.assertIn(("disallow", "/"), rules)
        self.assertIn(("allow", "/$"), rules)
        self.assertIn(("allow", "/abuse$"), rules)
        # RFC 9309 2.2.2: the longest match wins; a paste's path matches only "Disallow: /".
        paste = self.srv.create_ok("secret")["id"]
        self.assertFalse(robots_allows(rules, f"/{paste}"))
        self.assertFalse(robots_allows(rules, f"/raw/{paste}"))
        self.assertFalse(robots_allows(rules, "/abuseAAAAAAA"))
        self.assertTrue(robots_allows(rules, "/"))
        self.assertTrue(robots_allows(rules, "/abuse"))
        self.assertTrue(robots_allows(rules, "/.well-known/security.txt"))

    def test_the_answers_need_no_store(self):
        # Every store call refused: the contact surface is made from settings in memory, so it
        # answers as before, and a million requests would cost no store call either.
        self.assertStatus(self.srv.admin_request("PUT", "/debug/faults", body="*:refuse"), 204)
        self.assertStatus(self.srv.get("/api/v1/pastes/AAAAAAAAAAAA"), 503)  # the store is down
        for _ in range(50):
            for path in ("/.well-known/security.txt", "/robots.txt", "/abuse"):
                self.assertStatus(self.srv.get(path), 200)


def robots_allows(rules, path):
    """RFC 9309 2.2.2: the matching rule with the longest pattern wins; allow on a tie."""
    best = None
    for kind, pattern in rules:
        if kind not in ("allow", "disallow"):
            continue
        anchored = pattern.endswith("$")
        body = pattern[:-1] if anchored else pattern
        regex = "^" + re.escape(body).replace(r"\*", ".*") + ("$" if anchored else "")
        if re.match(regex, path):
            key = (len(pattern), kind == "allow")
            if best is None or key > best[0]:
                best = (key, kind)
    return best is None or best[1] == "allow"


class ContactUnsetTest(SluiceTestCase):
    """A server started without the contact settings."""

    def test_the_start_log_names_the_setting_once(self):
        srv = self.server()
        lines = [line for line in srv.log().splitlines() if "abuse_contact is not set" in line]
        self.assertEqual(len(lines), 1, srv.log())
        self.assertIn("warn", lines[0])
        self.assertIn("security.txt", lines[0])

    def test_security_txt_is_404_and_abuse_sends_reporters_to_the_report_form(self):
        srv = self.server()
        self.assertJsonError(srv.get("/.well-known/security.txt"), 404, "no_contact")
        page = srv.get("/abuse").text
        self.assertIn('id="no-contact"', page)
        self.assertIn("/api/v1/pastes/ID/report", page)
        self.assertIn("within 1 hour", page)  # takedown_deadline's default
        self.assertNotIn("/.well-known/security.txt", page)
        footer = page[page.index('<footer class="site">'):]
        self.assertIn('<a href="/abuse">Report abuse</a>', footer)
        self.assertNotIn("Abuse contact:", footer)

    def test_a_set_contact_is_not_warned_about(self):
        srv = self.server(["--abuse-contact", "mailto:abuse@paste.example"])
        self.assertNotIn("abuse_contact is not set", srv.log())
        # Without an https public_url there is no Canonical or Policy to name (RFC 9116 3).
        fields = parse_security_txt(self, srv.get("/.well-known/security.txt").text)
        self.assertNotIn("canonical", fields)
        self.assertNotIn("policy", fields)
        self.assertEqual(fields["preferred-languages"], ["en"])

    def test_a_contact_that_is_not_a_mailto_https_or_tel_uri_stops_the_start(self):
        with tempfile.TemporaryDirectory() as data:
            result = run_sluice(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "",
                                 "--data-dir", data, "--abuse-contact", "javascript:alert(1)"])
        said = result.stdout + result.stderr
        self.assertEqual(result.returncode, 2, said)
        self.assertIn("abuse_contact", said)
        self.assertIn("mailto:", said)

    def test_robots_setting_chooses_the_policy(self):
        srv = self.server(["--robots", "none"])
        self.assertIn("Disallow: /\n", srv.get("/robots.txt").text)
        self.assertNotIn("Allow: /$", srv.get("/robots.txt").text)


if __name__ == "__main__":
    unittest.main()
