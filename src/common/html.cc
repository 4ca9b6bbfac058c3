#include "sluice/common/html.h"

namespace sluice {

void AppendHtmlEscaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

size_t HtmlEscapedSize(std::string_view text) {
  size_t size = text.size();
  for (char c : text) {
    switch (c) {
      case '&':
        size += 4;
        break;
      case '<':
      case '>':
        size += 3;
        break;
      case '"':
        size += 5;
        break;
      case '\'':
        size += 4;
        break;
      default:
        break;
    }
  }
  return size;
}

std::string HtmlEscaped(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  AppendHtmlEscaped(out, text);
  return out;
}

}  // namespace sluice
