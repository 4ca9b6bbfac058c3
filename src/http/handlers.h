// The handlers: each turns a Request into a Reply by asking the service layer, knowing nothing of
// sockets or Beast. The paste routes live in one file per family (create_handlers.cc,
// read_handlers.cc, claim_handlers.cc, delete_handlers.cc, fork_handlers.cc; what they answer alike
// in paste_answers.h, a hot read's prepared answers in prepared_answers.h), the site's and
// operator's pages in site_handlers.cc and admin_handlers.cc.
#pragma once

#include <array>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "public_contact.h"
#include "reply.h"
#include "request.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/creator_tokens.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_service.h"

namespace sluice::http {

class ReviewDesk;

/// What every handler may use; one per server, shared by its threads (all members thread-safe).
struct Context {
  service::PasteService& service;
  render::ViewRenderer& renderer;
  MetricsRegistry& metrics;
  const Clock& clock;
  /// The base of the links handed out, without a trailing slash ("https://paste.example").
  std::string base_url;
  /// Fault injection control (GET/PUT /debug/faults); unset unless configuration enables it,
  /// and then the route answers 404.
  std::function<std::string()> get_faults;
  std::function<Status(std::string_view)> set_faults;
  /// Reports (public) and the review (admin listener); null when moderation is not set up.
  service::ModerationService* moderation = nullptr;
  /// Admin listener only: the SHA-256 of its bearer token; unset refuses every request.
  std::optional<std::array<unsigned char, 32>> admin_token_sha256{};
  /// The abuse view: its aggregates on the public status, who is behind them on the admin
  /// listener's /status and /admin/abuse; null when not set up.
  const service::AbuseWatch* abuse = nullptr;
  /// Public side: security.txt, robots.txt and /abuse (public_contact.h); null elsewhere, where
  /// those routes do not exist.
  std::shared_ptr<const PublicContact> contact{};
  /// Creator tokens: looked up by the public side's creates, managed by the admin listener's
  /// /admin/tokens; null when not set up (every bearer token on a create is then refused).
  service::CreatorTokens* creator_tokens = nullptr;
  /// Admin listener only: the review page's sessions, form tokens and sign-in budget
  /// (review_desk.h); null elsewhere.
  std::shared_ptr<ReviewDesk> review{};
};

using boost::asio::awaitable;

/// The name of the default TTL on the allow-list, for the create page's choice.
std::string_view DefaultTtlName(const Context& ctx);

/// The form ?format= asks for: empty when absent; InvalidArgument (reason bad_format) for a value
/// outside `known`, so that a typo is told rather than answered in the default form.
Result<std::string> FormatAsked(const Request& req, std::initializer_list<std::string_view> known);

/// Who a request creates as (admission::Creator): its address key, the creator token its
/// "Authorization: Bearer" names and, from a trusted forward-auth proxy, the name it gave. A name
/// that is not one (admission::IsValidForwardedUser) is a broken or hostile proxy's:
/// InvalidArgument (reason bad_forwarded_user), never cleaned into some other creator's name. A
/// bearer token not in force (malformed, unknown, revoked, expired; or two Authorization fields):
/// PermissionDenied, reason invalid_token, never taken as anonymous. Asks no store.
Result<admission::Creator> CreatorOf(const Request& req, const Context& ctx);
/// The answer to a create refused before its body: 401 with WWW-Authenticate for a refusal a
/// credential would lift (create_access_credential, invalid_token), else the error's status.
Reply RefuseCreate(const Error& error);

awaitable<Reply> HandleCreateApi(const Request& req, Context& ctx);
awaitable<Reply> HandleCreateForm(const Request& req, Context& ctx);
awaitable<Reply> HandleCreateHaste(const Request& req, Context& ctx);
awaitable<Reply> HandleDocument(const Request& req, Context& ctx);
awaitable<Reply> HandleReadApi(const Request& req, Context& ctx);
awaitable<Reply> HandleRaw(const Request& req, Context& ctx);
awaitable<Reply> HandleView(const Request& req, Context& ctx);
/// GET /new?from=ID: the create page holding paste ID's text, to make a fork of it.
awaitable<Reply> HandleNewFrom(const Request& req, Context& ctx);
/// GET /{id}/diff: a fork's unified diff against its parent, highlighted, from the workers.
awaitable<Reply> HandleDiff(const Request& req, Context& ctx);
/// GET /{id}/rendered: a paste's Markdown rendered (safe mode), from the workers.
awaitable<Reply> HandleRendered(const Request& req, Context& ctx);
awaitable<Reply> HandleDelete(const Request& req, Context& ctx);
awaitable<Reply> HandleDeleteForm(const Request& req, Context& ctx);
/// POST /api/v1/pastes/{id}/claim: the one reading of a burn-after-reading paste, as JSON
/// (?format=raw: the text); 404 once claimed.
awaitable<Reply> HandleClaimApi(const Request& req, Context& ctx);
/// POST /claim/{id}: the confirmation page's button; the paste page in plain text.
awaitable<Reply> HandleClaimForm(const Request& req, Context& ctx);

awaitable<Reply> HandleIndex(const Request& req, Context& ctx);
/// POST /settings/language (the footer's form: ui, back): sets the language cookie
/// (page_language.h) and sends the reader back to the page.
awaitable<Reply> HandleSetLanguage(const Request& req, Context& ctx);
awaitable<Reply> HandleHealthz(const Request& req, Context& ctx);
awaitable<Reply> HandleMetrics(const Request& req, Context& ctx);
awaitable<Reply> HandleLimits(const Request& req, Context& ctx);
awaitable<Reply> HandleStatusPage(const Request& req, Context& ctx);
/// GET /api/v1/status: the metrics and the abuse aggregates, which name nobody.
awaitable<Reply> HandleStatusApi(const Request& req, Context& ctx);
/// GET /status on the admin listener: the same, with the top client keys and prefixes in full.
awaitable<Reply> HandleAdminStatus(const Request& req, Context& ctx);
awaitable<Reply> HandleFaults(const Request& req, Context& ctx);
awaitable<Reply> HandleStatic(const Request& req, Context& ctx);
/// GET /.well-known/security.txt (RFC 9116): 404 until abuse_contact is set.
awaitable<Reply> HandleSecurityTxt(const Request& req, Context& ctx);
/// GET /robots.txt: the robots setting's policy.
awaitable<Reply> HandleRobotsTxt(const Request& req, Context& ctx);
/// GET /abuse: how to report a paste and send a notice, what is removed and how fast, and the
/// review queue's length.
awaitable<Reply> HandleAbusePage(const Request& req, Context& ctx);

/// GET /transparency: the transparency report, a page for browsers and JSON for programs
/// (?format=json, or an Accept without text/html), from ModerationService::Transparency.
awaitable<Reply> HandleTransparency(const Request& req, Context& ctx);
/// The JSON of GET /transparency (docs/openapi.yaml).
nlohmann::json TransparencyJson(const service::TransparencyReport& report);

// Moderation (admin_handlers.cc).
awaitable<Reply> HandleReportApi(const Request& req, Context& ctx);
awaitable<Reply> HandleReportForm(const Request& req, Context& ctx);
awaitable<Reply> HandleAdminReports(const Request& req, Context& ctx);
awaitable<Reply> HandleAdminPaste(const Request& req, Context& ctx);
awaitable<Reply> HandleAdminTakedown(const Request& req, Context& ctx);
awaitable<Reply> HandleAdminDismiss(const Request& req, Context& ctx);
awaitable<Reply> HandleAdminBlock(const Request& req, Context& ctx);
awaitable<Reply> HandleAdminAudit(const Request& req, Context& ctx);
/// POST /admin/notices (a notice: 201, 200 when its reference was stored, 422 when it names no
/// paste that could be withheld) and GET (the open notices, oldest first, each with its clock).
awaitable<Reply> HandleAdminNotices(const Request& req, Context& ctx);
/// GET (a page) and POST (a digest, or the text itself) /admin/blocked-contents.
awaitable<Reply> HandleAdminBlockedContents(const Request& req, Context& ctx);
/// DELETE /admin/blocked-contents/{sha256}: 204, or 404 not_blocked.
awaitable<Reply> HandleAdminUnblockContent(const Request& req, Context& ctx);
/// GET /admin/tokens: every creator token (never a secret); POST: a new one, whose secret the
/// answer holds once (docs/admission.md, "Creator tokens").
awaitable<Reply> HandleAdminTokens(const Request& req, Context& ctx);
/// DELETE /admin/tokens/{id}: revokes it; 204, or 404 not_found.
awaitable<Reply> HandleAdminRevokeToken(const Request& req, Context& ctx);
/// GET /admin/abuse: the top client keys (in full) and prefixes, the budget distribution.
awaitable<Reply> HandleAdminAbuse(const Request& req, Context& ctx);
/// GET /admin/read-only: whether the read-only window is open; PUT {"read_only": true|false}
/// opens or closes it (service::PasteService::SetReadOnly) and answers the same.
awaitable<Reply> HandleAdminReadOnly(const Request& req, Context& ctx);

/// The "abuse" object of /api/v1/status (docs/openapi.yaml): the budget distribution and the
/// saturation, the schema the status page draws.
nlohmann::json AbuseAggregatesJson(const service::AbuseAggregates& aggregates);
/// The "abuse" object of the admin listener's /status and /admin/abuse: the aggregates and
/// `top_keys`, `top_prefixes` in full.
nlohmann::json AbuseJson(const service::AbuseView& view);
/// The review page (review_handlers.cc, docs/moderation.md "The review page"): each checks its own
/// sign-in (a session cookie or a trusted forward-auth name) instead of the bearer token.
/// GET /admin/login: the form; POST: the admin token, answered with the session cookie.
awaitable<Reply> HandleReviewLogin(const Request& req, Context& ctx);
/// POST /admin/logout: clears the session cookie.
awaitable<Reply> HandleReviewLogout(const Request& req, Context& ctx);
/// GET /admin/review?limit=N&before=CURSOR: one page of the review queue with each entry's clock.
awaitable<Reply> HandleReviewQueue(const Request& req, Context& ctx);
/// GET /admin/review/{id}: the paste as plain text; POST: an action (takedown, dismiss, keep,
/// restore) with the form's CSRF token.
awaitable<Reply> HandleReviewPaste(const Request& req, Context& ctx);
/// True if `origin` ("https://paste.example") is this server's: its base_url, or the authority
/// the request was sent to (Host), whatever the scheme a TLS proxy in front may have stripped.
bool IsOwnOrigin(std::string_view origin, const Request& req, const Context& ctx);

/// The admin listener's gate, before any route: nothing (go on) for the right bearer token, else
/// the 401 to answer.
std::optional<Reply> CheckAdminToken(const HeaderFields& headers, const Context& ctx);

}  // namespace sluice::http
