"""Fork and diff, and Markdown's rendered view (docs/sharing.md): a fork records its parent and
its diff is right; burn pastes are never forked; hostile Markdown is rendered safe; a diff of
two 1 MB pastes that differ everywhere and deeply nested Markdown answer within the render
timeout plus a grace, and leave the workers free.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_fork_markdown
"""

import html
import json
import re
import time
import unittest

from promtext import metric, parse_metrics
from sluice_harness import SluiceTestCase

BROWSER = {"Accept": "text/html,application/xhtml+xml"}


def form(fields):
    boundary = "xyzzy"
    body = "".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                   for k, v in fields.items()) + f"--{boundary}--\r\n"
    return body.encode(), {**BROWSER, "Content-Type": f"multipart/form-data; boundary={boundary}"}


def diff_text(page):
    """The unified diff a diff page shows, as text."""
    pres = re.findall(r'<pre class="code diff" id="code">(.*?)</pre>', page, re.S)
    assert len(pres) == 1, page
    return html.unescape(re.sub(r"<[^>]+>", "", pres[0]))


def apply(parent, diff):
    """Applies a unified diff to `parent` (what a reader trusts the diff to say)."""
    old = parent.splitlines()
    out, nxt = [], 0
    lines = diff.splitlines()
    i = 2  # past --- and +++
    while i < len(lines):
        m = re.match(r"@@ -(\d+),(\d+) \+\d+,\d+ @@", lines[i])
        assert m, lines[i]
        start, count = int(m.group(1)), int(m.group(2))
        first = start if count == 0 else start - 1
        out += old[nxt:first]
        nxt = first
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            mark, text = lines[i][:1], lines[i][1:]
            if mark == " ":
                out.append(old[nxt])
                nxt += 1
            elif mark == "-":
                nxt += 1
            elif mark == "+":
                out.append(text)
            i += 1
    out += old[nxt:]
    return "".join(line + "\n" for line in out)


class ForkAndMarkdownTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server()

    def test_a_fork_starts_prefilled_records_its_parent_and_its_diff_is_right(self):
        s = self.s
        parent_text = "".join(f"line {i} <&>\n" for i in range(1, 60))
        parent = s.create_ok(parent_text.encode())
        page = s.get(f"/new?from={parent['id']}", headers=BROWSER)
        self.assertStatus(page, 200)
        self.assertEqual(page.header("Cache-Control"), "no-store")
        area = re.search(r"<textarea[^>]*>(.*?)</textarea>", page.text, re.S).group(1)
        self.assertEqual(html.unescape(area), parent_text)
        self.assertIn(f'name="parent" value="{parent["id"]}"', page.text)

        child_text = parent_text.replace("line 7 <&>", "line seven").replace(
            "line 40 <&>\n", "") + "appended\n"
        body, headers = form({"content": child_text, "parent": parent["id"], "lang": "text"})
        created = s.request("POST", "/", body=body, headers=headers)
        self.assertStatus(created, 201)
        self.assertIn(f'Forked from <a href="/{parent["id"]}">', created.text)
        child_id = created.header("Location").rsplit("/", 1)[1].split("?")[0]

        view = s.get(f"/{child_id}", headers=BROWSER)
        self.assertIn(f'href="/{child_id}/diff"', view.text)
        self.assertIn('id="fork" href="/new?from=', view.text)
        meta = s.get(f"/api/v1/pastes/{child_id}").json()
        self.assertEqual(meta["parent"], parent["id"])
        self.assertNotIn("parent", s.get(f"/api/v1/pastes/{parent['id']}").json())

        diff = s.get(f"/{child_id}/diff", headers=BROWSER)
        self.assertStatus(diff, 200)
        self.assertEqual(diff.header("X-Sluice-Rung"), "highlighted")
        # It holds the parent's text: revalidated on every reuse, so a parent's delete wins.
        self.assertEqual(diff.header("Cache-Control"), "no-cache")
        self.assertIn('class="hl-oldfile"', diff.text)
        self.assertIn('class="hl-newfile"', diff.text)
        self.assertIn('id="L1"', diff.text)  # a diff's lines can be linked like any view's
        text = diff_text(diff.text)
        self.assertTrue(text.startswith(f"--- {parent['id']}\n+++ {child_id}\n"), text)
        self.assertIn("-line 7 <&>\n+line seven\n", text)
        self.assertEqual(apply(parent_text, text), child_text)
        again = s.get(f"/{child_id}/diff", headers=BROWSER)
        self.assertEqual(again.header("X-Sluice-Rung"), "cached")
        self.assertStatus(s.get(f"/{child_id}/diff", headers={"If-None-Match": diff.header("ETag")}),
                          304)

        # The JSON create names a parent too; a paste without one has no diff.
        res = s.request("POST", "/api/v1/pastes", body=json.dumps(
            {"content": parent_text, "parent": parent["id"]}),
            headers={"Content-Type": "application/json"})
        self.assertEqual(res.json()["parent"], parent["id"])
        same = s.get(f"/{res.json()['id']}/diff", headers=BROWSER)
        self.assertIn('id="same"', same.text)
        self.assertJsonError(s.get(f"/{parent['id']}/diff"), 404, "no_parent")
        self.assertStatus(s.delete(parent["id"], parent["delete_token"]), 204)
        self.assertJsonError(s.get(f"/{child_id}/diff", headers={
            "If-None-Match": diff.header("ETag")}), 404, "parent_gone")
        self.assertStatus(s.get(f"/raw/{child_id}"), 200)  # the fork itself stays

    def test_a_burn_paste_is_never_forked_or_named_as_a_parent(self):
        s = self.s
        burn = s.request("POST", "/api/v1/pastes?max_views=3", body=b"secret").json()
        self.assertJsonError(s.get(f"/new?from={burn['id']}"), 409, "not_forkable")
        page = s.get(f"/new?from={burn['id']}", headers=BROWSER)
        self.assertStatus(page, 409)
        self.assertNotIn("secret", page.text)
        for parent in (burn["id"], "nosuchpaste1", "x"):
            self.assertJsonError(s.request("POST", f"/api/v1/pastes?parent={parent}", body=b"y"),
                                 400, "bad_parent")
        self.assertJsonError(s.get(f"/{burn['id']}/rendered"), 409, "not_forkable")
        self.assertJsonError(s.get(f"/{burn['id']}/diff"), 409, "not_forkable")
        # Nothing was spent on the way.
        claimed = s.request("POST", f"/api/v1/pastes/{burn['id']}/claim", body=b"").json()
        self.assertEqual(claimed["views_left"], 2)

    def test_hostile_markdown_is_rendered_safe(self):
        s = self.s
        hostile = ("# Title <script>alert(1)</script>\n\n<script>alert(2)</script>\n"
                   "<img src=x onerror=alert(3)>\n\n[click](javascript:alert(4)) "
                   "[ok](https://example.com) https://auto.example.org\n\n"
                   "![pixel](https://tracker.example/p.gif) ![b](//remote/x.png)\n\n"
                   "&lt;b&gt; &amp;amp; &#x3c;script&#x3e;\n\n"
                   "| a | b |\n|---|---|\n| ~~x~~ | y |\n\n- [x] done\n- [ ] todo\n")
        paste = s.request("POST", "/api/v1/pastes?lang=markdown", body=hostile.encode()).json()
        view = s.get(f"/{paste['id']}?lang=markdown", headers=BROWSER)
        self.assertIn(f'href="/{paste["id"]}/rendered"', view.text)
        res = s.get(f"/{paste['id']}/rendered", headers=BROWSER)
        self.assertStatus(res, 200)
        self.assertIn("img-src 'self'", res.header("Content-Security-Policy"))
        article = re.search(r'<article class="markdown" id="rendered">(.*?)</article>',
                            res.text, re.S).group(1)
        for bad in ("<script", "onerror", "javascript:", "<img", "tracker.example/p.gif\" src"):
            self.assertNotIn(bad, article)
        self.assertIn("<table>", article)
        self.assertIn("<del>x</del>", article)
        self.assertIn("&lt;script&gt;", article)
        self.assertEqual(len(re.findall(r"<a ", article)),
                         len(re.findall(r'<a rel="nofollow noopener ugc" href=', article)))
        self.assertIn('href="https://tracker.example/p.gif">pixel</a>', article)
        # A .md link is Markdown's source view, with the rendered one beside it.
        md = s.get(f"/{paste['id']}.md", headers=BROWSER)
        self.assertIn(f'href="/{paste["id"]}/rendered"', md.text)


class PathologicalRenderTest(SluiceTestCase):
    RENDER_TIMEOUT = 1.0

    def slots_free_within(self, server, since, bound):
        while True:
            metrics = parse_metrics(server.get("/metrics").text)
            if metric(metrics, "sluice_pool_in_use", pool="highlight") == 0:
                return
            self.assertLess(time.monotonic() - since, bound, "render slots still held")
            time.sleep(0.05)

    def test_two_large_pastes_differing_everywhere_and_deep_markdown_are_bounded(self):
        server = self.server(args=["--render-timeout", f"{self.RENDER_TIMEOUT:g}s"])
        # Lines that never repeat and share nothing: the diff's work is the product of the two.
        a = "".join(f"a{i:07d} {'x' * 10}\n" for i in range(50000))[:990000]
        b = "".join(f"b{i:07d} {'y' * 10}\n" for i in range(50000))[:990000]
        parent = server.create_ok(a.encode())
        child = server.request("POST", f"/api/v1/pastes?parent={parent['id']}", body=b.encode())
        self.assertStatus(child, 201)
        child_id = child.json()["id"]
        sent = time.monotonic()
        res = server.get(f"/{child_id}/diff", headers=BROWSER, timeout=60)
        took = time.monotonic() - sent
        self.assertStatus(res, 200)
        self.assertLess(took, self.RENDER_TIMEOUT + 3.0, f"the diff answered after {took:.1f} s")
        if res.header("X-Sluice-Rung").startswith("plain"):
            self.assertIn('id="shed"', res.text)
            self.assertEqual(res.header("Cache-Control"), "no-cache")
        self.slots_free_within(server, sent, self.RENDER_TIMEOUT + 3.0)

        deep = ("- " * 10000 + "deep\n") + ("> " * 10000 + "deeper\n") + "[" * 50000 + "\n"
        md = server.request("POST", "/api/v1/pastes", body=deep.encode()).json()
        sent = time.monotonic()
        res = server.get(f"/{md['id']}/rendered", headers=BROWSER, timeout=60)
        self.assertStatus(res, 200)
        self.assertLess(time.monotonic() - sent, self.RENDER_TIMEOUT + 3.0)
        self.slots_free_within(server, sent, self.RENDER_TIMEOUT + 3.0)
        # The workers are free for an ordinary view.
        small = server.create_ok(b"def f():\n    return 1\n")
        view = server.get(f"/{small['id']}?lang=python", headers=BROWSER)
        self.assertEqual(view.header("X-Sluice-Rung"), "highlighted")


if __name__ == "__main__":
    unittest.main()
