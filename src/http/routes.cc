#include "routes.h"

#include <algorithm>

#include "handlers.h"

namespace sluice::http {

namespace {

constexpr std::string_view kIdParam = "{id}";
constexpr std::string_view kRestParam = "{path...}";

// Literal characters must match exactly; {id} takes one segment (possibly empty), {path...} the
// rest. Nothing is decoded: "/raw/..%2Fx" is one segment, and an id with a slash matches nothing.
bool MatchPattern(std::string_view pattern, std::string_view path, std::string_view& id) {
  size_t p = 0, s = 0;
  for (;;) {
    const std::string_view rest = pattern.substr(p);
    if (rest.starts_with(kRestParam)) {
      id = path.substr(s);
      return true;
    }
    if (rest.starts_with(kIdParam)) {
      const size_t end = std::min(path.find('/', s), path.size());
      id = path.substr(s, end - s);
      p += kIdParam.size();
      s = end;
      continue;
    }
    if (p == pattern.size()) return s == path.size();
    if (s == path.size() || pattern[p] != path[s]) return false;
    ++p;
    ++s;
  }
}

}  // namespace

std::string Methods::Allow() const {
  constexpr std::pair<Method, std::string_view> kNames[] = {{Method::kGet, "GET"},
                                                            {Method::kHead, "HEAD"},
                                                            {Method::kPost, "POST"},
                                                            {Method::kPut, "PUT"},
                                                            {Method::kDelete, "DELETE"}};
  std::string out;
  for (const auto& [method, name] : kNames) {
    if (!Has(method)) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

RouteTable::RouteTable(std::vector<Route> routes) : routes_(std::move(routes)) {
  for (const Route& r : routes_) {
    if (std::find(labels_.begin(), labels_.end(), r.label) == labels_.end()) {
      labels_.push_back(r.label);
    }
  }
  labels_.push_back("other");
}

size_t RouteTable::LabelIndex(std::string_view label) const {
  return static_cast<size_t>(std::find(labels_.begin(), labels_.end(), label) - labels_.begin());
}

RouteMatch RouteTable::Match(Method method, std::string_view path) const {
  RouteMatch out;
  out.label_index = labels_.size() - 1;
  const Route* first = nullptr;
  for (const Route& r : routes_) {
    std::string_view id;
    if (first == nullptr) {
      if (!MatchPattern(r.pattern, path, id)) continue;
      first = &r;
      out.id = id;
      out.allowed = Methods{};
    } else if (r.pattern != first->pattern) {
      continue;
    }
    if (r.methods.Has(method)) {
      out.route = &r;
      out.allowed.reset();
      out.label = r.label;
      out.label_index = LabelIndex(r.label);
      return out;
    }
    *out.allowed |= r.methods;
  }
  if (first != nullptr) {
    out.label = first->label;
    out.label_index = LabelIndex(first->label);
  }
  return out;
}

std::vector<Route> DefaultRoutes(bool metrics) {
  using enum Method;
  const Methods read{kGet, kHead};
  // Order matters only where patterns overlap: "/{id}" comes after every one-segment literal.
  std::vector<Route> routes = {
      {"/", read, HandleIndex, "index"},
      {"/", {kPost}, HandleCreateForm, "create_form", RouteKind::kCreate},
      {"/api/v1/pastes", {kPost}, HandleCreateApi, "create_api", RouteKind::kCreate},
      {"/api/v1/pastes/{id}", {kDelete}, HandleDelete, "delete"},
      {"/api/v1/pastes/{id}", read, HandleReadApi, "read_api"},
      {"/api/v1/pastes/{id}/claim", {kPost}, HandleClaimApi, "claim_api"},
      {"/api/v1/pastes/{id}/report", {kPost}, HandleReportApi, "report_api"},
      // haste's protocol (hastebin clients, editor plugins): create and read a document.
      {"/documents", {kPost}, HandleCreateHaste, "create_haste", RouteKind::kCreate},
      {"/documents/{id}", read, HandleDocument, "document"},
      {"/raw/{id}", read, HandleRaw, "raw"},
      {"/delete/{id}", {kGet, kHead, kPost}, HandleDeleteForm, "delete_form"},
      {"/claim/{id}", {kPost}, HandleClaimForm, "claim_form"},
      {"/report/{id}", {kGet, kHead, kPost}, HandleReportForm, "report_form"},
      {"/healthz", read, HandleHealthz, "healthz"},
      {"/metrics", read, HandleMetrics, "metrics"},
      {"/api/v1/limits", read, HandleLimits, "limits"},
      {"/status", read, HandleStatusPage, "status"},
      {"/settings/language", {kPost}, HandleSetLanguage, "language"},
      {"/api/v1/status", read, HandleStatusApi, "status_api"},
      {"/static/{path...}", read, HandleStatic, "static"},
      {"/new", read, HandleNewFrom, "new"},
      // The public contact (public_contact.h): there whatever the settings say.
      {"/abuse", read, HandleAbusePage, "abuse"},
      {"/transparency", read, HandleTransparency, "transparency"},
      {"/robots.txt", read, HandleRobotsTxt, "robots"},
      {"/.well-known/security.txt", read, HandleSecurityTxt, "security_txt"},
      {"/{id}/diff", read, HandleDiff, "diff"},
      {"/{id}/rendered", read, HandleRendered, "rendered"},
      {"/{id}", read, HandleView, "view"},
  };
  // Off the public side, /metrics falls to "/{id}", whose malformed id is a 404 like any other.
  if (!metrics) std::erase_if(routes, [](const Route& r) { return r.pattern == "/metrics"; });
  return routes;
}

std::vector<Route> AdminRoutes() {
  using enum Method;
  const Methods read{kGet, kHead};
  constexpr RouteKind kPage = RouteKind::kOther;
  constexpr AdminGate kOwn = AdminGate::kOwnSignIn;
  // Labels are the admin side's own, so its answers never blur the public routes' metrics.
  return {
      {"/healthz", read, HandleHealthz, "admin_healthz"},
      {"/metrics", read, HandleMetrics, "admin_metrics"},
      {"/debug/faults", {kGet, kHead, kPut}, HandleFaults, "debug"},
      {"/admin/reports", read, HandleAdminReports, "admin_reports"},
      // The review page (docs/moderation.md, "The review page"): its own sign-in, and the site's
      // stylesheet, which is no secret.
      {"/admin/login", {kGet, kHead, kPost}, HandleReviewLogin, "admin_login", kPage, kOwn},
      {"/admin/logout", {kPost}, HandleReviewLogout, "admin_logout", kPage, kOwn},
      {"/admin/review", read, HandleReviewQueue, "admin_review", kPage, kOwn},
      {"/admin/review/{id}",
       {kGet, kHead, kPost},
       HandleReviewPaste,
       "admin_review_paste",
       kPage,
       kOwn},
      {"/static/{path...}", read, HandleStatic, "admin_static", kPage, kOwn},
      {"/admin/pastes/{id}", read, HandleAdminPaste, "admin_paste"},
      {"/admin/pastes/{id}/takedown", {kPost}, HandleAdminTakedown, "admin_takedown"},
      {"/admin/pastes/{id}/dismiss", {kPost}, HandleAdminDismiss, "admin_dismiss"},
      {"/admin/blocks", {kPost}, HandleAdminBlock, "admin_block"},
      {"/admin/blocked-contents",
       {kGet, kHead, kPost},
       HandleAdminBlockedContents,
       "admin_blocked_contents"},
      {"/admin/blocked-contents/{id}",
       {kDelete},
       HandleAdminUnblockContent,
       "admin_unblock_content"},
      {"/admin/audit", read, HandleAdminAudit, "admin_audit"},
      {"/admin/notices", {kGet, kHead, kPost}, HandleAdminNotices, "admin_notices"},
      {"/admin/tokens", {kGet, kHead, kPost}, HandleAdminTokens, "admin_tokens"},
      {"/admin/tokens/{id}", {kDelete}, HandleAdminRevokeToken, "admin_revoke_token"},
      {"/admin/read-only", {kGet, kHead, kPut}, HandleAdminReadOnly, "admin_read_only"},
      {"/admin/abuse", read, HandleAdminAbuse, "admin_abuse"},
      {"/status", read, HandleAdminStatus, "admin_status"},
  };
}

}  // namespace sluice::http
