#!/usr/bin/env python3
"""Render cost of Markdown's rendered view and of a fork's diff, per KB, for typical and worst
inputs: the time of the first (uncached) GET /ID/rendered or /ID/diff, less that of a cached one
(the page, the socket and the reads, without the worker's work), on one server with a render
timeout long enough that nothing is cut. Median of 3 fresh pastes per case.

Usage: bench/render_share_cost.py SLUICE_BIN OUT.md
"""
import glob
import os
import platform
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from sluice_harness import SluiceServer  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def timed_get(url):
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "text/html"})) as r:
        body = r.read()
        rung = r.headers.get("X-Sluice-Rung")
    return time.perf_counter() - started, rung, len(body)


def markdown_cases():
    readme = open(os.path.join(ROOT, "README.md")).read()
    yield "typical: README.md", readme
    yield "10,000 nested lists", "- " * 10000 + "deep\n"
    yield "10,000 nested quotes", "> " * 10000 + "deep\n"
    yield "50,000 open brackets", "[" * 50000 + "\n"
    yield "table 300 columns x 300 rows", "\n".join(
        ["|" + "a|" * 300, "|" + "-|" * 300] + ["|" + "x|" * 300] * 300) + "\n"
    yield "50,000 emphasis openers", "*a " * 50000 + "\n"


def diff_cases():
    # The paste service's files: one source of 45 KB before they were split by use case, 48 KB
    # together now.
    code = "".join(open(path).read() for path in sorted(
        glob.glob(os.path.join(ROOT, "src", "service", "paste_service*.cc"))))
    edited = code.replace("co_return", "co_return /*x*/", 5) + "// appended\n"
    yield "typical: a 30 KB source, 6 lines changed", code, edited
    lines = [f"l{i:07d} {'x' * 10}\n" for i in range(100 * 1024 // 20)]
    yield ("100 KB each, every other line changed", "".join(lines),
           "".join(line if i % 2 else "changed\n" for i, line in enumerate(lines)))
    yield ("100 KB each, the same lines in reverse order", "".join(lines), "".join(lines[::-1]))
    for kb in (25, 100, 480):
        n = kb * 1024 // 20
        yield (f"{kb} KB each, every line different",
               "".join(f"a{i:07d} {'x' * 10}\n" for i in range(n)),
               "".join(f"b{i:07d} {'y' * 10}\n" for i in range(n)))


def main():
    binary, out = sys.argv[1], sys.argv[2]
    os.environ["SLUICE_BIN"] = binary
    s = SluiceServer(args=["--render-timeout", "60s", "--max-paste-bytes",
                                          "2000000"]).start()
    rows = []
    try:
        def measure(kind, label, make_path, size):
            costs = []
            rung = None
            for _ in range(3):
                path = make_path()
                cold, rung, _ = timed_get(s.url + path)
                warm, _, _ = timed_get(s.url + path)
                costs.append(max(0.0, cold - warm))
            med = statistics.median(costs)
            rows.append((kind, label, size, med * 1000, med * 1000 / (size / 1024), rung))

        for label, text in markdown_cases():
            data = text.encode()
            measure("markdown", label,
                    lambda: f"/{s.create_ok(data)['id']}/rendered", len(data))
        for label, parent, child in diff_cases():
            pd, cd = parent.encode(), child.encode()

            def make():
                p = s.create_ok(pd)["id"]
                c = s.request("POST", f"/api/v1/pastes?parent={p}", body=cd).json()["id"]
                return f"/{c}/diff"
            measure("diff", label, make, len(pd) + len(cd))
    finally:
        s.stop()
        s.cleanup()
    with open(out, "w") as f:
        f.write("# Render cost of Markdown and of a diff, per KB\n\n")
        f.write(f"`bench/render_share_cost.py` on {platform.node()}, {os.cpu_count()} cores, "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; the time of the first "
                "(uncached) view less that of the cached one, median of 3 fresh pastes; the "
                "dev build (-O1). The work runs in a highlight worker process, so it is bounded "
                "by render_timeout (2 s by default) whatever these numbers are.\n\n")
        f.write("| view | input | KB in | ms | ms per KB | rung |\n|---|---|---|---|---|---|\n")
        for kind, label, size, ms, per_kb, rung in rows:
            f.write(f"| {kind} | {label} | {size / 1024:.0f} | {ms:.1f} | {per_kb:.3f} | {rung} |\n")
    print(open(out).read())


if __name__ == "__main__":
    main()
