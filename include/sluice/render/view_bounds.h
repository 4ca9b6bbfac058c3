// What one view of a paste may cost: a paste is at most max_paste_bytes, but its page is not
// bounded by that alone. Every line becomes a `<span class="l" id="L…">` of some 33 bytes, so a
// paste of a million line breaks was a 37 MB page, and escaping or highlighting multiplies the
// rest (`<` is 4 bytes on the page; one line of a million `>` is 27 MB of Markdown). A view
// therefore shows the head of its paste within these bounds and links to /raw/ID for the whole
// text, as code hosts do for large files (docs/overload.md, "What a view costs").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::render {

struct ViewBounds {
  /// Bytes of rendered fragment (the page's lines) one view holds (`view_max_bytes`).
  /// Default: 2 MiB.
  size_t max_bytes = size_t{2} << 20;
  /// Lines one view shows (`view_max_lines`). Default: 20,000.
  size_t max_lines = 20'000;
};

/// A finished view fragment and how much of its paste it shows. Immutable once made: the render
/// cache and every page built from it share one copy.
struct Rendering {
  std::string html;
  /// Lines the fragment shows.
  size_t lines = 0;
  /// True when it shows only the head of its paste.
  bool cut = false;
  /// True when the full-quality rendering of the head outgrew the bounds (Markdown that nests,
  /// a single line that highlights past max_bytes) and this is the plain head in its place.
  bool too_large = false;
};

/// The part of a paste one view renders: whole lines from the start, at most `max_lines` of them
/// and at most `max_bytes` bytes (no rendering is smaller than its text). A first line longer than
/// `max_bytes` is cut at a character boundary. Costs one scan of the head, never of the rest.
struct ViewHead {
  std::string_view text;
  size_t lines = 0;
  bool cut = false;
};
ViewHead HeadForView(std::string_view text, const ViewBounds& bounds);

/// The plain rung's fragment (render::PlainLines' shape) of as much of `text` as fits the bounds,
/// counted in output bytes: a line that would pass `max_bytes` is left out, and a first line that
/// alone would is cut at a character boundary. Its cost is bounded by the bounds, not the paste.
Rendering PlainRendering(std::string_view text, const ViewBounds& bounds);

/// Keeps the whole lines of a line-shaped fragment (render::Highlight's, a diff's) that fit in
/// `max_bytes`; `source_cut` says whether its input was already a head. Empty when even its first
/// line is longer: the caller shows the plain head instead.
std::optional<Rendering> CutLineFragment(std::string html, bool source_cut,
                                         const ViewBounds& bounds);

}  // namespace sluice::render
