"""The shell examples of docs/usage.md work as written, against a real server.

Every ```sh block of docs/usage.md runs, in the order of the file, as `bash -e -o pipefail`, in a
fresh folder (holding a copy of contrib/, which the pastebinit example reads), with `SLUICE` set to
the URL of a sluice started for the test, the folder of the binary under test first on PATH (so
`sluice paste` is the binary built from this tree) and HOME in the folder (pastebinit reads
~/.pastebin.d). A block fails the test when it exits non-zero; its output is printed.

A block preceded by the line `<!-- docs-check: skip REASON -->` is not run (none in usage.md today:
the test asserts that every block ran, so a skip must be a decision, not an accident).
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from sluice_harness import SluiceTestCase, sluice_bin

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BLOCK = re.compile(r"^```sh[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
SKIP = re.compile(r"<!-- docs-check: skip ([^>]*)-->\s*$")


def sh_blocks(path):
    """(line number, code, skip reason or None) of every ```sh block of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        out.append((line, m.group(1), skip.group(1).strip() if skip else None))
    return out


class UsageExamplesTest(SluiceTestCase):
    def run_blocks(self, doc, env_extra, at_least):
        blocks = sh_blocks(os.path.join(ROOT, "docs", doc))
        self.assertGreaterEqual(len(blocks), at_least, f"docs/{doc}: too few ```sh blocks found")
        work = tempfile.mkdtemp(prefix="sluice-docs-")
        self.addCleanup(shutil.rmtree, work, True)
        shutil.copytree(os.path.join(ROOT, "contrib"), os.path.join(work, "contrib"))
        env = dict(os.environ)
        env.update(env_extra)
        env["HOME"] = work
        env["PATH"] = os.path.dirname(os.path.abspath(sluice_bin())) + os.pathsep + env["PATH"]
        ran = 0
        for line, code, skip in blocks:
            if skip:
                continue
            with self.subTest(block=f"docs/{doc}:{line}"):
                proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=work,
                                      env=env, capture_output=True, text=True, timeout=120)
                self.assertEqual(proc.returncode, 0,
                                 f"docs/{doc}:{line} exited {proc.returncode}\n--- block\n{code}"
                                 f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")
            ran += 1
        return blocks, ran

    def test_every_sh_block_of_usage_md_runs_against_a_server(self):
        server = self.server()
        blocks, ran = self.run_blocks("usage.md", {"SLUICE": server.url}, at_least=10)
        self.assertEqual(ran, len(blocks), "docs/usage.md: every ```sh block must run")

    def test_every_sh_block_of_moderation_md_runs_against_a_server(self):
        server = self.server()
        blocks, ran = self.run_blocks("moderation.md", {
            "SLUICE": server.url,
            "SLUICE_ADMIN": f"http://127.0.0.1:{server.admin_port}",
            "SLUICE_ADMIN_TOKEN_FILE": server.admin_token_file,
        }, at_least=2)
        self.assertEqual(ran, len(blocks), "docs/moderation.md: every ```sh block must run")


if __name__ == "__main__":
    unittest.main()
