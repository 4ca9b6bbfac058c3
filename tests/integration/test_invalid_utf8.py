"""Every request gets an answer (issue 32, item 4): bytes that are not UTF-8, in any field of a
create that a refusal may quote, get a 400 with a JSON body (a page for a browser), valid UTF-8 and
counted in sluice_http_requests_total, never an empty reply. The JSON create (content, keys, other
values), the raw create of POST / (its body, the Sluice-Filename header) and the multipart form
(content, field names, file names), each with every class of invalid UTF-8.

Before the fix, a JSON create whose parse error quoted the bytes got no answer at all: nlohmann's
dump() threw in the session, outside the handler's exception boundary.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_invalid_utf8
"""

import json
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase

# (name, bytes): every class of ill-formed UTF-8 (RFC 3629; Unicode 15.0, section 3.9).
INVALID = [
    ("lone continuation byte", b"\x80"),
    ("overlong 2-byte '/'", b"\xc0\xaf"),
    ("overlong 3-byte", b"\xe0\x80\xaf"),
    ("overlong 4-byte", b"\xf0\x80\x80\xaf"),
    ("surrogate U+D800 encoded", b"\xed\xa0\x80"),
    ("surrogate U+DFFF encoded", b"\xed\xbf\xbf"),
    ("past U+10FFFF", b"\xf4\x90\x80\x80"),
    ("5-byte form", b"\xf8\x88\x80\x80\x80"),
    ("truncated 2-byte", b"\xc3"),
    ("truncated 3-byte", b"\xe2\x82"),
    ("truncated 4-byte", b"\xf0\x9f\x98"),
    ("0xFE", b"\xfe"),
    ("0xFF", b"\xff"),
]

BOUNDARY = "utf8b0undary"


def json_create(where, bad):
    """A JSON envelope with `bad` where the name says, sent as is (not escaped)."""
    if where == "content":
        return b'{"content": "a' + bad + b'b"}'
    if where == "key":
        return b'{"content": "x", "' + bad + b'": "y"}'
    if where == "long unknown key":
        # 63 ASCII bytes and then the bad ones: the old 64-byte cut fell inside a character.
        return b'{"' + b"k" * 63 + bad + b'": "y", "content": "x"}'
    if where == "ttl":
        return b'{"content": "x", "ttl": "' + bad + b'"}'
    if where == "language":
        return b'{"content": "x", "language": "' + bad + b'"}'
    raise ValueError(where)


def multipart(where, bad):
    name, filename, content = b"file", b"notes.txt", b"text"
    if where == "content":
        content = b"a" + bad + b"b"
    elif where == "field name":
        name = b"f" + bad
    elif where == "file name":
        filename = b"notes" + bad + b".py"
    else:
        raise ValueError(where)
    return (b"--" + BOUNDARY.encode() + b"\r\nContent-Disposition: form-data; name=\"" + name
            + b"\"; filename=\"" + filename + b"\"\r\nContent-Type: text/plain\r\n\r\n" + content
            + b"\r\n--" + BOUNDARY.encode() + b"--\r\n")


class InvalidUtf8Test(SluiceTestCase):

    def setUp(self):
        super().setUp()
        self.s = self.server()

    def requests(self):
        """(route label, description, method, path, headers, body) for every field and class."""
        out = []
        for name, bad in INVALID:
            for where in ("content", "key", "long unknown key", "ttl", "language"):
                out.append(("create_api", f"JSON {where}: {name}", "/api/v1/pastes",
                            {"Content-Type": "application/json"}, json_create(where, bad)))
            out.append(("create_form", f"raw body: {name}", "/", {}, b"a" + bad + b"b"))
            # http.client sends str headers as Latin-1; bytes go through untouched.
            out.append(("create_form", f"Sluice-Filename: {name}", "/",
                        {"Sluice-Filename": b"x" + bad + b".py"}, b"text"))
            for where in ("content", "field name", "file name"):
                out.append(("create_form", f"multipart {where}: {name}", "/",
                            {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
                            multipart(where, bad)))
        return out

    def assert_refused(self, res, what, html):
        self.assertEqual(res.status, 400, f"{what}: {res!r}")
        text = res.body.decode("utf-8")  # strict: raises on invalid UTF-8
        ctype = res.header("Content-Type") or ""
        if html:
            self.assertTrue(ctype.startswith("text/html"), f"{what}: {ctype}")
            self.assertIn('id="problem"', text, what)
        else:
            self.assertTrue(ctype.startswith("application/json"), f"{what}: {ctype}")
            doc = json.loads(text)
            self.assertIsInstance(doc.get("error"), str, f"{what}: {doc}")
            self.assertTrue(doc["error"], what)
            self.assertIsInstance(doc.get("reason"), str, f"{what}: {doc}")
            # What is quoted of the client's bytes is readable: U+FFFD, never a raw control.
            self.assertFalse(any(ord(c) < 0x20 for c in doc["error"]), f"{what}: {doc}")

    def send_all(self, html):
        before = self.s.metrics()
        sent = {}
        for route, what, path, headers, body in self.requests():
            h = dict(headers)
            if html:
                h["Accept"] = "text/html"
            res = self.s.request("POST", path, body=body, headers=h)
            self.assert_refused(res, what, html)
            sent[route] = sent.get(route, 0) + 1
        after = self.s.metrics()
        for route, count in sent.items():
            grew = (metric(after, "sluice_http_requests_total", route=route, status="400")
                    - metric(before, "sluice_http_requests_total", route=route, status="400"))
            self.assertEqual(grew, count, f"{route}: counted {grew} of {count} 400s")
        # Nothing was stored, and the server still serves.
        self.assertEqual(self.s.query("SELECT count(*) FROM pastes")[0][0], 0)
        self.assertEqual(self.s.get("/healthz").status, 200)

    def test_every_invalid_field_is_a_counted_400_with_a_json_body(self):
        self.send_all(html=False)

    def test_a_browser_gets_every_refusal_as_a_page(self):
        self.send_all(html=True)

    def test_the_issues_four_requests_are_answered(self):
        # The reproductions from the issue, byte for byte.
        for body in (b'{"content": "\xff"}', b'{"\xfe": "x"}', b'{"content": "\xc0\xaf"}',
                     b'{"' + b"k" * 63 + "é".encode() + b'": "x"}'):
            res = self.s.request("POST", "/api/v1/pastes", body=body,
                                 headers={"Content-Type": "application/json"})
            self.assertJsonError(res, 400, "bad_json")
        # The unknown key is quoted whole up to its cut, which falls between characters.
        res = self.s.request("POST", "/api/v1/pastes",
                             body=b'{"' + b"k" * 63 + "é".encode() + b'": "x"}',
                             headers={"Content-Type": "application/json"})
        self.assertIn("k" * 63 + "\u2026", res.json()["error"])

    def test_valid_text_with_the_same_shapes_is_still_created(self):
        # The checks refuse bytes, not characters: é, U+10FFFF and an emoji in every field pass.
        good = "é\U0010ffff😀".encode()
        res = self.s.request("POST", "/api/v1/pastes", body=json_create("content", good),
                             headers={"Content-Type": "application/json"})
        self.assertEqual(res.status, 201, res)
        res = self.s.request("POST", "/", body=multipart("file name", good), headers={
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
        self.assertEqual(res.status, 201, res)
        res = self.s.request("POST", "/", body=b"text", headers={"Sluice-Filename": good + b".py"})
        self.assertEqual(res.status, 201, res)


if __name__ == "__main__":
    unittest.main()
