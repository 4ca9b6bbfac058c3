"""Every relative link in README.md and the Markdown under docs/ (and the project's other top-level
Markdown files and bench/results/README.md) points at a file that exists, and a link to a heading of
a Markdown file (`file.md#anchor`) names a heading that file has, as GitHub slugs it.
"""

import glob
import os
import re
import unittest
from urllib.parse import unquote

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def markdown_files():
    files = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md",
             "bench/results/README.md"]
    files += sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return [f for f in files if os.path.exists(os.path.join(ROOT, f))]


def prose_lines(path):
    """The lines outside fenced code blocks, with inline code spans removed."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line.lstrip()):
                inside = not inside
                continue
            if not inside:
                yield number, re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    for _, line in prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


class LinkTest(unittest.TestCase):
    def test_the_readme_stays_a_five_minute_read(self):
        # Issue 33: the README introduces; the rest lives in docs/. About 300 lines at most.
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            lines = f.read().count("\n")
        self.assertLessEqual(lines, 320, "README.md has grown past a short introduction: move "
                             "the detail into the page of docs/ it belongs to")

    def test_the_files_under_check_exist(self):
        files = markdown_files()
        self.assertIn("README.md", files)
        self.assertGreater(len(files), 5)

    def test_every_relative_link_resolves(self):
        broken = []
        checked = 0
        for rel in markdown_files():
            path = os.path.join(ROOT, rel)
            for number, line in prose_lines(path):
                for target in LINK.findall(line):
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                        continue  # http:, https:, mailto: ...
                    checked += 1
                    file_part, _, anchor = target.partition("#")
                    dest = (os.path.normpath(os.path.join(os.path.dirname(path), unquote(file_part)))
                            if file_part else path)
                    if not os.path.exists(dest):
                        broken.append(f"{rel}:{number}: {target}: no such file")
                        continue
                    if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                        broken.append(f"{rel}:{number}: {target}: no heading #{anchor} in "
                                      f"{os.path.relpath(dest, ROOT)}")
        self.assertGreater(checked, 20, "the link pattern found almost nothing: is it broken?")
        self.assertEqual(broken, [], "\n".join(broken))


if __name__ == "__main__":
    unittest.main()
