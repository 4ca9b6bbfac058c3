"""End-to-end encrypted pastes (docs/encryption.md) against the real binary: `sluice paste
--encrypt` and `sluice get URL#KEY` round trips (with and without a password, with burn, awkward
bytes, 1 byte and 1 MB), the published vectors decrypted by `sluice get` from a real server, the
server's reads of an envelope (JSON, never a page or a rendering), its 400 for malformed envelopes,
and moderation by id with `sluice admin show ID --key KEY`.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_encrypted
"""

import json
import os
import re
import subprocess
import unittest

from sluice_harness import SluiceTestCase, clean_env, sluice_bin

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "vectors", "envelope_v1.json")
LINK = re.compile(r"^(http://127\.0\.0\.1:\d+/([0-9A-Za-z]{12}))#([A-Za-z0-9_-]{43})$")
BROWSER = {"Accept": "text/html,application/xhtml+xml"}
AWKWARD = b"\xef\xbb\xbfBOM, CRLF\r\nNUL \x00, 4-byte \xf0\x9f\x98\x80, lone CR\r, no final newline"


def vectors():
    with open(VECTORS) as f:
        return json.load(f)


def run(args, data=None, env=None, timeout=60):
    return subprocess.run([sluice_bin(), *args], input=data, capture_output=True,
                          env=clean_env(env), timeout=timeout)


class EncryptedPasteTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = cls.start_class_server(["--max-paste-bytes", "2000000"])

    def paste(self, data, *flags, env=None):
        res = run(["paste", "--server", self.srv.url, "--encrypt", *flags], data=data, env=env)
        self.assertEqual(res.returncode, 0, res.stderr)
        link = res.stdout.decode().strip()
        m = LINK.match(link)
        self.assertTrue(m, link)
        return link, m.group(2), m.group(3)

    def get(self, link, env=None):
        return run(["get", link], env=env)

    def test_the_cli_round_trips_every_awkward_byte_one_byte_and_a_megabyte(self):
        for data in (AWKWARD, b"x", os.urandom(500_000).hex().encode()[:1_000_000]):
            link, paste_id, key = self.paste(data)
            got = self.get(link)
            self.assertEqual(got.returncode, 0, got.stderr)
            self.assertEqual(got.stdout, data)
            # What the server holds is an envelope, not the text.
            raw = self.srv.get(f"/raw/{paste_id}")
            self.assertStatus(raw, 200)
            if len(data) > 16:  # one byte may well occur in base64 by chance
                self.assertNotIn(data[:64], raw.body)
            self.assertNotIn(key.encode(), raw.body)

    def test_a_password_is_needed_and_a_wrong_one_is_refused_plainly(self):
        link, _, _ = self.paste(AWKWARD, "--password", env={"SLUICE_PASSWORD": "hunter2 \u00e4"})
        ok = self.get(link, env={"SLUICE_PASSWORD": "hunter2 \u00e4"})
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(ok.stdout, AWKWARD)
        wrong = self.get(link, env={"SLUICE_PASSWORD": "hunter3"})
        self.assertEqual(wrong.returncode, 1)
        self.assertEqual(wrong.stdout, b"")
        self.assertIn(b"wrong password", wrong.stderr)
        # No terminal and no SLUICE_PASSWORD: said so, nothing printed.
        none = subprocess.run([sluice_bin(), "get", link], capture_output=True, env=clean_env(),
                              stdin=subprocess.DEVNULL, timeout=60, start_new_session=True)
        self.assertEqual(none.returncode, 1)
        self.assertIn(b"password", none.stderr)

    def test_a_damaged_link_or_envelope_fails_with_a_message_never_garbage(self):
        link, paste_id, key = self.paste(b"the text\n")
        flipped = key[:-2] + ("A" if key[-2] != "A" else "B") + key[-1]
        for bad, why in ((link.split("#")[0] + "#" + flipped, b"not this paste"),
                         (link[:-1], b"damaged"), (link.split("#")[0], b"no key")):
            got = self.get(bad)
            self.assertEqual(got.returncode, 1, got)
            self.assertEqual(got.stdout, b"")
            self.assertIn(why, got.stderr)

    def test_burn_after_reading_is_claimed_once_by_sluice_get(self):
        # --ttl and --encrypt together make one query (?ttl=1h&encrypted=1).
        link, _, _ = self.paste(b"an hour\n", "--ttl", "1h")
        self.assertEqual(self.get(link).stdout, b"an hour\n")
        # A burn paste through the JSON API, as the page sends it.
        sealed = vectors()["vectors"][0]
        res = self.srv.request("POST", "/api/v1/pastes", headers={"Content-Type": "application/json"},
                               body=json.dumps({"content": sealed["envelope"], "encrypted": True,
                                                "burn": True}))
        self.assertStatus(res, 201)
        doc = res.json()
        self.assertTrue(doc["encrypted"] and doc["burn"])
        self.assertJsonError(self.srv.get(f"/raw/{doc['id']}"), 409, "burn_after_reading")
        page = self.srv.get(f"/{doc['id']}", headers=BROWSER)
        self.assertStatus(page, 200)
        self.assertEqual(page.header("Cache-Control"), "no-store")
        self.assertIn(b'data-burn="1"', page.body)
        # Without --claim a burn paste is refused, so nothing is spent.
        self.assertNotEqual(self.get(doc["url"] + "#" + sealed["key"]).returncode, 0)
        got = run(["get", "--claim", doc["url"] + "#" + sealed["key"]])
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(got.stdout, bytes.fromhex(sealed["plaintext_hex"]))
        self.assertNotEqual(run(["get", "--claim", doc["url"] + "#" + sealed["key"]]).returncode,
                            0)

    def test_every_published_vector_opens_through_a_real_server(self):
        for v in vectors()["vectors"]:
            with self.subTest(v["name"]):
                res = self.srv.request("POST", "/api/v1/pastes?encrypted=1", body=v["envelope"])
                self.assertStatus(res, 201)
                env = {"SLUICE_PASSWORD": v["password"]} if v["password"] else None
                got = self.get(res.json()["url"] + "#" + v["key"], env=env)
                self.assertEqual(got.returncode, 0, got.stderr)
                self.assertEqual(got.stdout, bytes.fromhex(v["plaintext_hex"]))

    def test_reads_of_an_envelope_are_json_never_a_rendering(self):
        v = vectors()["vectors"][1]
        res = self.srv.request("POST", "/api/v1/pastes?encrypted=1&lang=python", body=v["envelope"])
        self.assertStatus(res, 201)
        doc = res.json()
        self.assertNotIn("?lang", doc["url"])  # nothing about the text travels in the link
        for path in (f"/{doc['id']}", f"/raw/{doc['id']}"):
            r = self.srv.get(path)  # curl: no Accept
            self.assertStatus(r, 200)
            self.assertTrue(r.header("Content-Type").startswith("application/json"), r)
            self.assertEqual(r.body.decode(), v["envelope"])
            self.assertEqual(r.header("X-Robots-Tag"), "noindex")
            self.assertIsNone(r.header("X-Sluice-Rung"))
        meta = self.srv.get(f"/api/v1/pastes/{doc['id']}?content=1").json()
        self.assertTrue(meta["encrypted"])
        self.assertNotIn("language", meta)
        self.assertEqual(meta["content"], v["envelope"])
        page = self.srv.get(f"/{doc['id']}", headers=BROWSER)
        self.assertStatus(page, 200)
        self.assertIsNone(page.header("X-Sluice-Rung"))
        self.assertIn(b'integrity="sha256-', page.body)
        self.assertIn(b"needs JavaScript", page.body)
        self.assertNotIn(v["envelope"].encode()[40:80], page.body)
        # A plain paste with the same text is a plain paste: the flag is the creator's, not a guess.
        plain = self.srv.create_ok(v["envelope"].encode())
        r = self.srv.get(f"/raw/{plain['id']}")
        self.assertTrue(r.header("Content-Type").startswith("text/plain"), r)

    def test_malformed_envelopes_are_refused_with_400_and_a_reason(self):
        good = json.loads(vectors()["vectors"][4]["envelope"])

        def variant(**changes):
            e = dict(good)
            e.update(changes)
            return json.dumps({k: v for k, v in e.items() if v != "DROP"})

        cases = {
            "plain text": "hello",
            "wrong version": variant(v=2),
            "truncated": variant()[:-10],
            "no ct": variant(ct="DROP"),
            "extra field": variant(x=1),
            "oversized iv": variant(iv="A" * 40),
            "invalid base64url": variant(ct="!!!!" + good["ct"]),
            "padded base64": variant(iv=good["iv"] + "=="),
            "iterations too high": variant(kdf=dict(good["kdf"], iter=10_000_000)),
            "unknown kdf": variant(kdf=dict(good["kdf"], name="argon2id")),
            "nested deeply": '{"kdf":' + "[" * 5000 + "]" * 5000 + "}",
        }
        for name, body in cases.items():
            with self.subTest(name):
                res = self.srv.request("POST", "/api/v1/pastes?encrypted=1", body=body)
                doc = self.assertJsonError(res, 400, "bad_envelope")
                self.assertIn("envelope", doc["error"])
                res = self.srv.request("POST", "/api/v1/pastes",
                                       headers={"Content-Type": "application/json"},
                                       body=json.dumps({"content": body, "encrypted": True}))
                self.assertJsonError(res, 400, "bad_envelope")
        # A tampered tag has the right shape: the server stores it (it cannot tell), and the
        # reader says that it does not open.
        ct = bytearray(good["ct"], "ascii")
        ct[-3] = ord("A") if ct[-3] != ord("A") else ord("B")
        res = self.srv.request("POST", "/api/v1/pastes?encrypted=1",
                               body=variant(ct=ct.decode()))
        self.assertStatus(res, 201)
        got = self.get(res.json()["url"] + "#" + vectors()["vectors"][4]["key"],
                       env={"SLUICE_PASSWORD": vectors()["vectors"][4]["password"]})
        self.assertEqual(got.returncode, 1)
        self.assertEqual(got.stdout, b"")
        self.assertIn(b"cannot decrypt", got.stderr)

    def test_an_envelope_over_the_paste_limit_is_413_from_the_headers(self):
        # Headers only: the refusal comes before any of the body is read (a client still sending
        # a body the server will never read may see its pipe broken instead of the answer).
        res = self.srv.request("POST", "/api/v1/pastes?encrypted=1", content_length=2_000_001)
        self.assertStatus(res, 413)

    def test_moderation_is_by_id_and_the_operator_decrypts_locally_with_the_reported_key(self):
        link, paste_id, key = self.paste(b"reported text\n")
        show = run(["admin", "--admin", f"http://127.0.0.1:{self.srv.admin_port}",
                    "--token-file", self.srv.admin_token_file, "show", paste_id, "--key", key])
        self.assertEqual(show.returncode, 0, show.stderr)
        self.assertEqual(show.stdout, b"reported text\n")
        self.assertIn(b'"encrypted": true', show.stderr)
        down = run(["admin", "--admin", f"http://127.0.0.1:{self.srv.admin_port}",
                    "--token-file", self.srv.admin_token_file, "takedown", paste_id])
        self.assertEqual(down.returncode, 0, down.stderr)
        self.assertJsonError(self.srv.get(f"/raw/{paste_id}"), 451)
        self.assertStatus(self.srv.get(f"/{paste_id}", headers=BROWSER), 451)
        got = self.get(link)
        self.assertEqual(got.returncode, 1)
        self.assertIn(b"451", got.stderr)


if __name__ == "__main__":
    unittest.main()
