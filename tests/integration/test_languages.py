"""Pages in the reader's language (docs/translations.md): chosen by Accept-Language, kept by the
footer's switch in a cookie, never mixed up by the caches of finished pages; the JSON API stays
English.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_languages
"""

import re
import unittest
import urllib.parse

from sluice_harness import SluiceTestCase

BROWSER = {"Accept": "text/html,application/xhtml+xml"}


def html_lang(page):
    return re.search(r'<html lang="([^"]+)">', page).group(1)


class LanguagesTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server()

    def view(self, path, **headers):
        return self.s.get(path, headers={**BROWSER, **headers})

    def test_accept_language_chooses_the_page_language(self):
        for accept, tag, words in [("de-CH, en;q=0.5", "de", "Neues Paste"),
                                   ("fr;q=0.4, ja;q=0.9", "ja", "新規ペースト"),
                                   ("zh-CN,zh;q=0.9", "zh-Hans", "新建粘贴"),
                                   ("es-419", "es", "Nuevo paste"),
                                   ("pt-BR, *;q=0.1", "en", "New paste")]:
            page = self.view("/", **{"Accept-Language": accept})
            self.assertStatus(page, 200)
            self.assertEqual(tag, html_lang(page.text), accept)
            self.assertIn(f"<h1>{words}</h1>", page.text, accept)
            self.assertIn("Accept-Language", page.header("Vary"))
            self.assertIn("Cookie", page.header("Vary"))

    def test_the_switch_sets_a_cookie_that_wins_over_accept_language(self):
        created = self.s.create_ok(b"print('hi')\n")
        path = "/" + created["id"]
        body = urllib.parse.urlencode({"ui": "fr", "back": path})
        switched = self.s.request("POST", "/settings/language", body=body, headers={
            "Content-Type": "application/x-www-form-urlencoded"})
        self.assertStatus(switched, 303)
        self.assertEqual(path, switched.header("Location"))
        cookie = switched.header("Set-Cookie")
        self.assertTrue(cookie.startswith("sluice_lang=fr;"), cookie)
        page = self.view(path, **{"Accept-Language": "de", "Cookie": cookie.split(";")[0]})
        self.assertEqual("fr", html_lang(page.text))
        self.assertIn("Nouveau paste", page.text)

    def test_the_switch_refuses_unknown_languages_and_foreign_destinations(self):
        refused = self.s.request("POST", "/settings/language", body="ui=xx&back=/", headers={
            "Content-Type": "application/x-www-form-urlencoded", **BROWSER})
        self.assertStatus(refused, 400)
        # A browser drops tabs and line breaks from a URL and reads a backslash as "/": each of
        # these would leave for evil.example, or break the header (a NUL).
        for back in ["https://evil.example/", "//evil.example/", "/\\evil.example", "evil",
                     "/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example",
                     "/ /evil.example", "/x\\y", "/\x00x", "/\x7f"]:
            body = urllib.parse.urlencode({"ui": "de", "back": back})
            switched = self.s.request("POST", "/settings/language", body=body, headers={
                "Content-Type": "application/x-www-form-urlencoded"})
            self.assertStatus(switched, 303)
            self.assertEqual("/", switched.header("Location"), back)

    def test_a_cached_view_is_never_served_in_another_language(self):
        # The view's page is made once per paste and thread and then shared (prepared_answers.h):
        # read in German first, an English reader must still get English, and the other way.
        created = self.s.create_ok(b"def f():\n    return 1\n" * 5)
        path = "/" + created["id"]
        order = ["de", "en", "ja", "en", "de", "fr", "zh-CN", "en"]
        for _ in range(3):
            for accept in order:
                page = self.view(path, **{"Accept-Language": accept})
                self.assertStatus(page, 200)
                want = {"zh-CN": "zh-Hans"}.get(accept, accept)
                self.assertEqual(want, html_lang(page.text), f"{accept} after others")
                if accept == "en":
                    self.assertIn(">Raw</a>", page.text)
                    self.assertNotIn("Rohtext", page.text)
                elif accept == "de":
                    self.assertIn(">Rohtext</a>", page.text)

    def test_a_page_in_one_language_does_not_revalidate_another(self):
        created = self.s.create_ok(b"x = 1\n")
        path = "/" + created["id"]
        english = self.view(path, **{"Accept-Language": "en"})
        german = self.view(path, **{"Accept-Language": "de"})
        self.assertNotEqual(english.header("ETag"), german.header("ETag"))
        stale = self.view(path, **{"Accept-Language": "de", "If-None-Match": english.header("ETag")})
        self.assertStatus(stale, 200)
        fresh = self.view(path, **{"Accept-Language": "de", "If-None-Match": german.header("ETag")})
        self.assertStatus(fresh, 304)

    def test_error_pages_are_translated_and_the_api_stays_english(self):
        page = self.view("/AAAAAAAAAAAA", **{"Accept-Language": "es"})
        self.assertStatus(page, 404)
        self.assertEqual("es", html_lang(page.text))
        self.assertIn("No existe ese paste", page.text)
        api = self.s.get("/api/v1/pastes/AAAAAAAAAAAA", headers={"Accept-Language": "es"})
        self.assertStatus(api, 404)
        self.assertEqual("not_found", api.json()["reason"])
        self.assertNotIn("paste", api.header("Vary") or "")
        self.assertIsNone(re.search(r"[^\x00-\x7f]", api.text))


if __name__ == "__main__":
    unittest.main()
