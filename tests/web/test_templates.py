"""The page templates escape every slot but the named safe ones.

web/templates/*.html are compiled by tools/compile_templates.py (docs/web.md): {{name}} is
escaped, {{{name_html}}} is not. These tests hold the shipped templates to a list of the raw slots
there are, and the compiler to refusing a raw slot that is not named so and to escaping every other.
tests/unit/http/pages_test.cc renders every page with hostile text in every field.
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMPLATES = os.path.join(ROOT, "web", "templates")
COMPILER = os.path.join(ROOT, "tools", "compile_templates.py")

# Every slot shown as it is, and why it is safe. A new one is a decision: add it here with its
# reason, after making sure what fills it is markup the server made.
ALLOWED_RAW = {
    ("layout.html", "title_html"): "title.html, rendered (its slots escaped)",
    ("title.html", "problem_html"): "problem.html's title of the error, rendered",
    ("error.html", "title_html"): "problem.html's title of the error, rendered",
    ("error.html", "text_html"): "problem.html's explanation of the error, rendered",
    ("layout.html", "body_html"): "the page's own template, rendered",
    ("layout.html", "messages_html"): "the scripts' messages: JSON from the catalogs, made at build "
                                      "time with <, > and & escaped (tools/compile_catalogs.py)",
    ("layout.html", "language_choices_html"): "language_choice.html, rendered per language",
    ("index.html", "language_options_html"): "option.html, rendered per language",
    ("index.html", "ttl_options_html"): "option.html, rendered per expiry",
    ("paste.html", "lines_html"): "the highlighter's lines (src/render), every character escaped",
    ("derived.html", "fragment_html"): "a diff's highlighted lines or cmark-gfm's HTML (src/render)",
    ("abuse.html", "contacts_html"): "contact_link.html, rendered once per abuse_contact",
    ("review_layout.html", "body_html"): "the review page's own template, rendered",
    ("review_queue.html", "rows_html"): "review_row.html, rendered once per queue entry",
    ("transparency.html", "months_html"): "transparency_month.html, rendered once per month",
}

RAW = re.compile(r"\{\{\{\s*([^}]*?)\s*\}\}\}")
ANY_TAG = re.compile(r"\{\{(.*?)\}\}", re.S)


def templates():
    return sorted(f for f in os.listdir(TEMPLATES) if f.endswith(".html"))


def compile_templates(paths, out_dir, locale=None):
    return subprocess.run(
        [sys.executable, COMPILER, "--header", os.path.join(out_dir, "t.h"), "--source",
         os.path.join(out_dir, "t.cc"), *(["--locale", locale] if locale else []), *paths],
        capture_output=True, text=True)


class ShippedTemplatesTest(unittest.TestCase):
    def test_every_raw_slot_is_in_the_allowed_list(self):
        found = set()
        for name in templates():
            with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
                for slot in RAW.findall(f.read()):
                    found.add((name, slot))
        self.assertEqual(set(), found - set(ALLOWED_RAW),
                         "raw slots not in ALLOWED_RAW: each shows its text as markup")
        self.assertEqual(set(), set(ALLOWED_RAW) - found, "ALLOWED_RAW names slots that are gone")

    def test_every_other_slot_is_escaped_in_the_generated_code(self):
        with tempfile.TemporaryDirectory() as out:
            # With the shipped catalogs: a translation adds no raw slot either.
            done = compile_templates([os.path.join(TEMPLATES, t) for t in templates()], out,
                                     os.path.join(ROOT, "web", "locale"))
            self.assertEqual(0, done.returncode, done.stderr)
            with open(os.path.join(out, "t.cc"), encoding="utf-8") as f:
                source = f.read()
        raw_members = set(re.findall(r"out\.append\(v\.(\w+)\)", source))
        self.assertEqual({slot for (_, slot) in ALLOWED_RAW}, raw_members)
        escaped = set(re.findall(r"AppendHtmlEscaped\(out, v\.(\w+)\)", source))
        self.assertTrue(escaped, "no escaped slot at all: the check reads the wrong code")
        self.assertFalse({m for m in escaped if m.endswith("_html")})

    def test_no_template_has_a_tag_the_compiler_does_not_know(self):
        # Only slots, sections and comments: no partials, no delimiter changes, no unescaped {{&x}}.
        for name in templates():
            with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
                for tag in ANY_TAG.findall(f.read()):
                    body = tag.lstrip("{").strip()
                    self.assertRegex(body, r"^([#^/]\s*)?[a-z][a-z0-9_]*$|^!", f"{name}: {{{{{tag}}}}}")


class CompilerTest(unittest.TestCase):
    def compile_one(self, text):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "page.html")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            done = compile_templates([path], out)
            source = ""
            if done.returncode == 0:
                with open(os.path.join(out, "t.cc"), encoding="utf-8") as f:
                    source = f.read()
            return done, source

    def test_a_raw_slot_not_named_html_is_refused(self):
        done, _ = self.compile_one("<p>{{{text}}}</p>\n")
        self.assertNotEqual(0, done.returncode)
        self.assertIn("not named *_html", done.stderr)

    def test_an_html_field_in_an_escaped_slot_is_refused(self):
        done, _ = self.compile_one("<p>{{code_html}}</p>\n")
        self.assertNotEqual(0, done.returncode)

    def test_ampersand_and_partials_and_unclosed_sections_are_refused(self):
        for text in ["{{&text}}", "{{> other}}", "{{=<% %>=}}", "{{#a}}x", "{{#a}}x{{/b}}",
                     "{{{a_html}}", "{{delete}}"]:
            done, _ = self.compile_one(text)
            self.assertNotEqual(0, done.returncode, text)

    def test_every_plain_slot_is_escaped_and_every_html_slot_is_not(self):
        _, source = self.compile_one(
            '<a href="/{{id}}" title="{{title}}">{{#shown}}{{label}}{{/shown}}</a>{{{code_html}}}\n')
        for field in ("id", "title", "label"):
            self.assertIn(f"AppendHtmlEscaped(out, v.{field});", source)
        self.assertIn("out.append(v.code_html);", source)
        self.assertEqual(1, source.count("out.append(v."))

    def test_a_tag_alone_on_its_line_takes_the_line(self):
        _, source = self.compile_one("{{! a\ncomment }}\n<p>\n{{#a}}\nx\n{{/a}}\n</p>\n")
        self.assertIn('out.append("<p>\\n"', source)
        self.assertIn('out.append("x\\n"', source)

    def test_a_line_with_text_beside_its_tags_keeps_its_line_break(self):
        _, source = self.compile_one("{{#a}}x{{/a}}\n{{#b}}y{{/b}}\nz\n")
        self.assertIn('out.append("\\n"', source)


if __name__ == "__main__":
    unittest.main()
