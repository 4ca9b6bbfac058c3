// The site's pages and the operator's endpoints: index, health, metrics, limits, status, static
// files, the public contact (security.txt, robots.txt, /abuse) and fault injection.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "assets.h"
#include "handlers.h"
#include "pages.h"
#include "presenter.h"
#include "sluice/service/text.h"

namespace sluice::http {

Result<std::string> FormatAsked(const Request& req, std::initializer_list<std::string_view> known) {
  std::optional<std::string> format = req.Query("format");
  if (!format) return std::string();
  if (std::find(known.begin(), known.end(), *format) != known.end()) return std::move(*format);
  std::string forms;
  for (std::string_view form : known)
    forms += fmt::format("{}'{}'", forms.empty() ? "" : ", ", form);
  return MakeError(ErrorCode::kInvalidArgument, fmt::format("format must be {} or absent", forms),
                   "bad_format");
}

std::string_view DefaultTtlName(const Context& ctx) {
  for (const auto& [name, seconds] : service::TtlAllowList()) {
    if (seconds == ctx.service.options()->default_ttl) return name;
  }
  return "1w";
}

awaitable<Reply> HandleIndex(const Request& req, Context& ctx) {
  co_return Reply::Html(
      200, IndexPage(ReaderOf(req), DefaultTtlName(ctx), ctx.service.options()->max_paste_bytes,
                     nullptr, ctx.service.ProofOfWorkOn()));
}

awaitable<Reply> HandleSetLanguage(const Request& req, Context&) {
  const std::string ui = FormValue(req.small_body, "ui").value_or("");
  std::string tags;
  for (const i18n::LangInfo& shipped : i18n::kLanguages) {
    if (ui == shipped.tag) {
      // Back to the page the form was on; anything but a path of this site goes to the create
      // page, so the form cannot be made to send a reader elsewhere (an open redirect).
      // Only visible ASCII without a backslash: browsers drop tabs and line breaks from a URL
      // and read "\\" as "/", so "/<TAB>/evil.example" would leave as "//evil.example", and a
      // NUL or a line break would break the header itself.
      std::string back = FormValue(req.small_body, "back").value_or("/");
      const bool plain_path = std::all_of(back.begin(), back.end(),
                                          [](char c) { return c > ' ' && c < 0x7f && c != '\\'; });
      if (!plain_path || !back.starts_with('/') || back.starts_with("//")) back = "/";
      Reply reply = Reply::Empty(303);
      reply.Set("Location", std::move(back));
      // A year, for every path; readable by no script, since none needs it; Lax, so a link from
      // elsewhere opens the page in the reader's language.
      reply.Set("Set-Cookie", fmt::format("{}={}; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax",
                                          kLanguageCookie, shipped.tag));
      reply.Set("Cache-Control", "no-store");
      co_return reply;
    }
    tags += tags.empty() ? "" : ", ";
    tags += shipped.tag;
  }
  co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                          fmt::format("ui must be one of the page languages: {}", tags),
                          "bad_language", 400);
}

awaitable<Reply> HandleHealthz(const Request&, Context&) { co_return Reply::Text(200, "ok\n"); }

awaitable<Reply> HandleMetrics(const Request&, Context& ctx) {
  if (ctx.moderation != nullptr) {
    // The takedown clock's age is computed from the stored arrival (at most a second old).
    auto refreshing = ctx.moderation->RefreshForScrape();
    co_await std::move(refreshing);
  }
  Reply reply = Reply::Text(200, ctx.metrics.Render());
  reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
  co_return reply;
}

awaitable<Reply> HandleLimits(const Request& req, Context& ctx) {
  // The budgets a create of this client would spend: a named creator's own.
  const Result<admission::Creator> creator = CreatorOf(req, ctx);
  if (!creator.ok()) co_return RefuseCreate(creator.error());
  const std::string client_key = creator->BudgetKey();
  auto reading = ctx.service.DecidingBudgets(client_key);
  const service::ClientBudgets b = co_await std::move(reading);
  nlohmann::json buckets = nlohmann::json::object();
  for (const auto& bucket : b.buckets) {
    buckets[bucket.name] = {{"rate_per_second", bucket.policy.rate_per_second},
                            {"burst", bucket.policy.burst},
                            {"available", std::floor(bucket.available)}};
  }
  auto pool = [](const admission::SlotGauges& g) {
    return nlohmann::json{{"in_use", g.in_use}, {"limit", g.limit}};
  };
  const char* from = "this_process";
  if (b.source == service::ClientBudgets::Source::kSharedStore) from = "shared_store";
  if (b.source == service::ClientBudgets::Source::kThisProcessSharedStoreSilent) {
    from = "this_process_while_shared_store_silent";
  }
  if (b.source == service::ClientBudgets::Source::kThisProcessPeeksSpent) {
    from = "this_process_shared_store_not_asked";
  }
  nlohmann::json j = {
      {"client_key", client_key},
      {"create_access",
       std::string(admission::CreateAccessName(ctx.service.options()->create_access.mode))},
      // The cutover's window (docs/scale-out.md): a client that reads this knows why its
      // creates answer 503 read_only, and for how long to wait.
      {"read_only", ctx.service.options()->read_only},
      {"buckets_from", from},
      {"buckets", buckets},
      {"pools",
       {{"create", pool(b.create_slots)},
        {"read", pool(b.read_slots)},
        {"fill", pool(b.fill_slots)}}},
      {"create_bytes",
       {{"in_use", b.create_slots.bytes_in_use}, {"limit", b.create_slots.max_bytes}}}};
  // A page about to send a create asks here first, so that it solves before it sends the text.
  if (ctx.service.ProofOfWorkOn()) {
    std::optional<std::string> challenge = ctx.service.ChallengeBeforeCreate(*creator, b);
    j["proof_of_work"] = {{"asked", challenge.has_value()}};
    if (challenge) j["proof_of_work"]["challenge"] = nlohmann::json::parse(*challenge);
  }
  co_return Uncached(Reply::Json(200, JsonText(j, 2)));
}

awaitable<Reply> HandleStatusPage(const Request& req, Context& ctx) {
  co_return Uncached(
      Reply::Html(200, StatusPage(ReaderOf(req), ctx.metrics.Collect(), ctx.clock.UnixSeconds())));
}

namespace {

// The status object both listeners answer; `abuse` is the public aggregates or, on the admin
// listener, the same with who is behind them.
nlohmann::json StatusJson(const Context& ctx, nlohmann::json abuse) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [key, value] : ctx.metrics.Collect()) {
    values[key] = std::isfinite(value) ? value : 0.0;
  }
  // Wall time, as the page's charts plot it.
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return {{"time_ms", now_ms},
          {"metrics", std::move(values)},
          {"abuse", std::move(abuse)},
          {"reports_pending", ctx.moderation ? ctx.moderation->PendingReports() : int64_t{0}}};
}

}  // namespace

awaitable<Reply> HandleStatusApi(const Request&, Context& ctx) {
  // Public: counts that name nobody, never a key, a pseudonym or a prefix.
  const nlohmann::json abuse =
      AbuseAggregatesJson(ctx.abuse ? ctx.abuse->Aggregates() : service::AbuseAggregates{});
  co_return Uncached(Reply::Json(200, JsonText(StatusJson(ctx, abuse))));
}

awaitable<Reply> HandleAdminStatus(const Request&, Context& ctx) {
  const nlohmann::json abuse = AbuseJson(ctx.abuse ? ctx.abuse->View() : service::AbuseView{});
  co_return Uncached(Reply::Json(200, JsonText(StatusJson(ctx, abuse))));
}

nlohmann::json AbuseAggregatesJson(const service::AbuseAggregates& aggregates) {
  // Cumulative, as "le" says (and as /metrics has it): keys whose share is at most `le`.
  nlohmann::json budget = nlohmann::json::array();
  const auto& bounds = service::AbuseWatch::BudgetBounds();
  uint64_t keys = 0;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    keys += i < aggregates.budget_use.size() ? aggregates.budget_use[i] : 0;
    budget.push_back(
        {{"le", i < bounds.size() ? nlohmann::json(bounds[i]) : "+Inf"}, {"keys", keys}});
  }
  return {{"window_seconds", aggregates.window_seconds},
          {"budget_use", std::move(budget)},
          {"global_cap_saturation", aggregates.global_cap_saturation}};
}

nlohmann::json AbuseJson(const service::AbuseView& view) {
  auto rows = [](const std::vector<service::AbuseRow>& from, const char* name) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : from) {
      out.push_back({{name, r.name}, {"creates", r.creates}, {"refusals", r.refusals}});
    }
    return out;
  };
  nlohmann::json j = AbuseAggregatesJson(view.aggregates);
  j["top_keys"] = rows(view.top_keys, "key");
  j["top_prefixes"] = rows(view.top_prefixes, "prefix");
  return j;
}

awaitable<Reply> HandleFaults(const Request& req, Context& ctx) {
  if (!ctx.get_faults || !ctx.set_faults) {
    co_return Reply::Refuse(ErrorCode::kNotFound, "no such route", "no_route");
  }
  if (req.method == Method::kPut) {
    Status set = ctx.set_faults(req.small_body);
    if (!set.ok()) co_return Reply::Refuse(set.error());
    spdlog::warn("fault injection rules replaced: '{}'", ctx.get_faults());
    co_return Reply::Empty(204);
  }
  co_return Reply::Text(200, ctx.get_faults() + "\n");
}

awaitable<Reply> HandleStatic(const Request& req, Context&) {
  const Asset* asset = FindAsset(req.target);
  if (asset == nullptr) co_return Reply::Refuse(ErrorCode::kNotFound, "no such file", "no_route");
  const std::string_view if_none_match = req.headers.Get("If-None-Match");
  Reply reply = !if_none_match.empty() && if_none_match.find(asset->etag) != std::string_view::npos
                    ? Reply::Empty(304)
                    : Reply::Text(200, std::string(asset->body));
  if (reply.status == 200) reply.content_type = std::string(asset->content_type);
  reply.Set("ETag", std::string(asset->etag));
  // Pages link the versioned URL, so a long lifetime never serves an old build's file.
  reply.Set("Cache-Control", req.target.find("?v=") != std::string_view::npos
                                 ? "public, max-age=31536000, immutable"
                                 : "public, max-age=300");
  reply.Set("X-Content-Type-Options", "nosniff");
  co_return reply;
}

namespace {

// A text answer made once and shared by every request (public_contact.h), cacheable for a day:
// it changes only with the settings, and security.txt's Expires moves a day at a time.
Reply SharedText(std::shared_ptr<const std::string> text) {
  Reply reply = Reply::Text(200, "");
  reply.content_type = "text/plain; charset=utf-8";
  reply.shared_body = std::move(text);
  reply.Set("Cache-Control", "public, max-age=86400");
  reply.Set("X-Content-Type-Options", "nosniff");
  return reply;
}

}  // namespace

awaitable<Reply> HandleSecurityTxt(const Request&, Context& ctx) {
  std::shared_ptr<const std::string> text =
      ctx.contact ? ctx.contact->SecurityTxt(ctx.clock.UnixSeconds()) : nullptr;
  // RFC 9116 2.5.3 requires a Contact: a file without one would tell a reporter nothing, and a
  // validator would call it invalid. /abuse says how to reach the operator meanwhile.
  if (!text) {
    co_return Reply::Refuse(ErrorCode::kNotFound,
                            "this server's operator has set no abuse_contact; see /abuse",
                            "no_contact");
  }
  co_return SharedText(std::move(text));
}

awaitable<Reply> HandleRobotsTxt(const Request&, Context& ctx) {
  if (!ctx.contact) co_return Reply::Refuse(ErrorCode::kNotFound, "no such route", "no_route");
  co_return SharedText(ctx.contact->RobotsTxt());
}

awaitable<Reply> HandleAbusePage(const Request& req, Context& ctx) {
  if (!ctx.contact) co_return Reply::Refuse(ErrorCode::kNotFound, "no such route", "no_route");
  const Reader reader = ReaderOf(req);
  // The queue's length is the moderation service's last read of the store's counts (no store
  // call here); the page is made again only when it or the contact changes, once per language
  // and thread, so a flood of requests for it formats nothing.
  const int64_t pending = ctx.moderation ? ctx.moderation->PendingReports() : 0;
  struct Made {
    const PublicContact* contact = nullptr;
    int64_t pending = -1;
    std::shared_ptr<const std::string> page;
  };
  thread_local std::array<Made, i18n::kLangCount> made;
  Made& slot = made[static_cast<size_t>(reader.lang)];
  // By address: every public contact stays alive for the process (PublicContact::Install).
  if (slot.contact != ctx.contact.get() || slot.pending != pending || !slot.page) {
    slot = {ctx.contact.get(), pending,
            std::make_shared<const std::string>(AbusePage(reader, *ctx.contact, pending))};
  }
  Reply reply = Reply::Html(200, "");
  reply.shared_body = slot.page;
  reply.Set("Cache-Control", "public, max-age=60");
  co_return reply;
}

namespace {

nlohmann::json CountsJson(const std::map<std::string, int64_t>& counts,
                          std::initializer_list<std::string_view> always = {}) {
  nlohmann::json j = nlohmann::json::object();
  for (std::string_view label : always) j[std::string(label)] = 0;
  for (const auto& [label, n] : counts) j[label] = n;
  return j;
}

nlohmann::json QuantileJson(const std::optional<service::TimeQuantile>& q) {
  if (!q) return nullptr;
  if (q->beyond) return {{"more_than_seconds", store::kTimeToActionBounds.back()}};
  return {{"at_most_seconds", q->at_most_seconds}};
}

}  // namespace

nlohmann::json TransparencyJson(const service::TransparencyReport& report) {
  nlohmann::json months = nlohmann::json::array();
  for (const service::MonthFigures& m : report.months) {
    months.push_back({
        {"month", m.month},
        {"notices",
         {{"total", m.notices},
          {"by_category", CountsJson(m.notices_by_category)},
          {"by_sender", CountsJson(m.notices_by_sender)}}},
        {"withholds", CountsJson(m.withholds, {store::kWithholdVotes, store::kWithholdNotice})},
        {"takedowns", m.takedowns},
        {"restores", m.restores},
        {"dismissals", m.dismissals},
        {"time_to_action",
         {{"actions", m.timed_actions},
          {"median", QuantileJson(m.median)},
          {"p95", QuantileJson(m.p95)}}},
        {"reuploads_blocked", m.reuploads_blocked},
        {"blocks", CountsJson(m.blocks, {store::kBlockNetwork, store::kBlockContent})},
    });
  }
  return {{"months", std::move(months)},
          {"read_at", FormatUnixTime(report.read_at)},
          {"time_to_action_bounds_seconds", store::kTimeToActionBounds},
          {"encrypted_pastes",
           "The re-upload block refuses exactly the bytes of a removed paste. Encrypted pastes "
           "cannot be matched: the server never sees their text, and the same text encrypted "
           "again is different bytes."}};
}

awaitable<Reply> HandleTransparency(const Request& req, Context& ctx) {
  if (!ctx.moderation) co_return Reply::Refuse(ErrorCode::kNotFound, "no such route", "no_route");
  // Before the store: a request the route cannot answer costs nothing and says so even when the
  // store is down.
  Result<std::string> format = FormatAsked(req, {"json"});
  if (!format.ok()) co_return Reply::Refuse(format.error());
  auto reading = ctx.moderation->Transparency();
  Result<std::shared_ptr<const service::TransparencyReport>> report = co_await std::move(reading);
  if (!report.ok()) co_return Reply::Refuse(report.error());
  const std::shared_ptr<const service::TransparencyReport>& made = *report;
  const bool html = req.WantsHtml() && format->empty();
  // The report changes at most once per ModerationService::kTransparencyFreshness: its page and
  // its JSON are made once per report (and language) and thread, so a flood of requests formats
  // nothing and costs the store one read per few seconds.
  struct Made {
    const service::TransparencyReport* report = nullptr;
    std::shared_ptr<const service::TransparencyReport> keep;  // so the address is not reused
    std::shared_ptr<const std::string> body;
  };
  thread_local std::array<Made, i18n::kLangCount + 1> made_by;
  const size_t slot_at = html ? static_cast<size_t>(ReaderOf(req).lang) : i18n::kLangCount;
  Made& slot = made_by[slot_at];
  if (slot.report != made.get() || !slot.body) {
    slot = {made.get(), made,
            std::make_shared<const std::string>(html ? TransparencyPage(ReaderOf(req), *made)
                                                     : JsonText(TransparencyJson(*made)))};
  }
  Reply reply = html ? Reply::Html(200, "") : Reply::Json(200, "");
  reply.shared_body = slot.body;
  reply.Set("Cache-Control", "public, max-age=60");
  reply.Set("Vary", "Accept");
  co_return reply;
}

}  // namespace sluice::http
