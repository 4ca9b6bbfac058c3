// Moderation over HTTP: the public report (API and form) and the admin listener's side (its token
// check, the review queue, takedown, dismissal, blocks, the audit trail). The use-cases are
// service::ModerationService's; this file only translates.
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <variant>

#include "handlers.h"
#include "pages.h"
#include "presenter.h"
#include "sluice/common/duration.h"
#include "sluice/service/body_check.h"
#include "sluice/service/content_blocklist.h"
#include "sluice/service/ids.h"
#include "sluice/service/notice.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

Reply NoModeration() {
  return Reply::Refuse(ErrorCode::kNotFound, "moderation is not enabled on this server",
                       "no_route");
}

// A JSON object of string fields (and the `flags`, booleans), strictly: anything else is a 400
// naming what is wrong. An empty body is an empty object.
Result<nlohmann::json> JsonFields(std::string_view body,
                                  std::initializer_list<std::string_view> known,
                                  std::initializer_list<std::string_view> flags = {}) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return nlohmann::json::object();
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "the body must be a JSON object", "bad_json");
  }
  for (const auto& [key, value] : j.items()) {
    if (std::find(flags.begin(), flags.end(), key) != flags.end()) {
      if (!value.is_boolean()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         fmt::format("'{}' must be true or false", key), "bad_json");
      }
      continue;
    }
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("unknown field '{}'", service::QuotedClientText(key)),
                       "bad_json");
    }
    if (!value.is_string()) {
      return MakeError(ErrorCode::kInvalidArgument, fmt::format("'{}' must be a string", key),
                       "bad_json");
    }
  }
  return j;
}

std::string Field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() ? std::string() : it->get<std::string>();
}

bool IsBearer(std::string_view auth) {
  constexpr std::string_view kScheme = "bearer ";
  if (auth.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(auth[i])) != kScheme[i]) return false;
  }
  return true;
}

// Durations of a block: ParseDuration's units, and days ("7d"), which is how operators say it.
Result<std::chrono::seconds> BlockDuration(std::string_view text) {
  if (text.size() > 1 && text.back() == 'd') {
    const std::string days(text.substr(0, text.size() - 1));
    if (days.find_first_not_of("0123456789") == std::string::npos && days.size() <= 4) {
      return std::chrono::seconds(std::stoll(days) * 86400);
    }
  }
  Result<Duration> d = ParseDuration(text);
  if (!d.ok()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "duration must be like 30m, 12h or 7d: " + d.error().message, "bad_duration");
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

bool SameText(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The report API takes JSON only: a browser sends application/json across sites only after a
// CORS preflight, which this server never answers, so a hostile page cannot make its visitors
// report (text/plain, a form's types, would go without one).
bool IsApplicationJson(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  return SameText(type, "application/json");
}

// The report form's token (docs/moderation.md, "The report form"): a random value that GET
// /report/ID sets as a cookie only this site's pages send (SameSite=Strict) and writes into the
// form; a POST must carry both, equal. Stateless, so any process of a fleet checks it.
constexpr std::string_view kFormCookie = "sluice_report";

// A token as MintDeleteToken makes them (base64url, 22 characters), so a cookie a client wrote
// is never echoed into the page unless it could be ours.
bool IsFormToken(std::string_view t) {
  return t.size() == 22 && std::all_of(t.begin(), t.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
         });
}

// Nothing (go on) when the report form's POST comes from this site's own page, else the 403.
// Browsers say where a request comes from (Sec-Fetch-Site, then Origin); for one that says
// neither, the form's token decides.
std::optional<Reply> RefuseCrossSite(const Request& req, const Context& ctx) {
  bool same_origin = false;
  if (const std::string_view site = req.headers.Get("Sec-Fetch-Site"); !site.empty()) {
    same_origin = SameText(site, "same-origin") || SameText(site, "none");
  } else if (const std::string_view origin = req.headers.Get("Origin"); !origin.empty()) {
    same_origin = IsOwnOrigin(origin, req, ctx);
  } else {
    const std::optional<std::string_view> cookie = CookieValue(req.headers, kFormCookie);
    const std::optional<std::string> field = FormValue(req.small_body, "token");
    same_origin = cookie && field && IsFormToken(*cookie) && *cookie == *field;
  }
  if (same_origin) return std::nullopt;
  return Reply::Refuse(ErrorCode::kPermissionDenied,
                       "a report is taken only from this site's own form: open the paste, choose "
                       "Report and send the form from there",
                       "cross_site");
}

// The page size an admin listing asks for with ?limit= (default 100, clamped to 1..1000), or the
// refusal of one that is not a number.
std::variant<size_t, Reply> PageLimit(const Request& req) {
  const auto text = req.Query("limit");
  if (!text) return size_t{100};
  try {
    return std::clamp<size_t>(std::stoul(*text), 1, 1000);
  } catch (const std::exception&) {
    return Reply::Refuse(ErrorCode::kInvalidArgument, "limit must be a number", "bad_limit");
  }
}

}  // namespace

bool IsOwnOrigin(std::string_view origin, const Request& req, const Context& ctx) {
  if (SameText(origin, ctx.base_url)) return true;
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const std::string_view authority = origin.substr(scheme_end + 3);
  const std::string_view host = req.headers.Get("Host");
  return !host.empty() && SameText(authority, host);
}

std::optional<Reply> CheckAdminToken(const HeaderFields& headers, const Context& ctx) {
  constexpr std::string_view kBearer = "Bearer ";
  const std::string_view auth = headers.Get("Authorization");
  const bool has_token = IsBearer(auth);
  bool good = false;
  if (has_token && ctx.admin_token_sha256) {
    // Digests of equal length compared in constant time: neither the token's length nor the
    // position of its first wrong byte shows in the time of a refusal.
    const store::TokenHash presented = service::HashDeleteToken(auth.substr(kBearer.size()));
    good = CRYPTO_memcmp(presented.data(), ctx.admin_token_sha256->data(), presented.size()) == 0;
  }
  if (good) return std::nullopt;
  Reply refused = Reply::Refuse(
      ErrorCode::kInvalidArgument,
      !ctx.admin_token_sha256
          ? "the admin listener has no token (set admin_token_file) and refuses every request"
      : has_token ? "wrong admin token"
                  : "send the admin token as 'Authorization: Bearer TOKEN'",
      !ctx.admin_token_sha256 ? "admin_token_unset" : "admin_token", 401);
  refused.Set("WWW-Authenticate", "Bearer");
  return refused;
}

awaitable<Reply> HandleReportApi(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  if (!IsApplicationJson(req.headers.Get("Content-Type"))) {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                            "send the report as JSON, with 'Content-Type: application/json'",
                            "unsupported_media_type", 415);
  }
  Result<nlohmann::json> j = JsonFields(req.small_body, {"reason", "note"});
  if (!j.ok()) co_return Reply::Refuse(j.error());
  if (!j->contains("reason")) {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument, "'reason' is required", "bad_reason");
  }
  auto reporting =
      ctx.moderation->Report(req.client.Key(), req.id, Field(*j, "reason"), Field(*j, "note"));
  Result<service::ReportReceipt> receipt = co_await std::move(reporting);
  if (!receipt.ok()) co_return Reply::Refuse(receipt.error());
  co_return Uncached(
      Reply::Json(receipt->counted ? 202 : 200, JsonText({{"id", std::string(req.id)},
                                                          {"counted", receipt->counted},
                                                          {"under_review", receipt->withheld}})));
}

// GET shows the form, its POST sends the report; a person reads either answer.
awaitable<Reply> HandleReportForm(const Request& req, Context& ctx) {
  if (!store::PasteId::Parse(req.id)) {
    co_return Reply::Refuse(ErrorCode::kNotFound,
                            "no paste with this id (it may have expired or been deleted)",
                            "not_found");
  }
  if (req.method != Method::kPost) {
    const std::optional<std::string_view> known = CookieValue(req.headers, kFormCookie);
    const std::string token =
        known && IsFormToken(*known) ? std::string(*known) : service::MintDeleteToken();
    Reply form = Uncached(Reply::Html(200, ReportFormPage(ReaderOf(req), req.id, token)));
    form.Set(
        "Set-Cookie",
        fmt::format("{}={}; Path=/report; Max-Age=86400; HttpOnly; SameSite=Strict{}", kFormCookie,
                    token, ctx.base_url.starts_with("https://") ? "; Secure" : ""));
    co_return form;
  }
  if (std::optional<Reply> refused = RefuseCrossSite(req, ctx)) co_return std::move(*refused);
  if (!ctx.moderation) co_return NoModeration();
  auto reporting = ctx.moderation->Report(req.client.Key(), req.id,
                                          FormValue(req.small_body, "reason").value_or(""),
                                          FormValue(req.small_body, "note").value_or(""));
  Result<service::ReportReceipt> receipt = co_await std::move(reporting);
  if (!receipt.ok()) co_return Reply::Refuse(receipt.error());
  co_return Uncached(Reply::Html(200, ReportedPage(ReaderOf(req), req.id)));
}

// One page of the review queue, newest first; `next` is the `before` of the page after it
// (null on the last), so a listing costs its page whatever the queue holds.
awaitable<Reply> HandleAdminReports(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  auto limit_or_refusal = PageLimit(req);
  if (auto* refusal = std::get_if<Reply>(&limit_or_refusal)) co_return std::move(*refusal);
  const size_t limit = std::get<size_t>(limit_or_refusal);
  std::optional<store::ReportCursor> after;
  if (auto text = req.Query("before")) {
    after = store::ReportCursor::Parse(*text);
    if (!after) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                              "before must be the 'next' of an earlier page", "bad_cursor");
    }
  }
  auto listing = ctx.moderation->OpenReports(after, limit);
  auto page = co_await std::move(listing);
  if (!page.ok()) co_return Reply::Refuse(page.error());
  nlohmann::json out = nlohmann::json::array();
  const int64_t now = ctx.clock.UnixSeconds();
  for (const store::ReportSummary& r : page->pastes) {
    // Its clock (docs/moderation.md, "The takedown clock"): when it entered the queue, and how
    // long it has waited since.
    out.push_back({{"id", r.id.str()},
                   {"arrived_at", r.first_at},
                   {"waiting_seconds", std::max<int64_t>(0, now - r.first_at)},
                   {"reports", r.reports},
                   {"networks", r.networks},
                   {"votes", r.votes},
                   {"reasons", r.reasons},
                   {"latest_at", r.latest_at},
                   {"latest_note", r.latest_note},
                   {"moderation", store::ModerationName(r.moderation)},
                   {"keep", r.keep}});
  }
  nlohmann::json next = page->next ? nlohmann::json(page->next->Encode()) : nullptr;
  co_return Uncached(Reply::Json(
      200,
      JsonText({{"pastes", out}, {"next", next}, {"pending", ctx.moderation->PendingReports()}})));
}

awaitable<Reply> HandleAdminPaste(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  auto showing = ctx.moderation->Show(req.id);
  auto review = co_await std::move(showing);
  if (!review.ok()) co_return Reply::Refuse(review.error());
  const store::PasteMeta& m = review->meta;
  nlohmann::json j = {{"id", m.id.str()},
                      {"created_at", m.created_at},
                      {"expires_at", m.expires_at},
                      {"size", m.size_bytes},
                      {"deleted", m.deleted},
                      {"moderation", store::ModerationName(m.moderation)},
                      {"encrypted", m.encrypted},
                      {"content", review->text ? nlohmann::json(*review->text) : nullptr}};
  co_return Uncached(Reply::Json(200, JsonText(j)));
}

awaitable<Reply> HandleAdminTakedown(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  Result<nlohmann::json> j = JsonFields(req.small_body, {"reason"});
  if (!j.ok()) co_return Reply::Refuse(j.error());
  auto taking = ctx.moderation->Takedown(req.id, Field(*j, "reason"));
  if (Status s = co_await std::move(taking); !s.ok()) co_return Reply::Refuse(s.error());
  co_return Uncached(
      Reply::Json(200, JsonText({{"id", std::string(req.id)}, {"moderation", "taken_down"}})));
}

awaitable<Reply> HandleAdminDismiss(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  Result<nlohmann::json> j = JsonFields(req.small_body, {"note"}, {"keep"});
  if (!j.ok()) co_return Reply::Refuse(j.error());
  const bool keep = j->value("keep", false);
  auto dismissing = ctx.moderation->Dismiss(req.id, Field(*j, "note"), keep);
  if (Status s = co_await std::move(dismissing); !s.ok()) co_return Reply::Refuse(s.error());
  co_return Uncached(Reply::Json(
      200, JsonText({{"id", std::string(req.id)}, {"moderation", "none"}, {"keep", keep}})));
}

awaitable<Reply> HandleAdminBlock(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  Result<nlohmann::json> j = JsonFields(req.small_body, {"prefix", "duration", "reason"});
  if (!j.ok()) co_return Reply::Refuse(j.error());
  const std::string duration_text = Field(*j, "duration").empty() ? "1d" : Field(*j, "duration");
  Result<std::chrono::seconds> duration = BlockDuration(duration_text);
  if (!duration.ok()) co_return Reply::Refuse(duration.error());
  auto blocking = ctx.moderation->Block(Field(*j, "prefix"), *duration, Field(*j, "reason"));
  auto block = co_await std::move(blocking);
  if (!block.ok()) co_return Reply::Refuse(block.error());
  co_return Uncached(Reply::Json(201, JsonText({{"prefix", block->prefix},
                                                {"reason", block->reason},
                                                {"created_at", block->created_at},
                                                {"until", block->until}})));
}

awaitable<Reply> HandleAdminReadOnly(const Request& req, Context& ctx) {
  if (req.method == Method::kPut) {
    Result<nlohmann::json> j = JsonFields(req.small_body, {}, {"read_only"});
    if (!j.ok()) co_return Reply::Refuse(j.error());
    if (!j->contains("read_only")) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                              "send {\"read_only\": true} or {\"read_only\": false}", "bad_json");
    }
    const bool on = (*j)["read_only"].get<bool>();
    ctx.service.SetReadOnly(on);
    spdlog::warn("audit: read-only window {} through the admin listener", on ? "opened" : "closed");
  }
  const std::shared_ptr<const service::ServiceOptions> o = ctx.service.options();
  co_return Uncached(Reply::Json(
      200,
      JsonText({{"read_only", o->read_only}, {"retry_after", o->read_only_retry_after.count()}})));
}

namespace {

nlohmann::json BlockedContentJson(const store::BlockedContent& e) {
  return {{"sha256", service::ContentBlocklist::Hex(e.sha256)},
          {"added_at", e.added_at},
          {"source", e.source},
          {"reason", e.reason}};
}

}  // namespace

// GET: one page of the content blocklist in digest order (`after` the `next` of the page before);
// POST: blocks a body, named by {"sha256": HEX, "reason": ...} in JSON, or sent itself as the raw
// body (any other Content-Type; at most the admin routes' 16 KB: the CLI hashes a larger file
// itself and sends its digest).
awaitable<Reply> HandleAdminBlockedContents(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  if (req.method != Method::kPost) {
    auto limit_or_refusal = PageLimit(req);
    if (auto* refusal = std::get_if<Reply>(&limit_or_refusal)) co_return std::move(*refusal);
    const size_t limit = std::get<size_t>(limit_or_refusal);
    std::optional<std::string_view> after;
    if (auto text = req.Query("after")) after = *text;
    auto listing = ctx.moderation->BlockedContents(after, limit);
    auto page = co_await std::move(listing);
    if (!page.ok()) co_return Reply::Refuse(page.error());
    nlohmann::json out = nlohmann::json::array();
    for (const store::BlockedContent& e : page->entries) out.push_back(BlockedContentJson(e));
    nlohmann::json next =
        page->next ? nlohmann::json(service::ContentBlocklist::Hex(*page->next)) : nullptr;
    co_return Uncached(Reply::Json(200, JsonText({{"blocked_contents", out}, {"next", next}})));
  }
  std::string hex;
  std::string reason;
  if (IsApplicationJson(req.headers.Get("Content-Type"))) {
    Result<nlohmann::json> j = JsonFields(req.small_body, {"sha256", "reason"});
    if (!j.ok()) co_return Reply::Refuse(j.error());
    if (!j->contains("sha256")) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                              "'sha256' is required (or send the text itself as the body)",
                              "bad_sha256");
    }
    hex = Field(*j, "sha256");
    reason = Field(*j, "reason");
  } else {
    if (req.small_body.empty()) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                              "send the text to block as the body, or {\"sha256\": HEX} as JSON",
                              "empty_body");
    }
    hex = service::ContentBlocklist::Hex(service::DigestBody(req.small_body));
  }
  auto blocking = ctx.moderation->BlockContent(hex, std::move(reason));
  auto receipt = co_await std::move(blocking);
  if (!receipt.ok()) co_return Reply::Refuse(receipt.error());
  co_return Uncached(
      Reply::Json(receipt->added ? 201 : 200,
                  JsonText({{"sha256", receipt->sha256}, {"added", receipt->added}})));
}

awaitable<Reply> HandleAdminUnblockContent(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  auto unblocking = ctx.moderation->UnblockContent(req.id);
  auto removed = co_await std::move(unblocking);
  if (!removed.ok()) co_return Reply::Refuse(removed.error());
  if (!*removed) {
    co_return Reply::Refuse(ErrorCode::kNotFound, "this digest is not in the content blocklist",
                            "not_blocked");
  }
  co_return Reply::Empty(204);
}

namespace {

Reply NoCreatorTokens() {
  return Reply::Refuse(ErrorCode::kNotFound, "creator tokens are not set up here",
                       "no_creator_tokens");
}

nlohmann::json TokenJson(const store::CreatorToken& t, int64_t now) {
  nlohmann::json j = {
      {"id", t.id},
      {"label", t.label},
      {"rate_per_second", static_cast<double>(t.rate_milli) / 1000.0},
      {"burst", t.burst},
      {"created_at", t.created_at},
      {"expires_at", t.expires_at == 0 ? nlohmann::json(nullptr) : nlohmann::json(t.expires_at)},
      {"revoked_at", t.revoked_at == 0 ? nlohmann::json(nullptr) : nlohmann::json(t.revoked_at)},
      {"in_force", t.LiveAt(now)}};
  if (t.bytes_rate > 0) {
    j["bytes_rate_per_second"] = t.bytes_rate;
    j["bytes_burst"] = t.bytes_burst;
  }
  return j;
}

// "10/s", "600/m", "1/h" (a bare number is per second): creates a second. Bytes the same, with an
// optional k, M or G (powers of 1000) and B before the slash: "1MB/s", "500kB/s".
Result<double> RatePerSecond(std::string_view text, bool bytes, const char* field) {
  const auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("'{}' must be like {} (a number per s, m or h)", field,
                                 bytes ? "1MB/s or 500kB/s" : "10/s or 600/m"),
                     "bad_rate");
  };
  double per = 1;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    const std::string_view unit = text.substr(slash + 1);
    if (unit == "s") {
      per = 1;
    } else if (unit == "m") {
      per = 60;
    } else if (unit == "h") {
      per = 3600;
    } else {
      return bad();
    }
    text = text.substr(0, slash);
  }
  double scale = 1;
  if (bytes) {
    if (text.ends_with('B')) text.remove_suffix(1);
    if (!text.empty() && (text.back() == 'k' || text.back() == 'M' || text.back() == 'G')) {
      scale = text.back() == 'k' ? 1e3 : text.back() == 'M' ? 1e6 : 1e9;
      text.remove_suffix(1);
    }
  }
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789.") != std::string_view::npos) {
    return bad();
  }
  char* end = nullptr;
  const std::string number(text);
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return bad();
  return v * scale / per;
}

}  // namespace

namespace {

// A notice with its clock (docs/moderation.md, "Notices"): when it arrived, how long it has
// waited, and its deadline (the sender's, else takedown_deadline's) with the time left.
nlohmann::json NoticeJson(const store::Notice& n, int64_t now, int64_t takedown_deadline) {
  nlohmann::json pastes = nlohmann::json::array();
  for (const store::NoticePaste& p : n.pastes) {
    pastes.push_back({{"id", p.paste}, {"outcome", p.outcome}, {"open", p.open}});
  }
  const int64_t due = n.deadline_at.value_or(n.received_at + takedown_deadline);
  return {{"id", n.id},
          {"sender", n.sender},
          {"reference", n.reference},
          {"category", n.category},
          {"arrived_at", n.received_at},
          {"waiting_seconds", std::max<int64_t>(0, now - n.received_at)},
          {"deadline_at", due},
          {"deadline_given", n.deadline_at.has_value()},
          {"seconds_left", due - now},
          {"open_pastes", n.open_pastes},
          {"pastes", pastes}};
}

}  // namespace

awaitable<Reply> HandleAdminNotices(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  const int64_t now = ctx.clock.UnixSeconds();
  const int64_t deadline = ctx.moderation->TakedownDeadline().count();
  if (req.method != Method::kPost) {
    auto limit_or_refusal = PageLimit(req);
    if (auto* refusal = std::get_if<Reply>(&limit_or_refusal)) co_return std::move(*refusal);
    auto listing = ctx.moderation->OpenNotices(std::get<size_t>(limit_or_refusal));
    auto open = co_await std::move(listing);
    if (!open.ok()) co_return Reply::Refuse(open.error());
    nlohmann::json out = nlohmann::json::array();
    for (const store::Notice& n : *open) out.push_back(NoticeJson(n, now, deadline));
    co_return Uncached(Reply::Json(200, JsonText({{"notices", out}})));
  }
  if (!IsApplicationJson(req.headers.Get("Content-Type"))) {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                            "send the notice as JSON, with 'Content-Type: application/json'",
                            "unsupported_media_type", 415);
  }
  Result<service::NoticeRequest> parsed = service::ParseNoticeJson(req.small_body, now);
  if (!parsed.ok()) co_return Reply::Refuse(parsed.error());
  auto adding = ctx.moderation->AddNotice(std::move(*parsed));
  Result<service::NoticeReceipt> receipt = co_await std::move(adding);
  if (!receipt.ok()) co_return Reply::Refuse(receipt.error());
  nlohmann::json notice = NoticeJson(receipt->notice, now, deadline);
  if (!receipt->stored) {
    // Nothing stored: each paste says why, so the sender can correct the list.
    const std::string message =
        "the notice names no paste that could be withheld (each is missing or already taken "
        "down); nothing was stored";
    co_return Uncached(Reply::Json(422, JsonText({{"error", message},
                                                  {"message", message},
                                                  {"reason", "no_withholdable_paste"},
                                                  {"pastes", notice["pastes"]}})));
  }
  co_return Uncached(Reply::Json(receipt->created ? 201 : 200,
                                 JsonText({{"created", receipt->created}, {"notice", notice}})));
}

awaitable<Reply> HandleAdminTokens(const Request& req, Context& ctx) {
  if (!ctx.creator_tokens) co_return NoCreatorTokens();
  if (req.method != Method::kPost) {
    auto listing = ctx.creator_tokens->List();
    auto tokens = co_await std::move(listing);
    if (!tokens.ok()) co_return Reply::Refuse(tokens.error());
    const int64_t now = ctx.clock.UnixSeconds();
    nlohmann::json out = nlohmann::json::array();
    for (const store::CreatorToken& t : *tokens) out.push_back(TokenJson(t, now));
    co_return Uncached(Reply::Json(200, JsonText({{"tokens", out}})));
  }
  // {"label": "ci", "rate": "10/s", "burst": "100", "bytes_rate": "1MB/s", "expires": "90d"}
  Result<nlohmann::json> j =
      JsonFields(req.small_body, {"label", "rate", "burst", "bytes_rate", "expires"});
  if (!j.ok()) co_return Reply::Refuse(j.error());
  service::CreatorTokenRequest request;
  request.label = Field(*j, "label");
  if (!j->contains("rate") || !j->contains("burst")) {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument, "'rate' and 'burst' are required",
                            "bad_rate");
  }
  Result<double> rate = RatePerSecond(Field(*j, "rate"), false, "rate");
  if (!rate.ok()) co_return Reply::Refuse(rate.error());
  request.rate = *rate;
  // A burst is a count: the rate's grammar without a unit.
  Result<double> burst = RatePerSecond(Field(*j, "burst"), false, "burst");
  if (!burst.ok() || Field(*j, "burst").find('/') != std::string::npos) {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument, "'burst' must be a number, like 100",
                            "bad_rate");
  }
  request.burst = *burst;
  if (!Field(*j, "bytes_rate").empty()) {
    Result<double> bytes = RatePerSecond(Field(*j, "bytes_rate"), true, "bytes_rate");
    if (!bytes.ok()) co_return Reply::Refuse(bytes.error());
    request.bytes_rate = *bytes;
  }
  if (!Field(*j, "expires").empty()) {
    Result<std::chrono::seconds> lifetime = BlockDuration(Field(*j, "expires"));
    if (!lifetime.ok()) co_return Reply::Refuse(lifetime.error());
    if (lifetime->count() <= 0) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                              "'expires' must be a lifetime, like 90d (leave it out: never)",
                              "bad_duration");
    }
    request.expires_in = lifetime->count();
  }
  auto creating = ctx.creator_tokens->Create(std::move(request));
  auto minted = co_await std::move(creating);
  if (!minted.ok()) co_return Reply::Refuse(minted.error());
  nlohmann::json out = TokenJson(minted->token, ctx.clock.UnixSeconds());
  // The only time the secret leaves the server: this answer, to the admin listener's client.
  out["secret"] = minted->secret;
  co_return Uncached(Reply::Json(201, JsonText(out)));
}

awaitable<Reply> HandleAdminRevokeToken(const Request& req, Context& ctx) {
  if (!ctx.creator_tokens) co_return NoCreatorTokens();
  auto revoking = ctx.creator_tokens->Revoke(std::string(req.id));
  auto revoked = co_await std::move(revoking);
  if (!revoked.ok()) co_return Reply::Refuse(revoked.error());
  co_return Reply::Empty(204);
}

awaitable<Reply> HandleAdminAbuse(const Request&, Context& ctx) {
  if (!ctx.abuse) {
    co_return Reply::Refuse(ErrorCode::kNotFound, "abuse watching is not set up here",
                            "no_abuse_watch");
  }
  nlohmann::json j = {
      {"abuse", AbuseJson(ctx.abuse->View())},
      {"reports_pending", ctx.moderation ? ctx.moderation->PendingReports() : int64_t{0}}};
  co_return Uncached(Reply::Json(200, JsonText(j)));
}

awaitable<Reply> HandleAdminAudit(const Request&, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  auto reading = ctx.moderation->Audit(200);
  auto rows = co_await std::move(reading);
  if (!rows.ok()) co_return Reply::Refuse(rows.error());
  nlohmann::json out = nlohmann::json::array();
  for (const store::AuditEntry& e : *rows) {
    out.push_back({{"at", e.at}, {"action", e.action}, {"target", e.target}, {"detail", e.detail}});
  }
  co_return Uncached(Reply::Json(200, JsonText({{"audit", out}})));
}

}  // namespace sluice::http
