// Markdown's rendered view: CommonMark with GitHub's tables, strikethrough, autolinks and task
// lists (Debian's libcmark-gfm), made safe for a public pastebin's page.
#pragma once

#include <string>
#include <string_view>

namespace sluice::render {

/// Renders `text` as GitHub-flavoured Markdown into an HTML fragment for the paste page:
/// - raw HTML, block or inline, is dropped (the library's safe mode: `<!-- raw HTML omitted -->`),
///   and so are links whose scheme may run script (javascript:, vbscript:, file:, data: but
///   images), which the safe mode empties;
/// - every link gets rel="nofollow noopener ugc" (a paste is user content; no Referer and no
///   window.opener cross to the target);
/// - no image is loaded from anywhere: an image becomes a link to its address labelled with its
///   alt text (beside the page's CSP, img-src 'self', which would refuse a remote one anyway), so
///   a page of a public pastebin cannot be made a tracking pixel.
/// Blocking CPU work of a cost that grows with the input (bounded by the caller: it runs only in
/// HighlightWorkers' processes, killed at the render timeout). NOT thread-safe: cmark-gfm's
/// extension registry and its table of special inline characters (inlines.c, SKIP_CHARS, which
/// attaching an extension to a parser writes) are process-global, so one thread per process may
/// call it; the server calls it only in its single-threaded worker processes.
std::string RenderMarkdown(std::string_view text);

}  // namespace sluice::render
