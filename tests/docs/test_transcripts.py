"""Examples in docs/ whose output is printed beside them print exactly that.

A fenced ```console block of the Markdown under docs/ is a transcript: lines starting with `$ `
are commands (run with `sluice` meaning the binary under test; `build/dev/sluice` is rewritten to
it), and the lines after each command, up to the next command, are its expected output, compared
exactly. Only transcripts that need no server are written as ```console; the rest of the examples
that call a server are ```sh blocks run by test_usage_examples.py. Besides, the TOML example of
docs/configuration.md is a file `sluice config --check` accepts.
"""

import glob
import os
import re
import shlex
import subprocess
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("SLUICE_BIN", os.path.join(ROOT, "build", "dev", "sluice"))
CONSOLE = re.compile(r"^```console[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
TOML = re.compile(r"^```toml[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def transcripts():
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in CONSOLE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield os.path.relpath(path, ROOT), line, m.group(1)


def steps(block):
    """(command, expected output) pairs of one transcript."""
    out = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append([line[2:], []])
        elif out:
            out[-1][1].append(line)
    return [(cmd, "\n".join(lines)) for cmd, lines in out]


class TranscriptTest(unittest.TestCase):
    def test_every_console_transcript_prints_what_it_shows(self):
        found = 0
        for rel, line, block in transcripts():
            for cmd, expected in steps(block):
                found += 1
                argv = shlex.split(cmd)
                if argv[0] in ("sluice", "build/dev/sluice"):
                    argv[0] = BIN
                with self.subTest(example=f"{rel}:{line}: {cmd}"):
                    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    self.assertEqual(proc.stdout.rstrip("\n"), expected.rstrip("\n"))
        self.assertGreater(found, 0, "no ```console transcript found under docs/")

    def test_the_configuration_example_is_accepted_by_config_check(self):
        with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
            blocks = TOML.findall(f.read())
        self.assertTrue(blocks, "docs/configuration.md has no ```toml example")
        with tempfile.TemporaryDirectory() as tmp:
            for i, block in enumerate(blocks):
                path = os.path.join(tmp, f"example{i}.toml")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(block)
                proc = subprocess.run([BIN, "config", "--check", path], capture_output=True,
                                      text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, f"{block}\n{proc.stdout}{proc.stderr}")


if __name__ == "__main__":
    unittest.main()
