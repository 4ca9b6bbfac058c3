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

// What a person should read for each refusal reason (the `reason` of the JSON error).
struct Explanation {
  const char* title;
  const char* text;
};

Explanation Explain(unsigned status, std::string_view reason) {
  static const std::map<std::string_view, Explanation> kReasons = {
      {"ip_create_count",
       {"You are creating pastes too quickly",
        "This is a rate limit on how many pastes one visitor may create, not an error with your "
        "paste. Nothing was saved."}},
      {"ip_create_bytes",
       {"You are sending too much text too quickly",
        "This is a rate limit on how much text one visitor may paste per second. Nothing was "
        "saved."}},
      {"global_count",
       {"The server is taking as many new pastes as it can",
        "Everyone together is creating pastes faster than this server accepts. This is a limit, "
        "not a problem with your paste. Nothing was saved."}},
      {"global_bytes",
       {"The server is taking as much new text as it can",
        "Everyone together is pasting more text per second than this server accepts. Nothing was "
        "saved."}},
      {"origin_get_ip",
       {"You are opening pastes too quickly",
        "This is a rate limit on how many pastes one visitor may open per second. The paste is "
        "fine and still there."}},
      {"create_slots",
       {"The server is overloaded", "Too many pastes are being saved at once. Nothing was saved."}},
      {"create_bytes",
       {"The server is overloaded", "Too much text is being saved at once. Nothing was saved."}},
      {"read_slots",
       {"The server is overloaded",
        "Too many pastes are being read from storage at once. The paste itself is not missing."}},
      {"fill_cap",
       {"The server is overloaded",
        "Too many pastes are being looked up at once. The paste itself is not missing."}},
      {"connections",
       {"The server is overloaded", "It has as many open connections as it can take."}},
      {"outcome_unknown",
       {"Your paste may or may not have been saved",
        "The storage service stopped answering while it recorded your paste, so the server cannot "
        "tell. Its link was not given out: if you need the paste, send it again."}},
      {"body_mismatch",
       {"This paste cannot be shown right now",
        "The storage service returned text that is not this paste's, so it is not shown. Try "
        "again later."}},
      {"burn_after_reading",
       {"This paste is shown once",
        "It burns after reading: open its link in a browser and confirm, or POST to "
        "/api/v1/pastes/ID/claim. The first reader who does gets the text; then it is gone."}},
      {"storage_quota",
       {"The server is full",
        "It holds as much text as its operator allows. Nothing was saved; space frees up as "
        "pastes expire or are deleted."}},
      {"body_missing",
       {"This paste cannot be shown right now",
        "The storage service did not return this paste's text. Try again later."}},
      {"under_review",
       {"This paste is under review",
        "Visitors from several networks reported it, so it is withheld until the operator has "
        "looked at it."}},
      {"taken_down",
       {"This paste was taken down",
        "The operator removed it after a report. It will not be shown again."}},
      {"blocked",
       {"This address may not create pastes",
        "The operator blocked new pastes from it for a while. Reading pastes is not affected."}},
      {"report_rate",
       {"You are sending reports too quickly",
        "This is a rate limit on how many reports one visitor may send. Try again later."}},
      {"report_global_rate",
       {"This server takes no more reports for now",
        "Many reports arrived at once. Nothing was recorded; try again in a little while."}},
      {"cross_site",
       {"This report did not come from this site",
        "Reports are taken only from the report form on this site's own pages. Open the paste, "
        "choose Report and send the form from there."}},
      {"delete_rate",
       {"You are deleting too quickly",
        "This is a rate limit on how many deletes one visitor may send. Try again later."}},
  };
  if (auto it = kReasons.find(reason); it != kReasons.end()) return it->second;
  switch (status) {
    case 404:
      return {"No such paste", "It never existed, it has expired, or its owner deleted it."};
    case 429:
      return {"Slow down: you have reached a limit", "This is a rate limit, not a missing paste."};
    case 503:
    case 504:
      return {"The server is overloaded or a storage service is slow",
              "This is temporary and says nothing about whether the paste exists."};
    case 400:
    case 411:
    case 413:
      return {"The request could not be accepted", "Check what was sent and try again."};
    default:
      return {"Something went wrong on the server", "The error has been counted."};
  }
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
  const Explanation e = Explain(status, reason);
  const std::string status_text = std::to_string(status);
  const std::string retry_in =
      retry_after_seconds ? DurationInWords(*retry_after_seconds) : std::string();
  const std::string retry_at =
      retry_after_seconds ? ClockTime(now_unix + *retry_after_seconds) : std::string();
  templates::Error page;
  page.status = status_text;
  page.title = e.title;
  page.text = e.text;
  page.retry = retry_after_seconds.has_value();
  page.retry_in = retry_in;
  page.retry_at = retry_at;
  page.limit = status == 429;
  page.overload = status >= 500;
  page.not_found = status == 404;
  page.rejected = !page.limit && !page.overload && !page.not_found;
  page.reason = reason;
  page.message = message;
  return WholePage({.error = true, .status = status_text, .problem = e.title}, page);
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
