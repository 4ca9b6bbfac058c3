#include "file_language.h"

#include <utility>

#include "sluice/render/highlighter.h"

namespace sluice::http {

namespace {

// Extensions people and haste clients put on links, beside the names of the languages themselves
// (so /ID.python works too). Only names the highlighter knows pass (LanguageForExtension).
constexpr std::pair<std::string_view, std::string_view> kExtensions[] = {
    {"sh", "bash"},       {"bash", "bash"},      {"zsh", "bash"},    {"h", "c"},
    {"cc", "cpp"},        {"cxx", "cpp"},        {"hpp", "cpp"},     {"hh", "cpp"},
    {"cs", "csharp"},     {"patch", "diff"},     {"erl", "erlang"},  {"hs", "haskell"},
    {"htm", "html"},      {"toml", "ini"},       {"conf", "ini"},    {"cfg", "ini"},
    {"js", "javascript"}, {"mjs", "javascript"}, {"tex", "latex"},   {"el", "lisp"},
    {"lsp", "lisp"},      {"mk", "makefile"},    {"pl", "perl"},     {"pm", "perl"},
    {"py", "python"},     {"rb", "ruby"},        {"rs", "rust"},     {"sc", "scala"},
    {"svg", "xml"},       {"txt", "text"},       {"md", "markdown"}, {"mkd", "markdown"},
};

}  // namespace

std::string LanguageForExtension(std::string_view extension) {
  if (extension.empty() || extension.size() > 16) return "";
  std::string lower;
  for (char c : extension) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [ext, language] : kExtensions) {
    if (ext == lower) return std::string(language);
  }
  // "text" is no highlighter language but a choice the links already understand (plain text).
  if (lower == "text" || render::IsLanguage(lower)) return lower;
  return "";
}

std::string_view FileExtension(std::string_view filename) {
  const size_t slash = filename.find_last_of("/\\");
  if (slash != std::string_view::npos) filename.remove_prefix(slash + 1);
  const size_t dot = filename.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  return filename.substr(dot + 1);
}

}  // namespace sluice::http
