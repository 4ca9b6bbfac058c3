#include "pages.h"

#include <fmt/format.h>

#include <ctime>
#include <map>

#include "assets.h"
#include "page_templates.h"
#include "sluice/render/highlighter.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

// The scripts a page loads after app.js (docs/web.md).
struct PageScripts {
  bool status = false;  // status.js: the live panels of /status
  bool crypt = false;   // crypt.js: encryption in the browser
  bool share = false;   // qrcode.js and qr.js: the QR code of a share link
};

// Renders `page` inside the layout: the title, the stylesheet, app.js and the page's own scripts.
// The scripts that see an encrypted paste's key carry their Subresource Integrity: a page that
// holds one must run exactly the script this binary shipped, whatever a cache or a proxy on the
// way holds.
template <class Page>
std::string WholePage(const templates::Title& title, const Page& page, PageScripts scripts = {}) {
  std::string title_html;
  templates::Render(title, title_html);
  std::string body;
  templates::Render(page, body);
  static const Asset* const qrcode = FindAsset("/static/qrcode.js");
  static const Asset* const qr = FindAsset("/static/qr.js");
  static const Asset* const crypt = FindAsset("/static/crypt.js");
  templates::Layout layout;
  layout.title_html = title_html;
  layout.style_url = AssetUrl("/static/style.css");
  layout.app_url = AssetUrl("/static/app.js");
  layout.status = scripts.status;
  layout.status_url = AssetUrl("/static/status.js");
  layout.share = scripts.share;
  layout.qrcode_url = qrcode->versioned_path;
  layout.qrcode_integrity = qrcode->integrity;
  layout.qr_url = qr->versioned_path;
  layout.qr_integrity = qr->integrity;
  layout.crypt = scripts.crypt;
  layout.crypt_url = crypt->versioned_path;
  layout.crypt_integrity = crypt->integrity;
  layout.body_html = body;
  std::string out;
  templates::Render(layout, out);
  return out;
}

std::string SizeInWords(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024 * 1024));
}

std::string ClockTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S UTC", &tm);
  return buf;
}

// What a person reads about an error: its section of problem.html, by the refusal's reason (the
// `reason` of the JSON error), else by its status. The words are in the template.
using ProblemSection = bool templates::Problem::*;

ProblemSection ProblemOf(unsigned status, std::string_view reason) {
  static const std::map<std::string_view, ProblemSection> kReasons = {
      {"ip_create_count", &templates::Problem::ip_create_count},
      {"ip_create_bytes", &templates::Problem::ip_create_bytes},
      {"global_count", &templates::Problem::global_count},
      {"global_bytes", &templates::Problem::global_bytes},
      {"origin_get_ip", &templates::Problem::origin_get_ip},
      {"create_slots", &templates::Problem::create_slots},
      {"create_bytes", &templates::Problem::create_bytes},
      {"read_slots", &templates::Problem::read_slots},
      {"fill_cap", &templates::Problem::fill_cap},
      {"connections", &templates::Problem::connections},
      {"outcome_unknown", &templates::Problem::outcome_unknown},
      {"body_mismatch", &templates::Problem::body_mismatch},
      {"burn_after_reading", &templates::Problem::burn_after_reading},
      {"storage_quota", &templates::Problem::storage_quota},
      {"body_missing", &templates::Problem::body_missing},
      {"under_review", &templates::Problem::under_review},
      {"taken_down", &templates::Problem::taken_down},
      {"blocked", &templates::Problem::blocked},
      {"report_rate", &templates::Problem::report_rate},
      {"report_global_rate", &templates::Problem::report_global_rate},
      {"cross_site", &templates::Problem::cross_site},
      {"delete_rate", &templates::Problem::delete_rate},
  };
  if (auto it = kReasons.find(reason); it != kReasons.end()) return it->second;
  switch (status) {
    case 404:
      return &templates::Problem::status_404;
    case 429:
      return &templates::Problem::status_429;
    case 503:
    case 504:
      return &templates::Problem::status_503;
    case 400:
    case 411:
    case 413:
      return &templates::Problem::status_400;
    default:
      return &templates::Problem::other;
  }
}

// The problem's title or its explanation, as markup (its template's text, escaped there).
std::string ProblemHtml(ProblemSection section, bool title) {
  templates::Problem problem;
  problem.*section = true;
  problem.title = title;
  std::string html;
  templates::Render(problem, html);
  while (!html.empty() && html.back() == '\n') html.pop_back();
  return html;
}

}  // namespace

std::string FormatUnixTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string DurationInWords(int64_t seconds) {
  auto unit = [](int64_t n, const char* name) {
    return fmt::format("{} {}{}", n, name, n == 1 ? "" : "s");
  };
  if (seconds < 60) return unit(std::max<int64_t>(seconds, 1), "second");
  if (seconds < 3600) {
    const int64_t rest = seconds % 60;
    return rest == 0 ? unit(seconds / 60, "minute")
                     : unit(seconds / 60, "minute") + " " + unit(rest, "second");
  }
  if (seconds < 86400) {
    const int64_t rest = (seconds % 3600) / 60;
    return rest == 0 ? unit(seconds / 3600, "hour")
                     : unit(seconds / 3600, "hour") + " " + unit(rest, "minute");
  }
  return unit(seconds / 86400, "day");
}

std::string IndexPage(std::string_view default_ttl, uint64_t max_paste_bytes,
                      const CreatePrefill* prefill) {
  std::string ttls;
  for (const auto& [name, seconds] : service::TtlAllowList()) {
    const std::string label = DurationInWords(seconds.count());
    templates::Render(
        templates::Option{.value = name, .selected = name == default_ttl, .label = label}, ttls);
  }
  const std::string_view chosen = prefill ? prefill->language : std::string_view();
  std::string languages;
  for (const render::Language& language : render::Languages()) {
    templates::Render(
        templates::Option{
            .value = language.name, .selected = chosen == language.name, .label = language.label},
        languages);
  }
  const std::string max_bytes = std::to_string(max_paste_bytes);
  const std::string size = prefill ? SizeInWords(prefill->size_bytes) : std::string();
  templates::Index page;
  page.max_bytes = max_bytes;
  page.fork = prefill != nullptr;
  page.auto_language = chosen.empty();
  page.plain_text = chosen == "text";
  page.language_options_html = languages;
  page.ttl_options_html = ttls;
  if (prefill) {
    page.parent = prefill->parent;
    page.load = !prefill->load_from.empty();
    page.load_from = prefill->load_from;
    page.size = size;
    page.text = prefill->text;
  }
  return WholePage({.new_paste = true}, page, {.crypt = true, .share = true});
}

std::string PastePage(const PasteView& view) {
  const std::string size = SizeInWords(view.size_bytes);
  const std::string expires_at = FormatUnixTime(view.expires_at);
  const std::string views_left = view.views_left ? std::to_string(*view.views_left) : "";
  const std::string shown_lines = std::to_string(view.shown_lines);
  templates::Paste page;
  page.created = view.created.has_value();
  page.share_url = view.url;
  if (view.created) page.delete_url = view.created->delete_url;
  page.id = view.id;
  page.language_label = view.language_label;
  page.size = size;
  page.expires_at = expires_at;
  page.rung = view.rung_tag;
  page.raw_url = view.raw_url;
  page.markdown = view.markdown;
  page.forkable = view.forkable && !view.views_left;
  page.reportable = view.reportable;
  page.forked = view.parent.has_value();
  if (view.parent) page.parent = *view.parent;
  page.last_view = view.views_left && *view.views_left == 0;
  page.one_view_left = view.views_left && *view.views_left == 1;
  page.views_left_some = view.views_left && *view.views_left > 1;
  page.views_left = views_left;
  page.shed = view.shed;
  page.cut = view.cut;
  page.too_large = !view.shed && view.too_large;
  page.counted = view.views_left.has_value();
  page.one_line = view.shown_lines == 1;
  page.shown_lines = shown_lines;
  page.lines_html = view.lines;
  return WholePage({.paste = true, .id = view.id}, page, {.share = view.created.has_value()});
}

std::string DerivedPage(const DerivedView& view) {
  const bool diff = view.kind == DerivedView::Kind::kDiff;
  const std::string shown_lines = std::to_string(view.shown_lines);
  templates::Derived page;
  page.diff = diff;
  page.id = view.id;
  page.parent = view.parent;
  page.rung = view.rung_tag;
  page.too_large = view.plain && view.too_large;
  page.shed = view.plain && !view.too_large;
  page.same = !view.plain && diff && view.html.empty();
  page.cut = view.cut;
  page.one_line = view.shown_lines == 1;
  page.shown_lines = shown_lines;
  page.code = view.plain || diff;
  page.diff_lines = !view.plain && diff;
  page.fragment_html = view.html;
  return WholePage({.paste = !diff, .id = view.id, .changes = diff}, page);
}

std::string EncryptedPastePage(const EncryptedView& view) {
  const std::string size = SizeInWords(view.size_bytes);
  const std::string expires_at = FormatUnixTime(view.expires_at);
  const std::string max_bytes = std::to_string(view.max_paste_bytes);
  templates::Encrypted page;
  page.id = view.id;
  page.size = size;
  page.expires_at = expires_at;
  page.burn = view.burn;
  page.max_bytes = max_bytes;
  return WholePage({.paste = true, .id = view.id}, page, {.crypt = true});
}

std::string ErrorPage(unsigned status, std::string_view reason, std::string_view message,
                      std::optional<int64_t> retry_after_seconds, int64_t now_unix) {
  const ProblemSection section = ProblemOf(status, reason);
  const std::string title = ProblemHtml(section, true);
  const std::string text = ProblemHtml(section, false);
  const std::string status_text = std::to_string(status);
  const std::string retry_in =
      retry_after_seconds ? DurationInWords(*retry_after_seconds) : std::string();
  const std::string retry_at =
      retry_after_seconds ? ClockTime(now_unix + *retry_after_seconds) : std::string();
  templates::Error page;
  page.status = status_text;
  page.title_html = title;
  page.text_html = text;
  page.retry = retry_after_seconds.has_value();
  page.retry_in = retry_in;
  page.retry_at = retry_at;
  page.limit = status == 429;
  page.overload = status >= 500;
  page.not_found = status == 404;
  page.rejected = !page.limit && !page.overload && !page.not_found;
  page.reason = reason;
  page.message = message;
  return WholePage({.error = true, .status = status_text, .problem_html = title}, page);
}

std::string BurnConfirmPage(std::string_view id, uint32_t views_left) {
  const std::string left = std::to_string(views_left);
  const bool burn = views_left <= 1;
  return WholePage({.limited_views = !burn, .burn_after_reading = burn},
                   templates::BurnConfirm{.burn = burn, .id = id, .views_left = left});
}

std::string BurnCreatedPage(std::string_view url, std::string_view delete_url, uint32_t views) {
  const std::string count = std::to_string(views);
  return WholePage(
      {.created = true},
      templates::BurnCreated{
          .burn = views <= 1, .views = count, .share_url = url, .delete_url = delete_url},
      {.share = true});
}

std::string ReportFormPage(std::string_view id, std::string_view token) {
  return WholePage({.report = true}, templates::ReportForm{.id = id, .token = token});
}

std::string ReportedPage(std::string_view id) {
  return WholePage({.reported = true}, templates::Reported{.id = id});
}

std::string DeleteConfirmPage(std::string_view id, std::string_view token) {
  return WholePage({.delete_paste = true}, templates::DeleteConfirm{.id = id, .token = token});
}

std::string DeletedPage(std::string_view id) {
  return WholePage({.deleted = true}, templates::Deleted{.id = id});
}

std::string StatusPage(const std::vector<std::pair<std::string, double>>& metrics,
                       int64_t now_unix) {
  double live = 0, quota = 0, day = 0;
  for (const auto& [key, value] : metrics) {
    if (key == "sluice_storage_live_bytes") live = value;
    if (key == "sluice_storage_quota_bytes") quota = value;
    if (key == "sluice_storage_created_bytes_24h") day = value;
  }
  auto bytes = [](double value) {
    return SizeInWords(static_cast<uint64_t>(std::max(0.0, value)));
  };
  const std::string updated = FormatUnixTime(now_unix);
  const std::string live_text = bytes(live);
  const std::string quota_text = bytes(quota);
  const std::string used = quota > 0 ? fmt::format("{:.1f}", 100.0 * live / quota) : "";
  const std::string day_text = bytes(day);
  templates::Status page;
  page.updated = updated;
  page.live = live_text;
  page.quota = quota > 0;
  page.quota_size = quota_text;
  page.used_percent = used;
  page.created_day = day_text;
  return WholePage({.status_page = true}, page, {.status = true});
}

}  // namespace sluice::http
