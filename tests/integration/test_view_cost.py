"""What a view costs (docs/overload.md, "What a view costs"): a page is a bounded multiple of its
paste whatever the paste holds, it is made once and shared, the render cache keeps its other
entries, the fork page stays small, and a client looping on large pages spends its read budget.

The attacks are the ones that found the problem: a paste of a million line breaks (a 37 MB page
before), one line of a million '<' (4 MB escaped), and one line of nested Markdown quotes (27 MB
rendered, which emptied the render cache). Timings are not asserted here: bench/view_cost.py
measures what the attacks cost a bystander.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_view_cost
"""

import threading
import unittest

from loadgen import rss_bytes
from rawhttp import RawConnection
from sluice_harness import SluiceTestCase

BROWSER = {"Accept": "text/html"}
MIB = 1 << 20
# The defaults: view_max_bytes (2 MiB of lines) plus the page around them.
PAGE_BOUND = 2 * MIB + 64 * 1024
NEWLINES = b"\n" * 999_999
LESS_THAN = b"<" * 999_999
QUOTES = b">" * 999_990 + b" deep\n"


class ViewCostTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        # The production read budget (50 a second, burst 50): the harness relaxes it by default.
        cls.s = cls.start_class_server(["--ip-read-rate", "50", "--ip-read-burst", "50"])

    def create(self, body):
        created = self.s.request("POST", "/api/v1/pastes", body=body, timeout=30)
        self.assertStatus(created, 201)
        return created.json()["id"]

    def view(self, path, source=None):
        conn = RawConnection("127.0.0.1", self.s.port, timeout=60, source=source)
        try:
            conn.send_headers("GET", path, {"Accept": "text/html"})
            return conn.read_response()
        finally:
            conn.sock.close()

    def test_a_paste_of_line_breaks_is_a_bounded_page_that_says_it_is_cut(self):
        paste_id = self.create(NEWLINES)
        for lang in ("", "?lang=python", "?lang=text"):
            page = self.view(f"/{paste_id}{lang}", source="127.0.1.1")
            self.assertStatus(page, 200)
            self.assertLess(len(page.body), PAGE_BOUND, lang)
            self.assertIn(b'id="cut"', page.body)
            self.assertIn(b"first 20000 lines", page.body)
            self.assertIn(f'href="/raw/{paste_id}"'.encode(), page.body)
            self.assertIn(b'id="L20000"', page.body)
            self.assertNotIn(b'id="L20001"', page.body)
        # The raw text is whole.
        self.assertEqual(self.s.get(f"/raw/{paste_id}").body, NEWLINES)

    def test_one_line_that_escapes_past_the_bound_is_cut_on_a_character(self):
        paste_id = self.create(LESS_THAN)
        page = self.view(f"/{paste_id}", source="127.0.1.2")
        self.assertStatus(page, 200)
        self.assertLess(len(page.body), PAGE_BOUND)
        self.assertIn(b'id="cut"', page.body)
        self.assertIn(b"&lt;</span>", page.body)

    def test_the_fork_page_of_a_large_paste_loads_the_text_instead_of_carrying_it(self):
        paste_id = self.create(LESS_THAN)
        page = self.s.get(f"/new?from={paste_id}", headers=BROWSER)
        self.assertStatus(page, 200)
        self.assertLess(len(page.body), 64 * 1024)
        self.assertIn(f'data-prefill-from="/raw/{paste_id}"'.encode(), page.body)
        self.assertIn(b'id="prefill-large"', page.body)
        small = self.create(b"<small>\n")
        page = self.s.get(f"/new?from={small}", headers=BROWSER)
        self.assertIn(b"&lt;small&gt;", page.body)
        self.assertNotIn(b"data-prefill-from", page.body)

    def test_readers_that_stop_reading_share_one_page_instead_of_holding_a_copy_each(self):
        paste_id = self.create(NEWLINES)
        warm = self.view(f"/{paste_id}", source="127.0.2.1")
        self.assertStatus(warm, 200)
        before, _ = rss_bytes(self.s.proc.pid)
        # Forty readers, each its own client (no budget shared), each asking and reading nothing.
        readers = []
        for i in range(40):
            conn = RawConnection("127.0.0.1", self.s.port, timeout=30, source=f"127.0.3.{i + 1}")
            conn.send_headers("GET", f"/{paste_id}", {"Accept": "text/html"})
            readers.append(conn)
        # Every request answered (its head is readable) while the bodies wait in the sockets.
        for conn in readers:
            status, _ = conn.read_head()
            self.assertEqual(status, 200)
        after, _ = rss_bytes(self.s.proc.pid)
        for conn in readers:
            conn.sock.close()
        # Before the bounds each held its own 35 MB page (40 readers: 76 MB to 1.49 GB). Now the
        # page is shared; the bound leaves room for the allocator and the sockets' bookkeeping.
        self.assertLess(after - before, 40 * MIB, f"RSS grew {(after - before) / MIB:.1f} MiB")

    def test_a_client_looping_on_large_pages_spends_its_read_budget_and_gets_429(self):
        paste_id = self.create(NEWLINES)
        statuses = []
        for _ in range(30):  # a ~700 KB page is 10 reads of the 50 a client may burst
            page = self.view(f"/{paste_id}", source="127.0.4.1")
            statuses.append(page.status)
            if page.status == 429:
                self.assertIn(b"page_bytes_ip", page.body)
                break
        self.assertIn(429, statuses)
        self.assertGreaterEqual(statuses.count(200), 3)
        # Small pages of another paste from the same client cost one read each, as before: a
        # person who reads ordinary pastes never meets the byte budget.
        small = self.create(b"print('hi')\n")
        other = self.view(f"/{small}", source="127.0.4.2")
        self.assertStatus(other, 200)


class MarkdownCostTest(SluiceTestCase):
    """One line of nested quotes renders to 27 bytes a character. Its rendering is larger than the
    view's bounds, so the view is its source, tagged too_large; and it cannot empty the render
    cache of everything else (a 6 MiB cache here: before, the 5.4 MB rendering was kept and
    evicted half of the twenty others)."""

    @classmethod
    def setUpClass(cls):
        # A render timeout no machine's hiccup reaches: this test is about size, not speed.
        cls.s = cls.start_class_server(["--highlight-cache-bytes", str(6 * MIB),
                                        "--render-timeout", "60s"])

    def test_nested_markdown_is_its_source_tagged_too_large_and_the_cache_keeps_the_rest(self):
        s = self.s
        code = "".join(f"x = {i}\n" for i in range(1000))
        others = [s.create_ok(f"# {n}\n{code}")["id"] for n in range(20)]
        for paste_id in others:  # rendered once (some 80 KB each): the next view is cached
            self.assertStatus(s.get(f"/{paste_id}?lang=python", headers=BROWSER), 200)
        quotes = s.create_ok(">" * 200_000 + " deep\n")["id"]
        for _ in range(2):
            page = s.get(f"/{quotes}/rendered", headers=BROWSER, timeout=120)
            self.assertStatus(page, 200)
            self.assertEqual(page.header("X-Sluice-Rung"), "plain; reason=too_large")
            self.assertLess(len(page.body), PAGE_BOUND)
            self.assertIn(b"Markdown would be larger", page.body)
        cached = [s.get(f"/{paste_id}?lang=python", headers=BROWSER).header("X-Sluice-Rung")
                  for paste_id in others]
        self.assertEqual(cached, ["cached"] * 20)


if __name__ == "__main__":
    unittest.main()
