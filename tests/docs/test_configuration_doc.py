"""docs/configuration.md is what `sluice config --markdown` prints from the settings' declarations.

The file is generated (src/app/reference.cc, ConfigurationMarkdown) from src/app/settings.cc, as
`man sluice` and `sluice config --example` are; this test fails when a declaration changed and the
file was not regenerated, so the reference a reader finds in docs/ cannot drift from the binary.
Regenerate with: build/dev/sluice config --markdown > docs/configuration.md
"""

import difflib
import os
import subprocess
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("SLUICE_BIN", os.path.join(ROOT, "build", "dev", "sluice"))


class ConfigurationDocTest(unittest.TestCase):
    def test_configuration_md_is_what_the_binary_generates(self):
        generated = subprocess.run([BIN, "config", "--markdown"], check=True, capture_output=True,
                                   text=True).stdout
        with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
            committed = f.read()
        if generated != committed:
            diff = "".join(difflib.unified_diff(committed.splitlines(True),
                                                generated.splitlines(True),
                                                "docs/configuration.md", "sluice config --markdown"))
            self.fail("docs/configuration.md is stale; regenerate it with\n"
                      "  build/dev/sluice config --markdown > docs/configuration.md\n" + diff[:6000])

    def test_every_setting_of_serve_help_is_in_it(self):
        help_text = subprocess.run([BIN, "serve", "--help"], check=True, capture_output=True,
                                   text=True).stdout
        with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
            doc = f.read()
        flags = {word for word in help_text.split() if word.startswith("--") and len(word) > 2}
        flags -= {"--help", "--config"}
        missing = sorted(f for f in flags if f"`{f.rstrip(',')}`" not in doc)
        self.assertEqual(missing, [], "flags of `sluice serve --help` missing from the reference")


if __name__ == "__main__":
    unittest.main()
