#include "pages.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <map>

#include "assets.h"
#include "page_language.h"
#include "page_templates.h"
#include "public_contact.h"
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

// A message of a C++ source in `lang` with its {name} placeholders filled (fmt's named
// arguments): tools/compile_catalogs.py refuses a translation whose placeholders differ, so the
// format cannot fail on a shipped catalog.
template <class... Args>
std::string Translated(i18n::Lang lang, std::string_view msgid, const Args&... args) {
  return fmt::format(fmt::runtime(i18n::Translate(lang, msgid)), args...);
}

// "1.5": the decimal mark is the language's.
std::string Decimal(i18n::Lang lang, double value) {
  const auto tenths = static_cast<int64_t>(value * 10 + 0.5);
  return Translated(lang, "{whole}.{tenth}", fmt::arg("whole", tenths / 10),
                    fmt::arg("tenth", tenths % 10));
}

// The footer's language switch: every shipped language, the reader's selected. Made once per
// language: the list never changes.
std::string_view LanguageChoices(i18n::Lang lang) {
  static const auto choices = [] {
    std::array<std::string, i18n::kLangCount> made;
    for (size_t shown = 0; shown < i18n::kLangCount; ++shown) {
      for (size_t i = 0; i < i18n::kLangCount; ++i) {
        templates::Render(templates::LanguageChoice{.tag = i18n::kLanguages[i].tag,
                                                    .selected = i == shown,
                                                    .name = i18n::kLanguages[i].name},
                          made[shown]);
      }
    }
    return made;
  }();
  return choices[static_cast<size_t>(lang)];
}

// The scripts' messages in the reader's language (i18n::ScriptMessages): JSON data blocks, which
// the CSP lets a page carry because a browser never runs them; each script reads its own.
void AppendScriptMessages(i18n::Lang lang, std::string_view script, std::string& out) {
  const std::string_view json = i18n::ScriptMessages(lang, script);
  if (json.empty()) return;
  out.append("<script type=\"application/json\" id=\"i18n-");
  out.append(script);
  out.append("\">");
  out.append(json);
  out.append("</script>\n");
}

// Renders `page` inside the layout: the title, the stylesheet, app.js and the page's own scripts.
// The scripts that see an encrypted paste's key carry their Subresource Integrity: a page that
// holds one must run exactly the script this binary shipped, whatever a cache or a proxy on the
// way holds.
template <class Page>
std::string WholePage(const Reader& reader, const templates::Title& title, const Page& page,
                      PageScripts scripts = {}) {
  std::string title_html;
  templates::Render(title, reader.lang, title_html);
  std::string body;
  templates::Render(page, reader.lang, body);
  static const Asset* const qrcode = FindAsset("/static/qrcode.js");
  static const Asset* const qr = FindAsset("/static/qr.js");
  static const Asset* const crypt = FindAsset("/static/crypt.js");
  std::string messages;
  AppendScriptMessages(reader.lang, "app", messages);
  if (scripts.status) AppendScriptMessages(reader.lang, "status", messages);
  if (scripts.share) AppendScriptMessages(reader.lang, "qr", messages);
  if (scripts.crypt) AppendScriptMessages(reader.lang, "crypt", messages);
  templates::Layout layout;
  layout.lang = LanguageTag(reader.lang);
  layout.title_html = title_html;
  layout.style_url = AssetUrl("/static/style.css");
  layout.messages_html = messages;
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
  layout.back = reader.path;
  layout.language_choices_html = LanguageChoices(reader.lang);
  // Every page names where abuse goes, so a notice reaches the operator, not the host.
  if (const ContactLink* contact = PublicContact::Current().footer()) {
    layout.contact = true;
    layout.contact_url = contact->url;
    layout.contact_text = contact->text;
  }
  std::string out;
  templates::Render(layout, reader.lang, out);
  return out;
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
      {"withheld_notice", &templates::Problem::withheld_notice},
      {"taken_down", &templates::Problem::taken_down},
      {"blocked", &templates::Problem::blocked},
      {"create_access_credential", &templates::Problem::create_access_credential},
      {"create_access_network", &templates::Problem::create_access_network},
      // A reputation feed's refusal is the same to the reader: not from this network, and how to
      // get access in the operator's words (docs/admission.md, "Reputation feeds").
      {"feed_refused", &templates::Problem::create_access_network},
      {"report_rate", &templates::Problem::report_rate},
      {"report_global_rate", &templates::Problem::report_global_rate},
      {"cross_site", &templates::Problem::cross_site},
      {"delete_rate", &templates::Problem::delete_rate},
      {"read_only", &templates::Problem::read_only},
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
std::string ProblemHtml(ProblemSection section, bool title, i18n::Lang lang) {
  templates::Problem problem;
  problem.*section = true;
  problem.title = title;
  std::string html;
  templates::Render(problem, lang, html);
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

std::string SizeInWords(uint64_t bytes, i18n::Lang lang) {
  if (bytes < 1024) return Translated(lang, "{n} bytes", fmt::arg("n", bytes));
  if (bytes < 1024 * 1024) {
    return Translated(lang, "{n} KiB", fmt::arg("n", Decimal(lang, bytes / 1024.0)));
  }
  return Translated(lang, "{n} MiB", fmt::arg("n", Decimal(lang, bytes / (1024.0 * 1024))));
}

std::string DurationInWords(int64_t seconds, i18n::Lang lang) {
  // One message for 1 and one for more of each unit: every shipped language says a duration with
  // those two forms (Japanese and Chinese translate both alike). A language with more plural
  // forms would need ngettext's rules here (docs/translations.md).
  const auto seconds_text = [lang](int64_t n) {
    return n == 1 ? Translated(lang, "{n} second", fmt::arg("n", n))
                  : Translated(lang, "{n} seconds", fmt::arg("n", n));
  };
  const auto minutes_text = [lang](int64_t n) {
    return n == 1 ? Translated(lang, "{n} minute", fmt::arg("n", n))
                  : Translated(lang, "{n} minutes", fmt::arg("n", n));
  };
  const auto hours_text = [lang](int64_t n) {
    return n == 1 ? Translated(lang, "{n} hour", fmt::arg("n", n))
                  : Translated(lang, "{n} hours", fmt::arg("n", n));
  };
  const auto days_text = [lang](int64_t n) {
    return n == 1 ? Translated(lang, "{n} day", fmt::arg("n", n))
                  : Translated(lang, "{n} days", fmt::arg("n", n));
  };
  const auto both = [lang](const std::string& larger, const std::string& smaller) {
    return Translated(lang, "{larger} {smaller}", fmt::arg("larger", larger),
                      fmt::arg("smaller", smaller));
  };
  if (seconds < 60) return seconds_text(std::max<int64_t>(seconds, 1));
  if (seconds < 3600) {
    const int64_t rest = seconds % 60;
    return rest == 0 ? minutes_text(seconds / 60)
                     : both(minutes_text(seconds / 60), seconds_text(rest));
  }
  if (seconds < 86400) {
    const int64_t rest = (seconds % 3600) / 60;
    return rest == 0 ? hours_text(seconds / 3600)
                     : both(hours_text(seconds / 3600), minutes_text(rest));
  }
  return days_text(seconds / 86400);
}

std::string IndexPage(const Reader& reader, std::string_view default_ttl, uint64_t max_paste_bytes,
                      const CreatePrefill* prefill, bool proof_of_work) {
  std::string ttls;
  for (const auto& [name, seconds] : service::TtlAllowList()) {
    const std::string label = DurationInWords(seconds.count(), reader.lang);
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
  const std::string size = prefill ? SizeInWords(prefill->size_bytes, reader.lang) : std::string();
  templates::Index page;
  page.max_bytes = max_bytes;
  page.fork = prefill != nullptr;
  page.auto_language = chosen.empty();
  page.plain_text = chosen == "text";
  page.language_options_html = languages;
  page.ttl_options_html = ttls;
  page.pow = proof_of_work;
  page.pow_worker_url = AssetUrl("/static/pow.js");
  if (prefill) {
    page.parent = prefill->parent;
    page.load = !prefill->load_from.empty();
    page.load_from = prefill->load_from;
    page.size = size;
    page.text = prefill->text;
  }
  return WholePage(reader, {.new_paste = true}, page, {.crypt = true, .share = true});
}

std::string PastePage(const Reader& reader, const PasteView& view) {
  const std::string size = SizeInWords(view.size_bytes, reader.lang);
  const std::string expires_at = FormatUnixTime(view.expires_at);
  const std::string views_left = view.views_left ? std::to_string(*view.views_left) : "";
  const std::string shown_lines = std::to_string(view.shown_lines);
  templates::Paste page;
  page.created = view.created.has_value();
  page.share_url = view.url;
  if (view.created) page.delete_url = view.created->delete_url;
  page.id = view.id;
  page.language_label = view.language_label.empty() ? i18n::Translate(reader.lang, "Plain text")
                                                    : std::string_view(view.language_label);
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
  return WholePage(reader, {.paste = true, .id = view.id}, page,
                   {.share = view.created.has_value()});
}

std::string DerivedPage(const Reader& reader, const DerivedView& view) {
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
  return WholePage(reader, {.paste = !diff, .id = view.id, .changes = diff}, page);
}

std::string EncryptedPastePage(const Reader& reader, const EncryptedView& view) {
  const std::string size = SizeInWords(view.size_bytes, reader.lang);
  const std::string expires_at = FormatUnixTime(view.expires_at);
  const std::string max_bytes = std::to_string(view.max_paste_bytes);
  templates::Encrypted page;
  page.id = view.id;
  page.size = size;
  page.expires_at = expires_at;
  page.burn = view.burn;
  page.max_bytes = max_bytes;
  return WholePage(reader, {.paste = true, .id = view.id}, page, {.crypt = true});
}

std::string ErrorPage(const Reader& reader, unsigned status, std::string_view reason,
                      std::string_view message, std::optional<int64_t> retry_after_seconds,
                      int64_t now_unix) {
  const ProblemSection section = ProblemOf(status, reason);
  const std::string title = ProblemHtml(section, true, reader.lang);
  const std::string text = ProblemHtml(section, false, reader.lang);
  const std::string status_text = std::to_string(status);
  const std::string retry_in =
      retry_after_seconds ? DurationInWords(*retry_after_seconds, reader.lang) : std::string();
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
  // The read-only window is a 503 as well, but no overload: the operator closed writes on purpose.
  page.maintenance = reason == "read_only";
  page.overload = status >= 500 && !page.maintenance;
  page.not_found = status == 404;
  page.rejected = !page.limit && !page.overload && !page.not_found && !page.maintenance;
  page.reason = reason;
  page.message = message;
  page.access = reason.starts_with("create_access") || reason == "feed_refused";
  return WholePage(reader, {.error = true, .status = status_text, .problem_html = title}, page);
}

std::string BurnConfirmPage(const Reader& reader, std::string_view id, uint32_t views_left) {
  const std::string left = std::to_string(views_left);
  const bool burn = views_left <= 1;
  return WholePage(reader, {.limited_views = !burn, .burn_after_reading = burn},
                   templates::BurnConfirm{.burn = burn, .id = id, .views_left = left});
}

std::string BurnCreatedPage(const Reader& reader, std::string_view url, std::string_view delete_url,
                            uint32_t views) {
  const std::string count = std::to_string(views);
  return WholePage(
      reader, {.created = true},
      templates::BurnCreated{
          .burn = views <= 1, .views = count, .share_url = url, .delete_url = delete_url},
      {.share = true});
}

std::string ReportFormPage(const Reader& reader, std::string_view id, std::string_view token) {
  return WholePage(reader, {.report = true}, templates::ReportForm{.id = id, .token = token});
}

std::string ReportedPage(const Reader& reader, std::string_view id) {
  return WholePage(reader, {.reported = true}, templates::Reported{.id = id});
}

std::string DeleteConfirmPage(const Reader& reader, std::string_view id, std::string_view token) {
  return WholePage(reader, {.delete_paste = true},
                   templates::DeleteConfirm{.id = id, .token = token});
}

std::string DeletedPage(const Reader& reader, std::string_view id) {
  return WholePage(reader, {.deleted = true}, templates::Deleted{.id = id});
}

std::string StatusPage(const Reader& reader,
                       const std::vector<std::pair<std::string, double>>& metrics,
                       int64_t now_unix) {
  double live = 0, quota = 0, day = 0;
  for (const auto& [key, value] : metrics) {
    if (key == "sluice_storage_live_bytes") live = value;
    if (key == "sluice_storage_quota_bytes") quota = value;
    if (key == "sluice_storage_created_bytes_24h") day = value;
  }
  auto bytes = [&reader](double value) {
    return SizeInWords(static_cast<uint64_t>(std::max(0.0, value)), reader.lang);
  };
  const std::string updated = FormatUnixTime(now_unix);
  const std::string live_text = bytes(live);
  const std::string quota_text = bytes(quota);
  const std::string used = quota > 0 ? Decimal(reader.lang, 100.0 * live / quota) : "";
  const std::string day_text = bytes(day);
  templates::Status page;
  page.updated = updated;
  page.live = live_text;
  page.quota = quota > 0;
  page.quota_size = quota_text;
  page.used_percent = used;
  page.created_day = day_text;
  return WholePage(reader, {.status_page = true}, page, {.status = true});
}

std::string AbusePage(const Reader& reader, const PublicContact& contact, int64_t pending) {
  std::string links;
  for (const ContactLink& link : contact.links()) {
    templates::Render(templates::ContactLink{.url = link.url, .text = link.text}, links);
  }
  const std::string deadline =
      DurationInWords(contact.options().takedown_deadline.count(), reader.lang);
  const std::string pending_text = std::to_string(pending);
  templates::Abuse page;
  page.contact = !contact.links().empty();
  page.contacts_html = links;
  page.security = contact.has_security_txt();
  page.deadline = deadline;
  page.policy = !contact.options().policy_text.empty();
  page.policy_text = contact.options().policy_text;
  page.pending = pending_text;
  return WholePage(reader, {.abuse = true}, page);
}

namespace {

// "copyright 2, court_order 1": a notice's category and sender kind are codes, as a report's
// reason is, shown as they are stored.
std::string CountsInWords(const std::map<std::string, int64_t>& counts) {
  std::string out;
  for (const auto& [label, n] : counts) {
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", label.empty() ? "-" : label, n);
  }
  return out.empty() ? "-" : out;
}

int64_t CountOf(const std::map<std::string, int64_t>& counts, std::string_view label) {
  const auto it = counts.find(std::string(label));
  return it == counts.end() ? 0 : it->second;
}

// "≤ 10 minutes", or "> 14 days" past the last step; "-" when nothing was timed.
std::string QuantileInWords(const std::optional<service::TimeQuantile>& q, i18n::Lang lang) {
  if (!q) return "-";
  if (q->beyond) {
    return "> " + DurationInWords(store::kTimeToActionBounds.back(), lang);
  }
  return "\u2264 " + DurationInWords(q->at_most_seconds, lang);
}

bool AnythingCounted(const service::MonthFigures& m) {
  const auto any = [](const std::map<std::string, int64_t>& counts) {
    return std::any_of(counts.begin(), counts.end(), [](const auto& c) { return c.second != 0; });
  };
  return m.notices != 0 || any(m.notices_by_sender) || any(m.withholds) || m.takedowns != 0 ||
         m.restores != 0 || m.dismissals != 0 || m.timed_actions != 0 || m.reuploads_blocked != 0 ||
         any(m.blocks);
}

}  // namespace

std::string TransparencyPage(const Reader& reader, const service::TransparencyReport& report) {
  std::string months;
  for (size_t i = 0; i < report.months.size(); ++i) {
    const service::MonthFigures& m = report.months[i];
    if (i > 0 && !AnythingCounted(m)) continue;
    const std::string notices = std::to_string(m.notices);
    const std::string categories = CountsInWords(m.notices_by_category);
    const std::string senders = CountsInWords(m.notices_by_sender);
    const std::string votes = std::to_string(CountOf(m.withholds, store::kWithholdVotes));
    const std::string notice = std::to_string(CountOf(m.withholds, store::kWithholdNotice));
    const std::string takedowns = std::to_string(m.takedowns);
    const std::string restores = std::to_string(m.restores);
    const std::string dismissals = std::to_string(m.dismissals);
    const std::string median = QuantileInWords(m.median, reader.lang);
    const std::string p95 = QuantileInWords(m.p95, reader.lang);
    const std::string reuploads = std::to_string(m.reuploads_blocked);
    const std::string networks = std::to_string(CountOf(m.blocks, store::kBlockNetwork));
    const std::string contents = std::to_string(CountOf(m.blocks, store::kBlockContent));
    templates::TransparencyMonth row;
    row.month = m.month;
    row.notices = notices;
    row.any_notices = m.notices != 0 || !m.notices_by_sender.empty();
    row.notice_categories = categories;
    row.notice_senders = senders;
    row.withheld_votes = votes;
    row.withheld_notice = notice;
    row.takedowns = takedowns;
    row.restores = restores;
    row.dismissals = dismissals;
    row.median = median;
    row.p95 = p95;
    row.reuploads = reuploads;
    row.blocks_network = networks;
    row.blocks_content = contents;
    templates::Render(row, reader.lang, months);
  }
  templates::Transparency page;
  page.months_html = months;
  return WholePage(reader, {.transparency = true}, page);
}

}  // namespace sluice::http
