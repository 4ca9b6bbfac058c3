#include "sluice/render/highlighter.h"

#include <srchilite/formatter.h>
#include <srchilite/formattermanager.h>
#include <srchilite/formatterparams.h>
#include <srchilite/langdefmanager.h>
#include <srchilite/regexrulefactory.h>
#include <srchilite/sourcehighlighter.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>

#include "sluice/common/html.h"
#include "sluice/render/view_bounds.h"

namespace sluice::render {
namespace {

// Debian's source-highlight keeps its language definitions here (package source-highlight).
constexpr const char* kDataDir = "/usr/share/source-highlight";

struct LanguageDef {
  const char* name;
  const char* label;
  const char* file;
};

// A definition without a file is shown as plain lines: Markdown, whose view of its own is the
// rendered one (render/markdown.h); source-highlight has no definition for it.
constexpr std::array<LanguageDef, 31> kLanguages = {{
    {"bash", "Shell", "sh.lang"},
    {"c", "C", "c.lang"},
    {"cpp", "C++", "cpp.lang"},
    {"csharp", "C#", "csharp.lang"},
    {"css", "CSS", "css.lang"},
    {"diff", "Diff", "diff.lang"},
    {"erlang", "Erlang", "erlang.lang"},
    {"go", "Go", "go.lang"},
    {"haskell", "Haskell", "haskell.lang"},
    {"html", "HTML", "html.lang"},
    {"ini", "INI / TOML / conf", "conf.lang"},
    {"java", "Java", "java.lang"},
    {"javascript", "JavaScript", "javascript.lang"},
    {"json", "JSON", "json.lang"},
    {"latex", "LaTeX", "latex.lang"},
    {"lisp", "Lisp", "lisp.lang"},
    {"log", "Log", "log.lang"},
    {"lua", "Lua", "lua.lang"},
    {"makefile", "Makefile", "makefile.lang"},
    {"markdown", "Markdown", ""},
    {"perl", "Perl", "perl.lang"},
    {"php", "PHP", "php.lang"},
    {"properties", "Properties", "properties.lang"},
    {"python", "Python", "python.lang"},
    {"r", "R", "r.lang"},
    {"ruby", "Ruby", "ruby.lang"},
    {"rust", "Rust", "rust.lang"},
    {"scala", "Scala", "scala.lang"},
    {"sql", "SQL", "sql.lang"},
    {"tcl", "Tcl", "tcl.lang"},
    {"xml", "XML", "xml.lang"},
}};

const LanguageDef* FindLanguage(std::string_view name) {
  for (const LanguageDef& def : kLanguages) {
    if (name == def.name) return &def;
  }
  return nullptr;
}

// Writes one element's runs as a span with our class; the library hands over raw source text.
class SpanFormatter final : public srchilite::Formatter {
 public:
  SpanFormatter(std::string* out, std::string element) : out_(out), element_(std::move(element)) {
    // Element names come from the library's language files: keep only what a class name may hold.
    element_.erase(std::remove_if(element_.begin(), element_.end(),
                                  [](char c) {
                                    return !(std::isalnum(static_cast<unsigned char>(c)) ||
                                             c == '_' || c == '-');
                                  }),
                   element_.end());
  }
  void format(const std::string& s, const srchilite::FormatterParams*) override {
    if (s.empty()) return;
    if (element_.empty() || element_ == "normal") {
      AppendHtmlEscaped(*out_, s);
      return;
    }
    *out_ += "<span class=\"hl-";
    *out_ += element_;
    *out_ += "\">";
    AppendHtmlEscaped(*out_, s);
    *out_ += "</span>";
  }

 private:
  std::string* out_;
  std::string element_;
};

// The elements source-highlight's language files use; anything else falls to the default
// formatter and is shown unstyled (but escaped all the same).
// (oldfile, newfile and difflines are diff.lang's: the removed, added and hunk-header lines.)
constexpr std::array<const char*, 25> kElements = {
    "keyword",     "type",     "string",   "comment",     "number",    "preproc",   "symbol",
    "function",    "cbracket", "variable", "specialchar", "classname", "todo",      "label",
    "url",         "regexp",   "usertype", "property",    "value",     "attribute", "predef_var",
    "predef_func", "oldfile",  "newfile",  "difflines"};

// Parsed once per process and kept: loading a definition runs the library's flex scanners, whose
// state is global, so only one thread of a process may ever call this (see
// include/sluice/render/highlight_workers.h: the server calls it only in single-threaded workers).
srchilite::HighlightStatePtr StateFor(const LanguageDef& def) {
  static srchilite::RegexRuleFactory rule_factory;
  static srchilite::LangDefManager lang_defs(&rule_factory);
  static std::map<std::string, srchilite::HighlightStatePtr> states;
  auto it = states.find(def.file);
  if (it == states.end()) {
    it = states.emplace(def.file, lang_defs.getHighlightState(kDataDir, def.file)).first;
  }
  return it->second;
}

template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line);
    start = end + 1;
  }
  if (text.empty()) fn(std::string_view());
}

// A line's element carries its anchor (`#L12`) so a link to one line works by :target alone,
// with no script; the number itself is drawn by CSS (a counter in ::before), so selecting and
// copying the text never copies the numbers.
void AppendLineOpen(std::string& out, size_t number) {
  out += "<span class=\"l\" id=\"L";
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, number);
  out.append(digits, end);
  out += "\">";
}

bool StartsWith(std::string_view text, std::string_view prefix) { return text.starts_with(prefix); }

bool Contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

}  // namespace

const std::vector<Language>& Languages() {
  static const std::vector<Language> languages = [] {
    std::vector<Language> out;
    for (const LanguageDef& def : kLanguages) out.push_back({def.name, def.label});
    return out;
  }();
  return languages;
}

bool IsLanguage(std::string_view name) { return FindLanguage(name) != nullptr; }

std::string DetectLanguage(std::string_view text) {
  // Only the head is read: detection must stay cheap next to the highlighting it chooses.
  const std::string_view head = text.substr(0, 4096);
  size_t first_end = head.find('\n');
  const std::string_view first = head.substr(0, first_end);
  if (StartsWith(first, "#!")) {
    if (Contains(first, "python")) return "python";
    if (Contains(first, "perl")) return "perl";
    if (Contains(first, "ruby")) return "ruby";
    if (Contains(first, "node")) return "javascript";
    if (Contains(first, "lua")) return "lua";
    if (Contains(first, "sh")) return "bash";
  }
  if (StartsWith(first, "<?php")) return "php";
  if (StartsWith(first, "<?xml")) return "xml";
  if (StartsWith(first, "diff --git") || StartsWith(first, "--- ") || StartsWith(first, "Index: "))
    return "diff";
  size_t lead = head.find_first_not_of(" \t\r\n");
  if (lead != std::string_view::npos) {
    const std::string_view rest = head.substr(lead);
    std::string lower(rest.substr(0, 15));
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower.starts_with("<!doctype html") || lower.starts_with("<html")) return "html";
    if ((rest.front() == '{' || rest.front() == '[') && Contains(head, "\":")) return "json";
  }
  if (Contains(head, "#include <") || Contains(head, "#include \"")) {
    return Contains(head, "std::") || Contains(head, "namespace ") ||
                   Contains(head, "template <") || Contains(head, "class ")
               ? "cpp"
               : "c";
  }
  if (Contains(head, "package main") || (Contains(head, "func ") && Contains(head, ":= ")))
    return "go";
  if (Contains(head, "fn ") && (Contains(head, "let mut ") || Contains(head, "impl ") ||
                                Contains(head, "use std::") || Contains(head, "-> ")))
    return "rust";
  if (Contains(head, "public class ") || Contains(head, "public static void main")) return "java";
  if (Contains(head, "def ") && Contains(head, "):")) return "python";
  if ((Contains(head, "import ") && Contains(head, "from ")) && Contains(head, "\n    ")) {
    return Contains(head, "const ") || Contains(head, "=>") ? "javascript" : "python";
  }
  if (Contains(head, "function ") || (Contains(head, "const ") && Contains(head, "=>")) ||
      Contains(head, "console.log("))
    return "javascript";
  {
    std::string upper(head.substr(0, 512));
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if ((Contains(upper, "SELECT ") && Contains(upper, " FROM ")) ||
        Contains(upper, "CREATE TABLE ") || Contains(upper, "INSERT INTO "))
      return "sql";
  }
  if (Contains(head, "\ndef ") || StartsWith(head, "def ") || Contains(head, "\nend\n"))
    return "ruby";
  return "";
}

Result<std::string> Highlight(std::string_view text, std::string_view language) {
  const LanguageDef* def = FindLanguage(language);
  if (def == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "unknown language", "unknown_language");
  }
  if (*def->file == '\0') return PlainLines(text);
  std::string out;
  out.reserve(text.size() * 2 + 64);
  try {
    // Element formatters write into `out`; the default one keeps unknown elements unstyled.
    srchilite::FormatterManager formatters(
        srchilite::FormatterPtr(new SpanFormatter(&out, "normal")));
    for (const char* element : kElements) {
      formatters.addFormatter(element, srchilite::FormatterPtr(new SpanFormatter(&out, element)));
    }
    srchilite::SourceHighlighter highlighter(StateFor(*def));
    highlighter.setFormatterManager(&formatters);
    highlighter.setOptimize(false);
    srchilite::FormatterParams params;
    highlighter.setFormatterParams(&params);
    size_t number = 0;
    ForEachLine(text, [&](std::string_view line) {
      AppendLineOpen(out, ++number);
      params.start = 0;
      highlighter.highlightParagraph(std::string(line));
      out += "</span>\n";
    });
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("highlighter: ") + e.what(),
                     "render_failed");
  } catch (...) {
    return MakeError(ErrorCode::kInternal, "highlighter failed", "render_failed");
  }
  return out;
}

std::string PlainLines(std::string_view text) {
  return PlainRendering(text, {.max_bytes = SIZE_MAX, .max_lines = SIZE_MAX}).html;
}

// Here rather than in view_bounds.cc: it is PlainLines with a budget, so it shares its line walk.
Rendering PlainRendering(std::string_view text, const ViewBounds& bounds) {
  Rendering out;
  const size_t budget = std::min(bounds.max_bytes, text.size() + text.size() / 4 + 64);
  out.html.reserve(budget == SIZE_MAX ? text.size() : budget);
  size_t shown = 0;  // bytes of `text` rendered
  size_t number = 0;
  bool full = false;
  ForEachLine(text, [&](std::string_view line) {
    if (full) return;
    if (number == bounds.max_lines) {
      full = true;
      return;
    }
    const size_t before = out.html.size();
    AppendLineOpen(out.html, number + 1);
    AppendHtmlEscaped(out.html, line);
    out.html += "</span>\n";
    if (out.html.size() <= bounds.max_bytes) {
      ++number;
      // An empty paste's one line is a default string_view, not a part of `text`.
      if (!text.empty()) shown = static_cast<size_t>(line.data() - text.data()) + line.size();
      return;
    }
    full = true;
    out.html.resize(before);
    if (number > 0) return;
    // A first line that alone passes the budget: as many whole characters of it as fit.
    AppendLineOpen(out.html, 1);
    constexpr size_t kLineClose = sizeof("</span>\n") - 1;
    size_t end = 0;
    std::string escaped;
    while (end < line.size()) {
      size_t next = end + 1;
      while (next < line.size() && (static_cast<unsigned char>(line[next]) & 0xC0) == 0x80) ++next;
      escaped.clear();
      AppendHtmlEscaped(escaped, line.substr(end, next - end));
      if (out.html.size() + escaped.size() + kLineClose > bounds.max_bytes) break;
      out.html += escaped;
      end = next;
    }
    out.html += "</span>\n";
    number = 1;
    shown = static_cast<size_t>(line.data() - text.data()) + end;
  });
  out.lines = number;
  // What is left after the last shown line is only its line break (and a \r before it).
  std::string_view rest = text.substr(std::min(shown, text.size()));
  if (!rest.empty() && rest.front() == '\r') rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '\n') rest.remove_prefix(1);
  out.cut = !rest.empty();
  return out;
}

}  // namespace sluice::render
