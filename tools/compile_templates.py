#!/usr/bin/env python3
"""Compiles the page templates (web/templates/*.html) into C++, escaping every slot by default.

    compile_templates.py --header OUT.h --source OUT.cc TEMPLATE.html...
    compile_templates.py --check TEMPLATE.html...       (parse only: the rules below, no output)

A template is HTML with a subset of mustache (https://mustache.github.io/mustache.5.html):

    {{name}}             the field's text, HTML-escaped (sluice::AppendHtmlEscaped, the escaper
                         of the highlighter too): shown, never interpreted
    {{{name_html}}}      the field's bytes as they are: only for names ending in `_html`, which
                         hold markup that is already safe (the highlighter's lines, the rendered
                         Markdown, a fragment made from another template)
    {{#name}}..{{/name}} shown when the bool field is true; {{^name}}..{{/name}} when it is false
    {{! comment }}       dropped
    {{#t}}..{{/t}}       a message of the catalogs (web/locale/*.po, docs/translations.md): its
                         text and slots are the msgid, and each language's msgstr replaces them in
                         that language's render; the text is escaped like a slot's (at build time)
    {{#t_html}}..{{/t_html}}
                         a message whose text holds markup (<code>, <a href>, <strong>): shown as
                         written, so each msgstr must hold exactly the msgid's tags and no others

Anything else between braces is refused, and so is a raw slot whose name does not end in `_html`
or an escaped one whose name does: the name says at every use whether a slot is safe markup, and
tests/web/test_templates.py holds the shipped templates to the same rule. A tag alone on its line
(a section, an end, a comment) takes its line with it, as in mustache, so the templates can be
laid out for a reader without changing the page.

Each template becomes a struct named after its file (paste.html: `Paste`) with one member per
field, in the order they first appear (`std::string_view` for a slot, `bool` for a section), and
`Render(const Paste&, Lang, std::string& out)` that appends the page in that language (and
`Render(const Paste&, std::string& out)`, in English). There is nothing to parse at run
time: a render is the appends the page needs, and a field the C++ sets that the template does not
have (misspelt, or renamed in the template) is a compile error, not a slot that stays empty.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import po  # noqa: E402

NAME = r"[a-z][a-z0-9_]*"
TAG = re.compile(r"\{\{(\{?)(.*?)\}\}(\}?)", re.S)
STANDALONE = re.compile(r"^[ \t]*(\{\{[#^/!](?:(?!\}\}).)*\}\})[ \t]*\n", re.M | re.S)


class TemplateError(Exception):
    pass


# Names that cannot be a C++ member.
KEYWORDS = set("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char
char8_t char16_t char32_t class compl concept const consteval constexpr constinit const_cast
continue co_await co_return co_yield decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new
noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq out v""".split())


def strip_standalone(text):
    """Removes the lines that hold only a section, end or comment tag (mustache's standalone); a
    comment may span lines."""
    return STANDALONE.sub(lambda m: m.group(1), text)


def parse(path, text):
    """Returns the template's nodes: ("text", s), ("slot", name, raw), ("section", name, inverted,
    nodes)."""
    if text.endswith("\n"):
        text = text[:-1]  # a file's last line break is the editor's, not the page's
    text = strip_standalone(text)
    root = []
    stack = [(None, root)]
    pos = 0
    line = lambda at: text.count("\n", 0, at) + 1
    for match in TAG.finditer(text):
        if match.start() > pos:
            stack[-1][1].append(("text", text[pos:match.start()]))
        pos = match.end()
        triple = match.group(1) == "{"
        if triple != (match.group(3) == "}"):
            raise TemplateError(f"{path}:{line(match.start())}: unbalanced braces in {match.group(0)!r}")
        body = match.group(2).strip()
        where = f"{path}:{line(match.start())}"
        if triple:
            if not re.fullmatch(NAME, body):
                raise TemplateError(f"{where}: bad raw slot {match.group(0)!r}")
            if not body.endswith("_html"):
                raise TemplateError(
                    f"{where}: raw slot {{{{{{{body}}}}}}} is not named *_html: only fields named "
                    f"so may hold markup; use {{{{{body}}}}} to show text")
            stack[-1][1].append(("slot", body, True))
            continue
        if body.startswith("!"):
            continue
        if body[:1] in ("#", "^"):
            name = body[1:].strip()
            if not re.fullmatch(NAME, name):
                raise TemplateError(f"{where}: bad section {match.group(0)!r}")
            if stack[-1][0] in MESSAGES:
                raise TemplateError(f"{where}: a section inside a message: write one message "
                                    f"per case instead, so each can be translated whole")
            if name in MESSAGES:
                if body[0] == "^":
                    raise TemplateError(f"{where}: {{{{^{name}}}}} means nothing")
                nodes = []
                stack[-1][1].append(("message", name == "t_html", match.end(), nodes))
                stack.append((name, nodes))
                continue
            nodes = []
            stack[-1][1].append(("section", name, body[0] == "^", nodes))
            stack.append((name, nodes))
            continue
        if body.startswith("/"):
            name = body[1:].strip()
            if stack[-1][0] != name:
                raise TemplateError(f"{where}: {{{{/{name}}}}} closes {stack[-1][0]!r}")
            stack.pop()
            if name in MESSAGES:
                node = stack[-1][1][-1]
                msgid = text[node[2]:match.start()]
                check_message(where, msgid, node[1])
                stack[-1][1][-1] = ("message", node[1], msgid, node[3])
            continue
        if not re.fullmatch(NAME, body):
            raise TemplateError(f"{where}: bad tag {match.group(0)!r}")
        if body.endswith("_html"):
            raise TemplateError(
                f"{where}: {{{{{body}}}}} would escape markup: a *_html field is shown raw, as "
                f"{{{{{{{body}}}}}}}")
        stack[-1][1].append(("slot", body, False))
    if len(stack) > 1:
        raise TemplateError(f"{path}: section {stack[-1][0]!r} is not closed")
    if pos < len(text):
        root.append(("text", text[pos:]))
    return root


# The sections that mark a message of the catalogs rather than a bool field.
MESSAGES = ("t", "t_html")
MARKUP = re.compile(r"<[^<>]*>")
ENTITY = re.compile(r"&(?:[a-z]+|#[0-9]+);")


def message_slots(text):
    """A message's slots, as written ({{name}} or {{{name_html}}}), sorted."""
    return sorted(m.group(0) for m in TAG.finditer(text))


def message_markup(text):
    """A message's tags, sorted: a translation may move them, not add, drop or change one."""
    return sorted(MARKUP.findall(TAG.sub("", text)))


def check_message(where, text, html):
    """A message's text holds markup only in a t_html block, and there only whole tags and
    entities: what the translations are held to (check_translation)."""
    bare = TAG.sub("", text)
    if not html:
        if re.search(r"[<>&]", bare):
            raise TemplateError(f"{where}: message {text!r} holds markup or an entity: mark it "
                                f"{{{{#t_html}}}}, or write the character itself")
        return
    rest = ENTITY.sub("", MARKUP.sub("", bare))
    if re.search(r"[<>&]", rest):
        raise TemplateError(f"{where}: message {text!r} has a stray <, > or &")


def check_translation(where, msgid, msgstr, html):
    """A translation keeps the msgid's slots and, in a t_html message, its tags exactly."""
    if message_slots(msgid) != message_slots(msgstr):
        raise TemplateError(f"{where}: the translation of {msgid!r} has slots "
                            f"{message_slots(msgstr)}, not {message_slots(msgid)}")
    if html and message_markup(msgid) != message_markup(msgstr):
        raise TemplateError(f"{where}: the translation of {msgid!r} has tags "
                            f"{message_markup(msgstr)}, not {message_markup(msgid)}")
    try:
        check_message(where, msgstr, html)
    except TemplateError as e:
        raise TemplateError(f"{e} (a translation of {msgid!r})")


def messages(nodes, found=None):
    """The template's messages in order: (msgid, html)."""
    found = [] if found is None else found
    for node in nodes:
        if node[0] == "message":
            found.append((node[2], node[1]))
        elif node[0] == "section":
            messages(node[3], found)
    return found


def fields(nodes, path, found=None):
    """The template's fields in order of first use: name -> "slot" or "bool"."""
    found = {} if found is None else found
    for node in nodes:
        if node[0] == "message":
            fields(node[3], path, found)
            continue
        kind = "bool" if node[0] == "section" else ("slot" if node[0] == "slot" else None)
        if kind is None:
            continue
        name = node[1]
        if name in KEYWORDS:
            raise TemplateError(f"{path}: {name!r} cannot be a field's name (a C++ keyword)")
        if found.setdefault(name, kind) != kind:
            raise TemplateError(f"{path}: {name!r} is used both as a section and as a slot")
        if node[0] == "section":
            fields(node[3], path, found)
    return found


def struct_name(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    return "".join(part.capitalize() for part in stem.split("_"))


def cxx_literal(text):
    data = text.encode("utf-8")
    out = ['"']
    for byte in data:
        ch = chr(byte)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append('\\n"\n      "')
        elif 0x20 <= byte < 0x7F and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out), len(data)


def escape_html(text):
    """sluice::AppendHtmlEscaped's escaping, done at build time for a message's text."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def message_nodes(nodes, html):
    """A message's nodes as rendered: its text escaped unless it is a t_html message."""
    return [("text", escape_html(n[1])) if n[0] == "text" and not html else n for n in nodes]


def emit_message(node, indent, lines, raw_fields, catalogs, path):
    """A message: a switch on the language, English (the msgid) where a catalog lacks it."""
    pad = "  " * indent
    html, msgid, english = node[1], node[2], node[3]
    cases = []
    for enum, table in catalogs:
        msgstr = table.get(msgid)
        if not msgstr:
            continue  # tests/web/test_catalogs.py fails on it; the page shows the English
        check_translation(f"{path}: {enum}", msgid, msgstr, html)
        cases.append((enum, parse(f"{path} ({enum})", msgstr)))
    if not cases:
        return emit(message_nodes(english, html), indent, lines, raw_fields, catalogs, path)
    literal_bytes = 0
    lines.append(f"{pad}switch (lang) {{")
    for enum, translated in cases:
        lines.append(f"{pad}  case Lang::{enum}:")
        literal_bytes = max(literal_bytes, emit(message_nodes(translated, html), indent + 2,
                                                lines, raw_fields, catalogs, path))
        lines.append(f"{pad}    break;")
    lines.append(f"{pad}  default:")
    literal_bytes = max(literal_bytes, emit(message_nodes(english, html), indent + 2, lines,
                                            raw_fields, catalogs, path))
    lines.append(f"{pad}    break;")
    lines.append(f"{pad}}}")
    return literal_bytes


def emit(nodes, indent, lines, raw_fields, catalogs=(), path=""):
    pad = "  " * indent
    literal_bytes = 0
    for node in nodes:
        if node[0] == "message":
            literal_bytes += emit_message(node, indent, lines, raw_fields, catalogs, path)
        elif node[0] == "text":
            literal, size = cxx_literal(node[1])
            literal_bytes += size
            lines.append(f"{pad}out.append({literal}, {size});")
        elif node[0] == "slot":
            if node[2]:
                raw_fields.add(node[1])
                lines.append(f"{pad}out.append(v.{node[1]});")
            else:
                lines.append(f"{pad}AppendHtmlEscaped(out, v.{node[1]});")
        else:
            lines.append(f"{pad}if ({'!' if node[2] else ''}v.{node[1]}) {{")
            literal_bytes += emit(node[3], indent + 1, lines, raw_fields, catalogs, path)
            lines.append(f"{pad}}}")
    return literal_bytes


def load_catalogs(locale_dir):
    """(enum, msgid -> msgstr) of every language but English, whose text is the msgids."""
    if not locale_dir:
        return []
    return [(enum, po.translations(po.read(path)))
            for _, enum, path in po.languages(locale_dir) if path]


def compile_all(paths, locale_dir=None):
    catalogs = load_catalogs(locale_dir)
    header = [
        "// Generated by tools/compile_templates.py from web/templates: edit the templates, not this.",
        "#pragma once",
        "",
        "#include <string>",
        "#include <string_view>",
        "",
        '#include "page_catalog.h"',
        "",
        "namespace sluice::http::templates {",
        "",
        "using i18n::Lang;",
        "",
    ]
    source = [
        "// Generated by tools/compile_templates.py from web/templates: edit the templates, not this.",
        '#include "page_templates.h"',
        "",
        '#include "sluice/common/html.h"',
        "",
        "namespace sluice::http::templates {",
        "",
    ]
    names = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            nodes = parse(path, f.read())
        name = struct_name(path)
        if name in names:
            raise TemplateError(f"{path}: a second template named {name}")
        names.add(name)
        members = fields(nodes, path)
        header.append(f"/// web/templates/{os.path.basename(path)}")
        header.append(f"struct {name} {{")
        for member, kind in members.items():
            header.append(f"  bool {member} = false;" if kind == "bool" else f"  std::string_view {member}{{}};")
        header.append("};")
        header.append(f"void Render(const {name}& v, Lang lang, std::string& out);")
        header.append(f"inline void Render(const {name}& v, std::string& out) {{ Render(v, Lang::kEn, out); }}")
        header.append("")
        body = []
        raw_fields = set()
        literal_bytes = emit(nodes, 1, body, raw_fields, catalogs, path)
        reserve = " + ".join([str(literal_bytes)] + [f"v.{f}.size()" for f in sorted(raw_fields)])
        source.append(f"void Render(const {name}& v, [[maybe_unused]] Lang lang, std::string& out) {{")
        source.append(f"  out.reserve(out.size() + {reserve});")
        source.extend(body)
        source.append("}")
        source.append("")
    header.append("}  // namespace sluice::http::templates")
    source.append("}  // namespace sluice::http::templates")
    return "\n".join(header) + "\n", "\n".join(source) + "\n"


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--header")
    parser.add_argument("--source")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--locale", help="the catalogs' folder (web/locale)")
    parser.add_argument("templates", nargs="+")
    args = parser.parse_args()
    try:
        header, source = compile_all(sorted(args.templates), args.locale)
    except (TemplateError, po.PoError) as e:
        print(f"compile_templates: {e}", file=sys.stderr)
        return 1
    if not args.check:
        write(args.header, header)
        write(args.source, source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
