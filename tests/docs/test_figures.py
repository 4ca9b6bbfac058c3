"""Every figure in README.md's Figures table can be reproduced: its row names the script that
measured it, the script exists, and the results file the row links to names that script too (with
the command line, the machine and every round, as bench/results/README.md asks of each file).
"""

import os
import re
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)[^)]*\)")
CODE = re.compile(r"`([^`]+)`")


def figure_rows():
    """The cells of each row of README.md's table under "## Figures"."""
    rows, inside = [], False
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == "## Figures"
                continue
            if inside and line.startswith("|") and not line.startswith("|---"):
                rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:]  # less the header


def script_of(cell):
    """The first word of a code span in the cell that is a file of the repository, or None:
    `FLEET=2 bench/run_growth_bench.sh` names bench/run_growth_bench.sh."""
    for span in CODE.findall(cell):
        for word in span.split():
            if "=" not in word and os.path.isfile(os.path.join(ROOT, word)):
                return word
    return None


class FiguresTest(unittest.TestCase):
    def test_the_table_has_rows(self):
        self.assertGreater(len(figure_rows()), 10)

    def test_every_figure_names_its_script_and_its_results(self):
        for cells in figure_rows():
            with self.subTest(figure=cells[0]):
                last = cells[-1]
                script = script_of(last)
                self.assertIsNotNone(script, f"no existing script named in {last!r}")
                links = LINK.findall(last)
                self.assertTrue(links, f"no results file linked in {last!r}")
                results = os.path.join(ROOT, links[0])
                self.assertTrue(os.path.isfile(results), results)
                with open(results, encoding="utf-8") as f:
                    text = f.read()
                name = os.path.splitext(os.path.basename(script))[0]
                self.assertIn(name, text, f"{links[0]} does not name {script}")


if __name__ == "__main__":
    unittest.main()
