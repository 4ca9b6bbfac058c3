"""The clients people already have, against the real binary (issue 13): pastebinit with
contrib/pastebinit/sluice.conf, npm's hastebin-gen, curl and wget on /ID; the JSON create, the
haste protocol, the JSON read; awkward bytes through every create and read route; hostile JSON.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_clients
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from rawhttp import free_port
from sluice_harness import BACKEND_ARGS, SluiceTestCase

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ID = r"[0-9A-Za-z]{12}"
# Every awkward byte of issue 13: CRLF, tabs, a BOM, 4-byte UTF-8, and the form/query specials.
AWKWARD = "\ufeffa & b = c + d % e\r\n\tline two 🐍𝄞\r\n%41+%2B&x=1\n"
ROOMY = ["--ip-create-rate", "1000", "--ip-create-burst", "1000"]
BOUNDARY = "----sluiceclients7f3a"


def multipart(name, value, filename=None):
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return (f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n"
            "Content-Type: text/plain\r\n\r\n").encode() + value.encode() + \
        f"\r\n--{BOUNDARY}--\r\n".encode()


class ClientsTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.s = self.server(ROOMY)

    def raw(self, paste_id):
        res = self.s.get(f"/raw/{paste_id}")
        self.assertEqual(res.status, 200, res)
        return res.body

    # ---- the JSON create -----------------------------------------------------------------------

    def test_json_create_stores_the_content_not_the_envelope(self):
        for ctype in ("application/json", "text/json", "Application/JSON; charset=utf-8"):
            body = json.dumps({"content": "print(1)\n", "ttl": "1d", "language": "python"})
            res = self.s.create(body, headers={"Content-Type": ctype})
            self.assertEqual(res.status, 201, res)
            doc = res.json()
            self.assertEqual(self.raw(doc["id"]), b"print(1)\n")
            self.assertIn("lang=python", res.header("Location"))

    def test_other_content_types_stay_a_raw_body(self):
        body = '{"content": "x"}'
        doc = self.s.create_ok(body, headers={"Content-Type": "text/plain"})
        self.assertEqual(self.raw(doc["id"]), body.encode())

    def test_hostile_json_is_a_400_with_a_reason_and_nothing_stored(self):
        cases = {
            "deep nesting": '{"content": ' + "[" * 100000 + "]" * 100000 + "}",
            "huge number": '{"content": "x", "ttl": 1e999999}',
            "huge integer": '{"content": ' + "9" * 5000 + "}",
            "duplicate key": '{"content": "a", "content": "b"}',
            "NUL escape": '{"content": "a\\u0000b"}',
            "lone surrogate": '{"content": "\\ud800"}',
            "content not a string": '{"content": ["a"]}',
            "content missing": '{"ttl": "1d"}',
            "unknown field": '{"content": "a", "title": "t"}',
            "not an object": '"just a string"',
            "truncated": '{"content": "a"',
            "trailing garbage": '{"content": "a"} x',
        }
        for name, body in cases.items():
            with self.subTest(name):
                res = self.s.create(body, headers={"Content-Type": "application/json"})
                self.assertEqual(res.status, 400, res)
                doc = res.json()
                self.assertEqual(doc["reason"], "bad_json", doc)
                self.assertTrue(doc["error"] and doc["message"], doc)
        res = self.s.create('{"content": "a", "title": "t"}',
                            headers={"Content-Type": "application/json"})
        self.assertIn("'title'", res.json()["error"])
        # Nothing was stored: the store holds no row (embedded SQLite).
        if not BACKEND_ARGS:
            self.assertEqual(self.s.query("SELECT COUNT(*) FROM pastes"), [(0,)])

    def test_json_envelope_counts_against_the_declared_length(self):
        s = self.server(["--max-paste-bytes", "100", *ROOMY])
        small = json.dumps({"content": "x" * 100})
        self.assertEqual(s.create(small, headers={"Content-Type": "application/json"}).status, 201)
        # Refused from the headers: over the limit plus the envelope's allowance, body unread.
        res = s.create("x", headers={"Content-Type": "application/json"},
                       content_length=100 + 16 * 1024 + 1)
        self.assertEqual(res.status, 413, res)
        # The decoded text is held to the limit itself.
        big = json.dumps({"content": "x" * 101})
        self.assertEqual(s.create(big, headers={"Content-Type": "application/json"}).status, 413)

    # ---- haste ---------------------------------------------------------------------------------

    def test_haste_create_and_read(self):
        res = self.s.request("POST", "/documents", body=AWKWARD,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(res.status, 200, res)
        key = res.json()["key"]
        self.assertRegex(key, ID)
        self.assertEqual(self.raw(key), AWKWARD.encode())
        doc = self.s.get(f"/documents/{key}").json()
        self.assertEqual(doc, {"key": key, "data": AWKWARD})
        page = self.s.get(f"/{key}.py", headers={"Accept": "text/html"})
        self.assertEqual(page.status, 200)
        self.assertIn("Python", page.text)

    def test_haste_refusal_keeps_a_message(self):
        s = self.server(["--max-paste-bytes", "10", *ROOMY])
        res = s.request("POST", "/documents", body="x" * 11)
        self.assertEqual(res.status, 413, res)
        self.assertTrue(res.json()["message"])
        self.assertEqual(self.s.get("/documents/AAAAAAAAAAAA").status, 404)

    # ---- negotiation, the JSON read, file names --------------------------------------------------

    def test_view_gives_text_to_programs_and_the_page_to_browsers(self):
        key = self.s.create_ok(AWKWARD)["id"]
        for accept in (None, "*/*", "application/json, */*;q=0.5", "text/plain"):
            res = self.s.get(f"/{key}", headers={"Accept": accept} if accept else {})
            self.assertEqual(res.status, 200, res)
            self.assertEqual(res.body, AWKWARD.encode())
            self.assertTrue(res.header("Content-Type").startswith("text/plain"), res)
            self.assertEqual(res.header("Vary"), "Accept")
        browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        res = self.s.get(f"/{key}", headers={"Accept": browser})
        self.assertTrue(res.header("Content-Type").startswith("text/html"), res)
        self.assertEqual(res.header("Vary"), "Accept")

    def test_api_read_gives_metadata_and_never_the_token(self):
        created = self.s.create_ok("#!/usr/bin/env python3\nprint(1)\n", ttl="1h")
        key = created["id"]
        doc = self.s.get(f"/api/v1/pastes/{key}").json()
        self.assertEqual(doc["id"], key)
        self.assertEqual(doc["size"], 32)
        self.assertEqual(doc["language"], "python")
        self.assertEqual(doc["expires_at"], created["expires_at"])
        self.assertTrue(doc["created_at"] and doc["raw_url"].endswith(f"/raw/{key}"))
        self.assertNotIn("content", doc)
        self.assertNotIn(created["delete_token"], json.dumps(doc))
        doc = self.s.get(f"/api/v1/pastes/{key}?content=1").json()
        self.assertEqual(doc["content"], "#!/usr/bin/env python3\nprint(1)\n")
        self.assertEqual(self.s.get("/api/v1/pastes/AAAAAAAAAAAA").status, 404)

    def test_a_file_name_puts_the_language_in_the_link(self):
        res = self.s.request("POST", "/", body=multipart("file", "fn main() {}\n", "x.rs"),
                             headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                                      "Accept": "*/*"})
        self.assertEqual(res.status, 201, res)
        self.assertRegex(res.text.strip(), rf"/{ID}\.rs$")
        res = self.s.create("fn main() {}\n", headers={"Sluice-Filename": "src/main.rs"})
        self.assertRegex(res.json()["url"], rf"/{ID}\.rs$")
        page = self.s.get(res.json()["url"].split(self.s.url)[1], headers={"Accept": "text/html"})
        self.assertIn("Rust", page.text)

    def test_the_edge_keeps_the_page_and_the_text_apart(self):
        """Through Varnish with deploy/varnish/sluice.vcl: a curl and a browser each get their own
        variant of /{id}, from the edge once cached."""
        varnishd = shutil.which("varnishd") or "/usr/sbin/varnishd"
        if not os.path.exists(varnishd):
            self.skipTest("varnish is not installed (scripts/install-deps.sh test)")
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work, True)
        # varnishd's worker runs as its own user, which must reach the working directory.
        os.chmod(work, 0o755)
        with open(os.path.join(ROOT, "deploy", "varnish", "sluice.vcl")) as f:
            vcl = f.read().replace('.port = "8080";', f'.port = "{self.s.port}";')
        with open(os.path.join(work, "sluice.vcl"), "w") as f:
            f.write(vcl)
        port = free_port()
        log = open(os.path.join(work, "varnishd.log"), "wb")
        self.addCleanup(log.close)
        edge = subprocess.Popen(
            [varnishd, "-F", "-a", f"127.0.0.1:{port}", "-f", os.path.join(work, "sluice.vcl"),
             "-n", os.path.join(work, "n"), "-s", "malloc,16m", "-p", "default_ttl=0",
             "-p", "default_grace=0", "-p", "default_keep=0"],
            stdout=subprocess.DEVNULL, stderr=log)
        self.addCleanup(edge.wait, 30)
        self.addCleanup(edge.terminate)

        def get(path, accept):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", path, headers={"Accept": accept})
                res = conn.getresponse()
                return res.status, res.getheader("Content-Type") or "", res.getheader(
                    "X-Cache"), res.read()
            finally:
                conn.close()

        deadline = time.monotonic() + 60
        while True:
            try:
                if get("/healthz", "*/*")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or edge.poll() is not None:
                with open(os.path.join(work, "varnishd.log"), errors="replace") as f:
                    self.fail(f"varnishd did not start: {f.read()[-2000:]}")
            time.sleep(0.2)
        key = self.s.create_ok(AWKWARD)["id"]
        browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        for round_ in ("MISS", "HIT"):
            status, ctype, cache, body = get(f"/{key}", "*/*")
            self.assertEqual((status, cache), (200, round_))
            self.assertTrue(ctype.startswith("text/plain"), ctype)
            self.assertEqual(body, AWKWARD.encode())
            status, ctype, cache, body = get(f"/{key}", browser)
            self.assertEqual((status, cache), (200, round_))
            self.assertTrue(ctype.startswith("text/html"), ctype)
        # Another browser's Accept string is the same variant, not a new one.
        self.assertEqual(get(f"/{key}", "text/html")[2], "HIT")
        self.assertTrue(get(f"/{key}", "text/html")[1].startswith("text/html"))
        self.assertTrue(get(f"/{key}", "application/json")[1].startswith("text/plain"))

        # The page's language is a variant too (docs/translations.md): Accept-Language, and of the
        # cookies only the switch's, which Varnish passes on.
        def lang_of(headers):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", f"/{key}", headers={"Accept": browser, **headers})
                res = conn.getresponse()
                return re.search(r'<html lang="([^"]+)">', res.read().decode()).group(1)
            finally:
                conn.close()

        for _ in range(2):
            self.assertEqual("de", lang_of({"Accept-Language": "de"}))
            self.assertEqual("en", lang_of({}))
            self.assertEqual("fr", lang_of({"Accept-Language": "de",
                                             "Cookie": "other=1; sluice_lang=fr; x=2"}))

    # ---- every awkward byte through every create and read route -----------------------------

    def test_awkward_bytes_round_trip_through_every_route(self):
        creates = {
            "raw api": lambda: self.s.create_ok(AWKWARD)["id"],
            "json api": lambda: self.s.create_ok(
                json.dumps({"content": AWKWARD}), headers={"Content-Type": "application/json"})["id"],
            "haste": lambda: self.s.request("POST", "/documents", body=AWKWARD).json()["key"],
            "form file": lambda: re.search(ID, self.s.request(
                "POST", "/", body=multipart("file", AWKWARD, "a.txt"),
                headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                         "Accept": "*/*"}).text).group(0),
        }
        want = AWKWARD.encode()
        for name, create in creates.items():
            with self.subTest(name):
                key = create()
                self.assertEqual(self.raw(key), want)
                self.assertEqual(self.s.get(f"/{key}").body, want)
                self.assertEqual(self.s.get(f"/{key}.txt").body, want)
                self.assertEqual(self.s.get(f"/documents/{key}").json()["data"], AWKWARD)
                self.assertEqual(self.s.get(f"/api/v1/pastes/{key}?content=1").json()["content"],
                                 AWKWARD)

    # ---- real clients ----------------------------------------------------------------------

    def test_curl_and_wget_print_the_text(self):
        key = self.s.create_ok(AWKWARD)["id"]
        for argv in (["curl", "-sS", "--fail"], ["wget", "-qO-"]):
            tool = shutil.which(argv[0])
            if not tool:
                self.skipTest(f"{argv[0]} is not installed (scripts/install-deps.sh test)")
            with self.subTest(argv[0]):
                out = subprocess.run(argv + [f"{self.s.url}/{key}"], capture_output=True,
                                     timeout=30, check=True).stdout
                self.assertEqual(out, AWKWARD.encode())

    def test_pastebinit_with_the_shipped_config(self):
        if not shutil.which("pastebinit"):
            self.skipTest("pastebinit is not installed (scripts/install-deps.sh test)")
        home = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, home)
        conf_dir = os.path.join(home, ".pastebin.d")
        os.makedirs(conf_dir)
        with open(os.path.join(ROOT, "contrib", "pastebinit", "sluice.conf")) as f:
            conf = f.read()
        host = f"127.0.0.1:{self.s.port}"
        # The shipped file names a placeholder host over HTTPS; this server is plain HTTP.
        conf = conf.replace("basename = paste.example", f"basename = {host}")
        conf = re.sub(r"(?m)^https = .*\n", "", conf)
        with open(os.path.join(conf_dir, "sluice.conf"), "w") as f:
            f.write(conf)
        # pastebinit strips trailing whitespace from what it reads, so the text ends in a letter.
        text = AWKWARD.rstrip() + "\nend"
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"))
        out = subprocess.run(["pastebinit", "-b", host, "-f", "python"], input=text.encode(),
                             capture_output=True, timeout=30, env=env)
        self.assertEqual(out.returncode, 0, out)
        url = out.stdout.decode().strip()
        self.assertRegex(url, rf"^http://{re.escape(host)}/{ID}$")
        self.assertEqual(self.raw(url.rsplit("/", 1)[1]), text.encode())

    def test_hastebin_gen(self):
        module = os.path.join(ROOT, "node_modules", "hastebin-gen")
        if not shutil.which("node") or not os.path.isdir(module):
            self.skipTest("hastebin-gen is not installed (scripts/install-deps.sh test)")
        script = ("const haste = require(process.argv[1]);"
                  "haste(process.argv[3], {url: process.argv[2], extension: 'py'})"
                  ".then(u => console.log(u), e => { console.error(e); process.exit(1); });")
        out = subprocess.run(["node", "-e", script, module, self.s.url, "print('hi')\n"],
                             capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 0, out)
        url = out.stdout.decode().strip()
        self.assertRegex(url, rf"^{re.escape(self.s.url)}/{ID}\.py$")
        page = self.s.get(url[len(self.s.url):], headers={"Accept": "text/html"})
        self.assertEqual(page.status, 200)
        self.assertIn("Python", page.text)
        self.assertIn("hl-", page.text)
        self.assertEqual(self.raw(url[len(self.s.url) + 1:-3]), b"print('hi')\n")


if __name__ == "__main__":
    unittest.main()
