#include "sluice/render/view_bounds.h"

#include <algorithm>
#include <cstring>

namespace sluice::render {

namespace {

// The start of the character that holds byte `at` of valid UTF-8 (the create path validates it).
size_t CharacterStart(std::string_view text, size_t at) {
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace

ViewHead HeadForView(std::string_view text, const ViewBounds& bounds) {
  ViewHead head;
  size_t end = 0;  // bytes of whole lines taken, line breaks included
  while (end < text.size() && head.lines < bounds.max_lines) {
    const void* found = std::memchr(text.data() + end, '\n', text.size() - end);
    const size_t line_end =
        found == nullptr ? text.size() : static_cast<const char*>(found) - text.data() + 1;
    if (line_end > bounds.max_bytes) {
      if (head.lines == 0) {
        end = CharacterStart(text, std::min(bounds.max_bytes, text.size()));
        head.lines = 1;
      }
      break;
    }
    end = line_end;
    ++head.lines;
  }
  head.text = text.substr(0, end);
  head.cut = end < text.size();
  return head;
}

std::optional<Rendering> CutLineFragment(std::string html, bool source_cut,
                                         const ViewBounds& bounds) {
  Rendering out;
  out.cut = source_cut;
  if (html.size() > bounds.max_bytes) {
    const size_t last =
        bounds.max_bytes == 0 ? std::string::npos : html.rfind('\n', bounds.max_bytes - 1);
    if (last == std::string::npos) return std::nullopt;
    html.resize(last + 1);
    out.cut = true;
  }
  out.lines = static_cast<size_t>(std::count(html.begin(), html.end(), '\n'));
  out.html = std::move(html);
  return out;
}

}  // namespace sluice::render
