// The HTML pages of the web UI, in the reader's language (docs/translations.md). Their markup is in
// web/templates, compiled at build time by tools/compile_templates.py into page_templates.h, which
// escapes every slot unless its name ends in _html: paste text enters a page escaped, or as the
// highlighter's fragment, which escapes every character itself (render/highlighter.h). Pages carry
// no inline script or style: the CSP below allows only the binary's own /static files
// (docs/web.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "page_language.h"
#include "sluice/service/transparency.h"

namespace sluice::http {

/// Content-Security-Policy of every HTML page: scripts, styles and fetches from this origin only,
/// nothing inline, no plugins, no framing.
inline constexpr const char* kPageCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// What the create page starts with when it makes a fork (GET /new?from=ID).
struct CreatePrefill {
  /// The text the box starts with; empty when it is too large to carry in the page (`load_from`).
  std::string_view text;
  std::string_view parent;    // the id recorded as the new paste's parent
  std::string_view language;  // preselected, or "" for automatic
  /// Set instead of `text` for a large paste: the page's script loads the box from this raw link,
  /// so the page stays small whatever the paste (docs/overload.md, "What a view costs").
  std::string load_from{};
  uint64_t size_bytes = 0;
};
/// The create page. `max_paste_bytes` bounds what its script encrypts (docs/encryption.md).
/// With `proof_of_work` its script asks GET /api/v1/limits before a create and, when the server
/// asks for a solution, finds it in a Web Worker (web/static/pow.js) before sending the form
/// (docs/overload.md, "Proof of work"); without it the page sends no extra request.
std::string IndexPage(const Reader& reader, std::string_view default_ttl,
                      uint64_t max_paste_bytes = 1'000'000, const CreatePrefill* prefill = nullptr,
                      bool proof_of_work = false);

/// What the paste page shows beyond the paste: present only on the answer to the create.
struct CreatedNotice {
  std::string delete_url;  // the delete link, with its token: shown this once
};

struct PasteView {
  std::string id;
  std::string url;      // the link to share
  std::string raw_url;  // "/raw/ID"
  int64_t expires_at = 0;
  uint64_t size_bytes = 0;
  std::string language_label;  // "Python"; "" for plain text, which the page says in its language
  std::string rung_tag;        // the X-Sluice-Rung value, shown small
  bool shed = false;           // on the plain rung: say why, so nobody thinks highlighting broke
  /// On the plain rung because highlighted it outgrew the view's bounds (reason too_large).
  bool too_large = false;
  /// The view shows only the first `shown_lines` lines (render::ViewBounds); the page says so and
  /// points to the raw text and the download.
  bool cut = false;
  size_t shown_lines = 0;
  /// False on a burned paste's last reading: the row is a tombstone, and a report of it is 404.
  bool reportable = true;
  /// On a counted paste's reading (burn, max_views): the views it has left after this one.
  std::optional<uint32_t> views_left;
  /// The paste it was forked from: the view links it and the diff.
  std::optional<std::string> parent;
  /// Offers "New paste from this" (GET /new?from=ID): false for a counted paste's reading.
  bool forkable = true;
  /// A Markdown paste's source: offers its rendered view (/ID/rendered).
  bool markdown = false;
  /// The fragment from render::Highlight or render::PlainLines.
  std::string_view lines;
  std::optional<CreatedNotice> created;
};
std::string PastePage(const Reader& reader, const PasteView& view);

/// What the page of an end-to-end encrypted paste knows: nothing of its text.
struct EncryptedView {
  std::string id;
  int64_t expires_at = 0;
  uint64_t size_bytes = 0;  // of the envelope
  bool burn = false;
  /// Largest text the script inflates (the paste limit): a small envelope cannot exhaust the
  /// reader's memory.
  uint64_t max_paste_bytes = 1'000'000;
};
/// The shell the page's script (/static/crypt.js, with Subresource Integrity) fills: it fetches
/// the envelope (or, for a burn paste, claims it after a confirmation), decrypts it with the key
/// in the link's fragment, asking for the password when the envelope has one, and shows the text
/// through textContent only. Without JavaScript it says that this paste needs it.
std::string EncryptedPastePage(const Reader& reader, const EncryptedView& view);
/// A view derived from a paste and rendered in the workers like its highlighting: a fork's diff
/// against its parent, or a Markdown paste's rendered view.
struct DerivedView {
  enum class Kind { kDiff, kMarkdown } kind = Kind::kDiff;
  std::string id;
  std::string parent;    // kDiff: the parent's id
  std::string rung_tag;  // the X-Sluice-Rung value, shown small
  /// On the plain rung: the fragment is the paste's own lines (PlainLines), not the derived view.
  bool plain = false;
  /// On the plain rung because the derived view outgrew the view's bounds (reason too_large).
  bool too_large = false;
  /// The fragment shows only its first `shown_lines` lines (render::ViewBounds).
  bool cut = false;
  size_t shown_lines = 0;
  /// The fragment: a diff's highlighted lines ("" when the two are equal), the Markdown's HTML, or
  /// on the plain rung the paste's plain lines.
  std::string_view html;
};
std::string DerivedPage(const Reader& reader, const DerivedView& view);

/// An error a person reads: what happened, whether it is a limit, an overload or a missing paste,
/// and when to try again.
std::string ErrorPage(const Reader& reader, unsigned status, std::string_view reason,
                      std::string_view message, std::optional<int64_t> retry_after_seconds,
                      int64_t now_unix);

/// What a browser sees at a burn-after-reading paste's link: a warning and a button whose POST
/// (to /claim/ID) burns it and shows the text. A GET never burns (chat link previews).
/// `views_left`: how many readers may still open it (1 for burn after reading).
std::string BurnConfirmPage(const Reader& reader, std::string_view id, uint32_t views_left = 1);
/// The answer to a browser's burn-after-reading create: the links, never the text (showing it
/// would need the render cache, and the creator has it anyway).
/// `views`: the paste's max_views (1 for burn after reading).
std::string BurnCreatedPage(const Reader& reader, std::string_view url, std::string_view delete_url,
                            uint32_t views = 1);

std::string DeleteConfirmPage(const Reader& reader, std::string_view id, std::string_view token);
/// The report form of a paste (GET /report/{id}), carrying the form's `token` (the value of its
/// cookie, src/http/admin_handlers.cc), and the thanks after it (POST).
std::string ReportFormPage(const Reader& reader, std::string_view id, std::string_view token);
std::string ReportedPage(const Reader& reader, std::string_view id);
std::string DeletedPage(const Reader& reader, std::string_view id);

/// The operator's page: the numbers now (`metrics`, from MetricsRegistry::Collect); the script
/// then keeps them and the charts live.
std::string StatusPage(const Reader& reader,
                       const std::vector<std::pair<std::string, double>>& metrics,
                       int64_t now_unix);

class PublicContact;
/// How to report abuse (GET /abuse): the contact's settings, and `pending`, the pastes in the
/// review queue.
std::string AbusePage(const Reader& reader, const PublicContact& contact, int64_t pending);

/// The transparency report (GET /transparency): the months of `report` with anything counted,
/// and the newest month always.
std::string TransparencyPage(const Reader& reader, const service::TransparencyReport& report);

/// RFC 3339 UTC ("2026-12-07T10:00:00Z") for expiry times in JSON and pages.
std::string FormatUnixTime(int64_t unix_seconds);

/// "12 seconds", "3 minutes", "1 hour 5 minutes", in `lang`.
std::string DurationInWords(int64_t seconds, i18n::Lang lang = i18n::Lang::kEn);

/// "512 bytes", "1.5 KiB", "2.0 MiB", in `lang`.
std::string SizeInWords(uint64_t bytes, i18n::Lang lang = i18n::Lang::kEn);

}  // namespace sluice::http
