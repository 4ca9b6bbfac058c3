// The review page on the admin listener (docs/moderation.md, "The review page"): the queue with
// each entry's clock, a paste's text as plain text, and the operator's actions as plain forms, so
// it works on a phone and without JavaScript. Its pages are built here rather than in pages.cc:
// they are the admin listener's, in English like the admin API, with a frame of their own
// (review_layout.html) that links nothing of the public site. The use-cases are
// service::ModerationService's, as for the JSON API beside it.
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "assets.h"
#include "handlers.h"
#include "page_templates.h"
#include "pages.h"
#include "review_desk.h"
#include "sluice/admission/create_access.h"
#include "sluice/service/ids.h"
#include "sluice/service/text.h"

namespace sluice::http {

namespace {

constexpr std::string_view kSessionCookie = "sluice_review";
// A page of the queue: the JSON listing's keyset, with a smaller cap, since each row is a form.
constexpr size_t kDefaultRows = 50;
constexpr size_t kMaxRows = 100;
// The most of a body a review shows: enough to judge a paste, and a page that stays small on a
// phone whatever max_paste_bytes allows.
constexpr size_t kHeadBytes = 64 * 1024;
// A row is marked late from this share of takedown_deadline on: the share at which the
// SluiceTakedownDeadline alert (deploy/prometheus/sluice.rules.yml) fires.
constexpr double kLateShare = 0.75;

// Who is using the page: `who` names them for the forms' CSRF token, `name` in the audit line.
struct Operator {
  std::string who;
  std::string name;
};

// A trusted proxy's forward-auth name first (RequestClient::ForwardedUser: honoured only from
// trusted_proxy, as for creates), then the session cookie of a token sign-in.
std::optional<Operator> OperatorOf(const Request& req, const Context& ctx) {
  if (std::optional<std::string> user = req.client.ForwardedUser()) {
    // A malformed name is a broken or hostile proxy's: nobody, rather than some cleaned name.
    if (admission::IsValidForwardedUser(*user)) return Operator{"user:" + *user, *user};
    return std::nullopt;
  }
  if (std::optional<std::string_view> cookie = CookieValue(req.headers, kSessionCookie)) {
    if (std::optional<std::string> id = ctx.review->SessionOf(*cookie)) {
      return Operator{"session:" + *id, "admin-token session " + id->substr(0, 8)};
    }
  }
  return std::nullopt;
}

// A browser says where a POST comes from (Sec-Fetch-Site, else Origin); one that says neither
// is an old browser or a program, and the form token alone decides.
bool FromOwnPage(const Request& req, const Context& ctx) {
  if (const std::string_view site = req.headers.Get("Sec-Fetch-Site"); !site.empty()) {
    return site == "same-origin";
  }
  if (const std::string_view origin = req.headers.Get("Origin"); !origin.empty()) {
    return IsOwnOrigin(origin, req, ctx);
  }
  return true;
}

Reply CrossSite() {
  return Reply::Refuse(ErrorCode::kPermissionDenied,
                       "the review page takes a form only from its own pages: open "
                       "/admin/review and act from there",
                       "review_cross_site");
}

Reply SeeOther(std::string location) {
  Reply r = Uncached(Reply::Empty(303));
  r.Set("Location", std::move(location));
  return r;
}

std::string Page(std::string_view title, std::string_view body, const Operator* op,
                 const Context& ctx) {
  templates::ReviewLayout layout;
  layout.title = title;
  layout.style_url = AssetUrl("/static/style.css");
  layout.signed_in = op != nullptr;
  std::string token;
  if (op) {
    token = ctx.review->FormToken(op->who);
    layout.form_token = token;
    layout.who = op->name;
  }
  layout.body_html = body;
  std::string out;
  templates::Render(layout, out);
  return out;
}

Reply LoginPage(unsigned status, std::string_view failed) {
  templates::ReviewLogin login;
  login.failed = !failed.empty();
  login.failed_text = failed;
  std::string body;
  templates::Render(login, body);
  templates::ReviewLayout layout;
  layout.title = "Sign in";
  layout.style_url = AssetUrl("/static/style.css");
  layout.body_html = body;
  std::string out;
  templates::Render(layout, out);
  return Uncached(Reply::Html(status, std::move(out)));
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

std::string_view StateText(store::Moderation m) {
  switch (m) {
    case store::Moderation::kWithheld:
      return "withheld (451)";
    case store::Moderation::kWithheldNotice:
      return "withheld by a notice (451)";
    case store::Moderation::kTakenDown:
      return "taken down";
    default:
      return "served";
  }
}

// The clock's words for an entry that has waited `waited` seconds: nothing, or how late it is.
std::string LateText(int64_t waited, std::chrono::seconds deadline) {
  if (waited >= deadline.count()) {
    return "past the takedown deadline (" + DurationInWords(deadline.count()) + ")";
  }
  if (static_cast<double>(waited) >= kLateShare * static_cast<double>(deadline.count())) {
    return "near the takedown deadline (" + DurationInWords(deadline.count()) + ")";
  }
  return {};
}

}  // namespace

awaitable<Reply> HandleReviewLogin(const Request& req, Context& ctx) {
  if (req.method != Method::kPost) {
    if (OperatorOf(req, ctx)) co_return SeeOther("/admin/review");
    co_return LoginPage(200, {});
  }
  if (!FromOwnPage(req, ctx)) co_return CrossSite();
  // Before the token is even hashed: a flood of guesses costs a bucket's arithmetic each.
  const admission::TakeDecision admitted = ctx.review->AdmitLogin(req.client.Key());
  if (!admitted.allowed) {
    Error e = MakeError(ErrorCode::kResourceExhausted,
                        "too many sign-in attempts: wait and try again", "review_login_rate");
    e.retry_after_seconds = admitted.RetryAfterSeconds();
    co_return Reply::Refuse(std::move(e));
  }
  if (!ctx.admin_token_sha256) {
    co_return LoginPage(401,
                        "This server has no admin token (admin_token_file is unset): sign in "
                        "through the forward-auth proxy instead.");
  }
  const std::string token = FormValue(req.small_body, "token").value_or("");
  const store::TokenHash presented = service::HashDeleteToken(token);
  if (CRYPTO_memcmp(presented.data(), ctx.admin_token_sha256->data(), presented.size()) != 0) {
    spdlog::warn("review page: a wrong admin token from {}", req.client.Key());
    co_return LoginPage(401, "Wrong admin token.");
  }
  Reply signed_in = SeeOther("/admin/review");
  // Secure when the page was reached over https (a TLS proxy in front): the browser's Origin says
  // which scheme the form was on.
  const bool https = req.headers.Get("Origin").starts_with("https://");
  signed_in.Set("Set-Cookie",
                fmt::format("{}={}; Path=/admin; Max-Age={}; HttpOnly; SameSite=Strict{}",
                            kSessionCookie, ctx.review->OpenSession(),
                            std::chrono::seconds(ReviewDesk::kSessionLifetime).count(),
                            https ? "; Secure" : ""));
  spdlog::warn("audit: review page: signed in with the admin token from {}", req.client.Key());
  co_return signed_in;
}

awaitable<Reply> HandleReviewLogout(const Request& req, Context& ctx) {
  if (!FromOwnPage(req, ctx)) co_return CrossSite();
  if (std::optional<Operator> op = OperatorOf(req, ctx)) {
    if (!ctx.review->IsFormToken(op->who, FormValue(req.small_body, "csrf").value_or(""))) {
      co_return CrossSite();
    }
  }
  Reply out = SeeOther("/admin/login");
  out.Set("Set-Cookie",
          fmt::format("{}=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict", kSessionCookie));
  co_return out;
}

awaitable<Reply> HandleReviewQueue(const Request& req, Context& ctx) {
  const std::optional<Operator> op = OperatorOf(req, ctx);
  if (!op) co_return SeeOther("/admin/login");
  if (!ctx.moderation) {
    co_return Reply::Refuse(ErrorCode::kNotFound, "moderation is not enabled on this server",
                            "no_route");
  }
  size_t limit = kDefaultRows;
  if (const auto text = req.Query("limit")) {
    if (text->empty() || text->size() > 6 ||
        text->find_first_not_of("0123456789") != std::string::npos) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument, "limit must be a number", "bad_limit");
    }
    limit = std::clamp<size_t>(std::stoul(*text), 1, kMaxRows);
  }
  std::optional<store::ReportCursor> after;
  if (const auto text = req.Query("before")) {
    after = store::ReportCursor::Parse(*text);
    if (!after) {
      co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                              "before must be the link of an earlier page", "bad_cursor");
    }
  }
  auto listing = ctx.moderation->OpenReports(after, limit);
  auto page = co_await std::move(listing);
  if (!page.ok()) co_return Reply::Refuse(page.error());

  const std::string form_token = ctx.review->FormToken(op->who);
  const std::chrono::seconds deadline = ctx.moderation->TakedownDeadline();
  const int64_t now = ctx.clock.UnixSeconds();
  std::string rows;
  // The first page leads with the notices still open, oldest first (the takedown clock's order),
  // one row per paste each still names; a page of them at most, like the reports below.
  std::vector<store::Notice> notices;
  if (!after) {
    auto noticing = ctx.moderation->OpenNotices(limit);
    auto open = co_await std::move(noticing);
    if (!open.ok()) co_return Reply::Refuse(open.error());
    notices = std::move(*open);
  }
  for (const store::Notice& n : notices) {
    const int64_t waited = std::max<int64_t>(0, now - n.received_at);
    std::string late = LateText(waited, deadline);
    if (n.deadline_at && now >= *n.deadline_at) late = "past the sender's deadline";
    const std::string notice_text =
        fmt::format("{} from {} ({})", n.reference, n.sender, n.category);
    const std::string waiting = DurationInWords(waited);
    for (const store::NoticePaste& p : n.pastes) {
      if (!p.open) continue;
      templates::ReviewRow row;
      row.id = p.paste;
      row.kind = "notice";
      row.notice = true;
      row.notice_text = notice_text;
      row.reasons = n.category;
      row.state = std::string(StateText(store::Moderation::kWithheldNotice));
      row.waiting = waiting;
      row.late = !late.empty();
      row.late_text = late;
      row.form_token = form_token;
      row.withheld = true;
      templates::Render(row, rows);
    }
  }
  for (const store::ReportSummary& r : page->pastes) {
    const int64_t waited = std::max<int64_t>(0, now - r.first_at);
    const std::string id = r.id.str();
    const std::string reports = std::to_string(r.reports);
    const std::string networks = std::to_string(r.networks);
    const std::string votes = std::to_string(r.votes);
    const std::string reasons = Joined(r.reasons);
    const std::string waiting = DurationInWords(waited);
    const std::string late = LateText(waited, deadline);
    const std::string state =
        std::string(StateText(r.moderation)) + (r.keep ? ", reviewed keep" : "");
    templates::ReviewRow row;
    row.id = id;
    row.kind = "report";
    row.reports = reports;
    row.networks = networks;
    row.votes = votes;
    row.reasons = reasons;
    row.state = state;
    row.waiting = waiting;
    row.late = !late.empty();
    row.late_text = late;
    row.form_token = form_token;
    row.withheld = r.moderation == store::Moderation::kWithheld ||
                   r.moderation == store::Moderation::kWithheldNotice;
    templates::Render(row, rows);
  }
  const std::string pending = std::to_string(ctx.moderation->PendingReports());
  const std::string deadline_text = DurationInWords(deadline.count());
  const std::string warn_text =
      DurationInWords(static_cast<int64_t>(kLateShare * static_cast<double>(deadline.count())));
  std::string done_text;
  if (const auto did = req.Query("done"); did && did->size() <= 16) {
    const std::string id = req.Query("id").value_or("");
    if (store::PasteId::Parse(id)) done_text = fmt::format("Done: {} of {}.", *did, id);
  }
  const std::string next_url =
      page->next ? fmt::format("/admin/review?limit={}&before={}", limit, page->next->Encode())
                 : std::string();
  templates::ReviewQueue queue;
  queue.pending = pending;
  queue.deadline = deadline_text;
  queue.warn_at = warn_text;
  queue.done = !done_text.empty();
  queue.done_text = done_text;
  queue.empty = page->pastes.empty() && rows.empty();
  queue.rows_html = rows;
  queue.more = page->next.has_value();
  queue.next_url = next_url;
  std::string body;
  templates::Render(queue, body);
  co_return Uncached(Reply::Html(200, Page("Review queue", body, &*op, ctx)));
}

awaitable<Reply> HandleReviewPaste(const Request& req, Context& ctx) {
  if (!ctx.moderation) {
    co_return Reply::Refuse(ErrorCode::kNotFound, "moderation is not enabled on this server",
                            "no_route");
  }
  const std::optional<Operator> op = OperatorOf(req, ctx);
  if (req.method != Method::kPost) {
    if (!op) co_return SeeOther("/admin/login");
    auto showing = ctx.moderation->Show(req.id);
    auto review = co_await std::move(showing);
    if (!review.ok()) co_return Reply::Refuse(review.error());
    const store::PasteMeta& m = review->meta;
    templates::ReviewPaste page;
    const std::string id = m.id.str();
    const std::string state = std::string(StateText(m.moderation));
    const std::string size = SizeInWords(m.size_bytes);
    const std::string created = FormatUnixTime(m.created_at);
    const std::string expires = m.expires_at > 0 ? FormatUnixTime(m.expires_at) : "never";
    page.id = id;
    page.state = state;
    page.size = size;
    page.created = created;
    page.expires = expires;
    page.encrypted = m.encrypted;
    page.gone = !m.encrypted && !review->text;
    page.has_text = !m.encrypted && review->text.has_value();
    std::string text;
    std::string shown;
    if (page.has_text) {
      std::string_view body = *review->text;
      if (body.size() > kHeadBytes) {
        size_t cut = kHeadBytes;
        // Never half a character: back off to the start of the one the cut falls in.
        while (cut > 0 && (static_cast<unsigned char>(body[cut]) & 0xC0) == 0x80) --cut;
        body = body.substr(0, cut);
        page.cut = true;
        shown = SizeInWords(cut);
      }
      // Escaped by the template; invalid bytes are replaced so the page stays valid UTF-8.
      text = service::ReplaceInvalidUtf8(body);
    }
    page.shown = shown;
    page.text = text;
    page.withheld = m.moderation == store::Moderation::kWithheld ||
                    m.moderation == store::Moderation::kWithheldNotice;
    const std::string form_token = ctx.review->FormToken(op->who);
    page.form_token = form_token;
    std::string html;
    templates::Render(page, html);
    co_return Uncached(Reply::Html(200, Page("Paste " + id, html, &*op, ctx)));
  }

  // An action. Refused before anything changes: nobody signed in (a cross-site POST carries no
  // SameSite=Strict cookie), a foreign page, or a form without this session's token.
  if (!op) {
    co_return Reply::Refuse(ErrorCode::kPermissionDenied,
                            "sign in to the review page first (/admin/login)", "review_signed_out");
  }
  if (!FromOwnPage(req, ctx)) co_return CrossSite();
  if (!ctx.review->IsFormToken(op->who, FormValue(req.small_body, "csrf").value_or(""))) {
    co_return Reply::Refuse(ErrorCode::kPermissionDenied,
                            "this form is not from your session's review page: reload "
                            "/admin/review and act from there",
                            "review_form_token");
  }
  const std::string action = FormValue(req.small_body, "action").value_or("");
  std::string reason = FormValue(req.small_body, "reason").value_or("");
  Status done = Status();
  if (action == "takedown") {
    auto taking = ctx.moderation->Takedown(req.id, reason);
    done = co_await std::move(taking);
  } else if (action == "dismiss" || action == "keep" || action == "restore") {
    // Restore is the dismissal of a withheld paste (the service times it as a restore); keep
    // also marks the paste so later reports only queue it.
    auto dismissing = ctx.moderation->Dismiss(req.id, reason, action == "keep");
    done = co_await std::move(dismissing);
  } else {
    co_return Reply::Refuse(ErrorCode::kInvalidArgument,
                            "action must be takedown, dismiss, keep or restore", "bad_action");
  }
  if (!done.ok()) co_return Reply::Refuse(done.error());
  spdlog::warn("audit: review page: {} of {} by {}", action, req.id, op->name);
  co_return SeeOther(fmt::format("/admin/review?done={}&id={}", action, req.id));
}

}  // namespace sluice::http
