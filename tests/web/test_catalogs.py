"""The message catalogs are complete, well formed and consistent with what the pages show.

web/locale/sluice.pot holds every message of the templates, of src/http and of web/static's
scripts (tools/extract_messages.py); each web/locale/<lang>.po translates all of them
(docs/translations.md). A catalog missing a message, with it untranslated or fuzzy, with a
slot, placeholder or tag of the msgid lost or added, or that Debian's gettext tools refuse, fails
here. tests/unit/http/pages_test.cc then renders every page in every language and looks for
English left in it.
"""

import gettext
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOCALE = os.path.join(ROOT, "web", "locale")
POT = os.path.join(LOCALE, "sluice.pot")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import compile_catalogs  # noqa: E402
import compile_templates  # noqa: E402
import po  # noqa: E402

# The languages the project ships (docs/translations.md): removing one is a decision, not an
# accident of a deleted file.
SHIPPED = {"de", "es", "fr", "ja", "zh-Hans"}


def catalogs():
    return sorted(glob.glob(os.path.join(LOCALE, "*.po")))


def need(tool):
    if shutil.which(tool) is None:
        raise unittest.SkipTest(f"{tool} (Debian's gettext) is not installed")


def markup_messages():
    """The msgids of the templates' t_html messages: their tags must survive translation."""
    found = set()
    for path in glob.glob(os.path.join(ROOT, "web", "templates", "*.html")):
        with open(path, encoding="utf-8") as f:
            nodes = compile_templates.parse(path, f.read())
        found.update(msgid for msgid, html in compile_templates.messages(nodes) if html)
    return found


class CatalogsTest(unittest.TestCase):
    def test_every_shipped_language_has_a_catalog(self):
        self.assertEqual(SHIPPED, {os.path.basename(p)[:-3] for p in catalogs()})

    def test_the_template_is_what_the_sources_say(self):
        done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "extract_messages.py"),
                               "--check"], capture_output=True, text=True)
        self.assertEqual(0, done.returncode, done.stderr)

    def test_msgfmt_checks_every_catalog(self):
        need("msgfmt")
        for path in catalogs():
            done = subprocess.run(["msgfmt", "--check", "--output-file=/dev/null", path],
                                  capture_output=True, text=True)
            self.assertEqual(0, done.returncode, f"{path}: {done.stderr}")
            self.assertEqual("", done.stderr, f"{path}: msgfmt warns")

    def test_every_message_is_translated_in_every_catalog(self):
        # msgcmp counts a message missing, untranslated or fuzzy in the catalog as absent.
        need("msgcmp")
        for path in catalogs():
            done = subprocess.run(["msgcmp", path, POT], capture_output=True, text=True)
            self.assertEqual(0, done.returncode, f"{path}: {done.stderr}")

    def test_no_catalog_has_a_message_the_template_lacks(self):
        wanted = {m.msgid for m in po.read(POT)}
        for path in catalogs():
            extra = {m.msgid for m in po.read(path)} - wanted
            self.assertEqual(set(), extra, f"{path}: run tools/extract_messages.py (msgmerge)")

    def test_translations_keep_slots_placeholders_and_tags(self):
        markup = markup_messages()
        for path in catalogs():
            for m in po.read(path):
                if not m.msgid or not m.msgstr:
                    continue
                with self.subTest(catalog=os.path.basename(path), msgid=m.msgid):
                    self.assertEqual(compile_templates.message_slots(m.msgid),
                                     compile_templates.message_slots(m.msgstr))
                    self.assertEqual(sorted(compile_catalogs.PLACEHOLDER.findall(m.msgid)),
                                     sorted(compile_catalogs.PLACEHOLDER.findall(m.msgstr)))
                    if m.msgid in markup:
                        self.assertEqual(compile_templates.message_markup(m.msgid),
                                         compile_templates.message_markup(m.msgstr))
                    else:
                        self.assertIsNone(re.search(r"[<>]", m.msgstr), "markup in a text message")

    def test_each_catalog_says_its_language(self):
        for path in catalogs():
            tag = os.path.basename(path)[:-3]
            self.assertEqual(tag.replace("-", "_"), po.header_field(po.read(path), "Language"))

    def test_the_reader_agrees_with_msgfmt(self):
        # tools/po.py is what the build uses; msgfmt's compilation, read back by Python's gettext,
        # is the reference.
        need("msgfmt")
        with tempfile.TemporaryDirectory() as out:
            for path in catalogs():
                mo = os.path.join(out, os.path.basename(path) + ".mo")
                subprocess.run(["msgfmt", "--output-file", mo, path], check=True)
                with open(mo, "rb") as f:
                    reference = gettext.GNUTranslations(f)._catalog
                reference = {k: v for k, v in reference.items() if k}
                self.assertEqual(reference, po.translations(po.read(path)), path)


class ReaderTest(unittest.TestCase):
    def test_continued_strings_escapes_flags_and_references(self):
        messages = po.parse('''# a comment
#: web/templates/a.html src/http/pages.cc
#, fuzzy
msgid ""
"two "
"lines \\"quoted\\"\\n"
msgstr "zwei\\tZeilen"

msgid "b"
msgstr ""
''')
        self.assertEqual(2, len(messages))
        self.assertEqual('two lines "quoted"\n', messages[0].msgid)
        self.assertEqual("zwei\tZeilen", messages[0].msgstr)
        self.assertTrue(messages[0].fuzzy)
        self.assertEqual(["web/templates/a.html", "src/http/pages.cc"], messages[0].references)
        # Neither the fuzzy nor the untranslated message is a translation.
        self.assertEqual({}, po.translations(messages))

    def test_broken_catalogs_are_refused(self):
        for text in ['msgid "a"\n', 'msgid "a"\nmsgstr "b"\nmsgid "a"\nmsgstr "c"\n',
                     'msgid "a\nmsgstr "b"\n', 'msgid "a"\nmsgstr "\\q"\n',
                     'msgctxt "x"\nmsgid "a"\nmsgstr "b"\n']:
            with self.assertRaises(po.PoError, msg=text):
                po.parse(text)

    def test_quote_round_trips(self):
        for text in ["plain", 'with "quotes" and \\', "two\nlines\n", "tab\there"]:
            self.assertEqual(text, po.parse(f"msgid {po.quote(text)}\nmsgstr \"x\"\n")[0].msgid)


class TranslatedTemplateTest(unittest.TestCase):
    """tools/compile_templates.py with a catalog: what a translation may and may not do."""

    def compile_with(self, template, msgstr):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "page.html")
            with open(path, "w", encoding="utf-8") as f:
                f.write(template)
            locale = os.path.join(out, "locale")
            os.mkdir(locale)
            msgid = re.search(r"\{\{#t(?:_html)?\}\}(.*?)\{\{/t", template).group(1)
            with open(os.path.join(locale, "de.po"), "w", encoding="utf-8") as f:
                f.write(f'msgid ""\nmsgstr ""\n\nmsgid {po.quote(msgid)}\nmsgstr {po.quote(msgstr)}\n')
            done = subprocess.run(
                [sys.executable, os.path.join(ROOT, "tools", "compile_templates.py"), "--locale",
                 locale, "--header", os.path.join(out, "t.h"), "--source",
                 os.path.join(out, "t.cc"), path], capture_output=True, text=True)
            source = ""
            if done.returncode == 0:
                with open(os.path.join(out, "t.cc"), encoding="utf-8") as f:
                    source = f.read()
            return done, source

    def test_a_translation_is_a_case_of_the_language(self):
        done, source = self.compile_with("<p>{{#t}}Hello {{name}}{{/t}}</p>\n", "Hallo {{name}}")
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn("case Lang::kDe:", source)
        self.assertIn('"Hallo "', source)
        self.assertIn("AppendHtmlEscaped(out, v.name);", source)

    def test_a_text_message_is_escaped_at_build_time(self):
        done, source = self.compile_with('<p title="{{#t}}Say "hi"{{/t}}"></p>\n', "Sag 'hallo'")
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn("Say &quot;hi&quot;", source)
        self.assertIn("Sag &#39;hallo&#39;", source)

    def test_a_translation_cannot_change_slots(self):
        for msgstr in ["Hallo", "Hallo {{name}} {{name}}", "Hallo {{other}}", "Hallo {{{name_html}}}"]:
            done, _ = self.compile_with("<p>{{#t}}Hello {{name}}{{/t}}</p>\n", msgstr)
            self.assertNotEqual(0, done.returncode, msgstr)

    def test_a_translation_cannot_add_markup(self):
        done, _ = self.compile_with("<p>{{#t}}Hello{{/t}}</p>\n", "<script>x</script>Hallo")
        self.assertNotEqual(0, done.returncode)
        done, _ = self.compile_with("<p>{{#t_html}}Hello <b>you</b>{{/t_html}}</p>\n",
                                    '<b onclick="x()">Hallo</b> du')
        self.assertNotEqual(0, done.returncode)
        done, _ = self.compile_with("<p>{{#t_html}}Hello <b>you</b>{{/t_html}}</p>\n",
                                    "Hallo <b>du</b> <i>!</i>")
        self.assertNotEqual(0, done.returncode)

    def test_a_markup_message_may_move_its_tags(self):
        done, source = self.compile_with("<p>{{#t_html}}Hello <b>{{name}}</b>!{{/t_html}}</p>\n",
                                         "<b>{{name}}</b>, hallo!")
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertIn('"<b>"', source)

    def test_markup_outside_t_html_and_sections_inside_messages_are_refused(self):
        for template in ["<p>{{#t}}Hello <b>you</b>{{/t}}</p>\n",
                         "<p>{{#t}}Hello {{#a}}x{{/a}}{{/t}}</p>\n",
                         "<p>{{#t}}Hello &amp; bye{{/t}}</p>\n"]:
            done, _ = self.compile_with(template, "x")
            self.assertNotEqual(0, done.returncode, template)


if __name__ == "__main__":
    unittest.main()
