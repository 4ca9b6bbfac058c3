// Moderation over HTTP: the public report (API and form) and the admin listener's side (its token
// check, the review queue, takedown, dismissal, blocks, the audit trail). The use-cases are
// service::ModerationService's; this file only translates.
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "handlers.h"
#include "pages.h"
#include "presenter.h"
#include "sluice/common/duration.h"
#include "sluice/service/ids.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

Reply NoModeration() {
  return Reply::Refuse(ErrorCode::kNotFound, "moderation is not enabled on this server",
                       "no_route");
}

// A JSON object of string fields, strictly: anything but an object of the `known` string fields is
// a 400 naming what is wrong. An empty body is an empty object.
Result<nlohmann::json> JsonFields(std::string_view body,
                                  std::initializer_list<std::string_view> known) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return nlohmann::json::object();
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "the body must be a JSON object", "bad_json");
  }
  for (const auto& [key, value] : j.items()) {
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

}  // namespace

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
  if (req.method != Method::kPost) co_return Uncached(Reply::Html(200, ReportFormPage(req.id)));
  if (!ctx.moderation) co_return NoModeration();
  auto reporting = ctx.moderation->Report(req.client.Key(), req.id,
                                          FormValue(req.small_body, "reason").value_or(""),
                                          FormValue(req.small_body, "note").value_or(""));
  Result<service::ReportReceipt> receipt = co_await std::move(reporting);
  if (!receipt.ok()) co_return Reply::Refuse(receipt.error());
  co_return Uncached(Reply::Html(200, ReportedPage(req.id)));
}

awaitable<Reply> HandleAdminReports(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return NoModeration();
  size_t limit = 100;
  if (auto text = req.Query("limit")) {
    try {
      limit = std::clamp<size_t>(std::stoul(*text), 1, 1000);
    } catch (const std::exception&) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument, "limit must be a number", "bad_limit");
    }
  }
  auto listing = ctx.moderation->OpenReports(limit);
  auto reports = co_await std::move(listing);
  if (!reports.ok()) co_return Reply::Refuse(reports.error());
  nlohmann::json out = nlohmann::json::array();
  for (const store::ReportSummary& r : *reports) {
    out.push_back({{"id", r.id.str()},
                   {"reports", r.reports},
                   {"reasons", r.reasons},
                   {"latest_at", r.latest_at},
                   {"latest_note", r.latest_note},
                   {"moderation", store::ModerationName(r.moderation)}});
  }
  co_return Uncached(Reply::Json(200, JsonText({{"pastes", out}})));
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
  Result<nlohmann::json> j = JsonFields(req.small_body, {"note"});
  if (!j.ok()) co_return Reply::Refuse(j.error());
  auto dismissing = ctx.moderation->Dismiss(req.id, Field(*j, "note"));
  if (Status s = co_await std::move(dismissing); !s.ok()) co_return Reply::Refuse(s.error());
  co_return Uncached(
      Reply::Json(200, JsonText({{"id", std::string(req.id)}, {"moderation", "none"}})));
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
