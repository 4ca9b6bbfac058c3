"""Reads and writes the gettext catalogs of web/locale (docs/translations.md).

The subset of the PO format (https://www.gnu.org/software/gettext/manual/html_node/PO-Files.html)
sluice's catalogs use: comments, `#:` references, `#,` flags, msgctxt-free msgid/msgstr pairs with
C escapes, continued over several quoted lines. No plural forms: the templates choose between a
singular and a plural sentence themselves (web/templates), so every message has one msgstr.
tests/web/test_catalogs.py checks this reader against msgfmt's own compilation of every catalog.

Python's `gettext` module reads only compiled .mo files, and compiling at build time would make
msgfmt a build dependency of the server; this reader keeps the build on Python alone.
"""

import os
import re

ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
           "v": "\v"}
QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*$')


class PoError(Exception):
    pass


class Message:
    """One entry: its msgid and msgstr, flags (fuzzy), and the files it comes from."""

    def __init__(self, msgid="", msgstr="", flags=(), references=(), comments=()):
        self.msgid = msgid
        self.msgstr = msgstr
        self.flags = set(flags)
        self.references = list(references)
        self.comments = list(comments)

    @property
    def fuzzy(self):
        return "fuzzy" in self.flags


def unquote(text, where):
    match = QUOTED.match(text.strip())
    if not match:
        raise PoError(f"{where}: expected a quoted string, got {text.strip()!r}")
    body = match.group(1)
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            if nxt not in ESCAPES:
                raise PoError(f"{where}: unknown escape \\{nxt}")
            out.append(ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse(text, path="<po>"):
    """Returns the catalog's entries in order, the header (msgid "") first if present."""
    messages = []
    current = None
    field = None
    pending = Message()

    def finish():
        nonlocal current, field, pending
        if current is not None:
            if current.msgstr is None:
                raise PoError(f"{path}: msgid {current.msgid!r} has no msgstr")
            messages.append(current)
        current = None
        field = None

    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        stripped = line.strip()
        if not stripped:
            finish()
            pending = Message()
            continue
        if stripped.startswith("#"):
            if current is not None and field == "msgstr":
                finish()
                pending = Message()
            if stripped.startswith("#,"):
                pending.flags.update(f.strip() for f in stripped[2:].split(",") if f.strip())
            elif stripped.startswith("#:"):
                pending.references.extend(stripped[2:].split())
            elif stripped.startswith("#~"):
                pass  # an obsolete entry msgmerge kept: not a message
            else:
                pending.comments.append(stripped[1:].strip())
            continue
        if stripped.startswith("msgctxt") or stripped.startswith("msgid_plural"):
            raise PoError(f"{where}: {stripped.split()[0]} is not used by sluice's catalogs")
        if stripped.startswith("msgid "):
            finish()
            current = pending
            pending = Message()
            current.msgid = unquote(stripped[len("msgid "):], where)
            current.msgstr = None
            field = "msgid"
        elif stripped.startswith("msgstr "):
            if current is None or field != "msgid":
                raise PoError(f"{where}: msgstr without a msgid")
            current.msgstr = unquote(stripped[len("msgstr "):], where)
            field = "msgstr"
        elif stripped.startswith('"'):
            if current is None:
                raise PoError(f"{where}: a string outside an entry")
            value = unquote(stripped, where)
            if field == "msgid":
                current.msgid += value
            else:
                current.msgstr += value
        else:
            raise PoError(f"{where}: cannot read {stripped!r}")
    finish()
    seen = set()
    for m in messages:
        if m.msgid in seen:
            raise PoError(f"{path}: msgid {m.msgid!r} appears twice")
        seen.add(m.msgid)
    return messages


def read(path):
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)


def header_field(messages, name):
    """A field of the header entry (msgid ""), such as Language."""
    for m in messages:
        if m.msgid == "":
            for line in m.msgstr.splitlines():
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    return None


def translations(messages):
    """msgid -> msgstr for every translated, non-fuzzy message (the header left out)."""
    return {m.msgid: m.msgstr for m in messages if m.msgid and m.msgstr and not m.fuzzy}


def quote(text):
    """A msgid or msgstr as PO lines: one line, or "" then one line per line break."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    parts = escaped.split("\n")
    if len(parts) == 1:
        return f'"{escaped}"'
    lines = [f'"{p}\\n"' for p in parts[:-1]] + ([f'"{parts[-1]}"'] if parts[-1] else [])
    return '""\n' + "\n".join(lines)


def enum_name(tag):
    """The C++ enumerator of a language tag: "zh-Hans" is kZhHans."""
    return "k" + "".join(part[:1].upper() + part[1:].lower() for part in tag.split("-"))


def languages(locale_dir):
    """The shipped languages in the order of the generated enum: English (the msgids, no
    catalog) first, then every web/locale/<tag>.po by tag. Returns (tag, enum, path or None)."""
    found = sorted(f[:-3] for f in os.listdir(locale_dir) if f.endswith(".po"))
    return [("en", "kEn", None)] + [(t, enum_name(t), os.path.join(locale_dir, t + ".po"))
                                    for t in found]
