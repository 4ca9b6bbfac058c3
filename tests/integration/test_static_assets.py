"""The browser's files (docs/web.md): each stylesheet and script a page links is served byte for
byte as the file it was built from (web/static, and Debian's QR encoder), with its type, a versioned
path cached as immutable, a strong ETag, and, where a page asks for it, a Subresource Integrity
that matches the bytes.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_static_assets
"""

import base64
import hashlib
import os
import re
import unittest

from sluice_harness import REPO, SluiceTestCase

BROWSER = {"Accept": "text/html,application/xhtml+xml"}
QRCODE_JS = "/usr/share/nodejs/qrcode-generator/qrcode.js"
SOURCES = {f"/static/{name}": os.path.join(REPO, "web", "static", name)
           for name in os.listdir(os.path.join(REPO, "web", "static"))}
SOURCES["/static/qrcode.js"] = QRCODE_JS
# A page links a script, a stylesheet, or (the create page) the proof of work's Web Worker, which
# app.js starts from the form's data-pow-worker.
TAG_RE = re.compile(rb'<(?:script src|link rel="stylesheet" href|form [^>]*data-pow-worker)='
                    rb'"(/static/[^"?]+)\?v=([0-9a-f]+)"(?: integrity="([^"]+)")?')


def read(path):
    with open(path, "rb") as f:
        return f.read()


class StaticAssetsTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        # With the proof of work's rung on, so that the create page names its worker.
        cls.srv = cls.start_class_server(["--proof-of-work", "true"])

    def linked(self):
        """Every asset the create page and a created page link: {path: (version, integrity)}."""
        boundary = "b0undary"
        form = (f'--{boundary}\r\nContent-Disposition: form-data; name="content"\r\n\r\n'
                f'hi\r\n--{boundary}--\r\n').encode()
        created = self.srv.request("POST", "/", body=form, headers={
            **BROWSER, "Content-Type": f"multipart/form-data; boundary={boundary}"})
        self.assertStatus(created, 201)
        pages = [self.srv.get("/", headers=BROWSER).body, created.body]
        found = {}
        for page in pages:
            for path, version, integrity in TAG_RE.findall(page):
                found[path.decode()] = (version.decode(), integrity.decode() if integrity else None)
        return found

    def test_every_file_is_linked_and_served_as_built(self):
        linked = self.linked()
        self.assertTrue(set(SOURCES) <= set(linked) | {"/static/status.js"}, linked)
        for path, (version, integrity) in linked.items():
            with self.subTest(path=path):
                res = self.srv.get(f"{path}?v={version}")
                self.assertStatus(res, 200)
                self.assertEqual(res.body, read(SOURCES[path]))
                self.assertEqual(res.header("Content-Type"),
                                 "text/css; charset=utf-8" if path.endswith(".css")
                                 else "text/javascript; charset=utf-8")
                self.assertEqual(res.header("Cache-Control"), "public, max-age=31536000, immutable")
                self.assertEqual(res.header("X-Content-Type-Options"), "nosniff")
                etag = res.header("ETag")
                self.assertRegex(etag, r'^"[0-9a-f]{16}"$')
                self.assertEqual(self.srv.get(path, headers={"If-None-Match": etag}).status, 304)
                if integrity is not None:
                    digest = base64.b64encode(hashlib.sha256(res.body).digest()).decode()
                    self.assertEqual(integrity, f"sha256-{digest}")

    def test_the_scripts_that_see_a_key_carry_their_integrity(self):
        linked = self.linked()
        for path in ("/static/crypt.js", "/static/qrcode.js", "/static/qr.js"):
            with self.subTest(path=path):
                self.assertIsNotNone(linked[path][1])

    def test_the_bare_path_is_cached_briefly(self):
        res = self.srv.get("/static/style.css")
        self.assertStatus(res, 200)
        self.assertEqual(res.header("Cache-Control"), "public, max-age=300")


if __name__ == "__main__":
    unittest.main()
