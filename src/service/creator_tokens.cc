// CreatorTokens (include/sluice/service/creator_tokens.h): the in-memory copy of the tokens in
// force, its poll of the store's version, and the operator's changes.
#include "sluice/service/creator_tokens.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <cmath>
#include <cstring>

#include "sluice/asio/spawn.h"
#include "sluice/asio/timer.h"
#include "sluice/service/ids.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

namespace {

bool IsBase64Url(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

Error BadRequest(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), "invalid_token_request");
}

}  // namespace

size_t CreatorTokens::HashOfDigest::operator()(const store::TokenHash& h) const {
  // A SHA-256 is uniform already: its first bytes are as good a hash as any.
  size_t out = 0;
  std::memcpy(&out, h.data(), sizeof(out));
  return out;
}

CreatorTokens::CreatorTokens(store::MetaStore& meta, const Clock& clock, MetricsRegistry& metrics,
                             CreatorTokensOptions options)
    : meta_(meta),
      clock_(clock),
      metrics_(metrics),
      options_(std::move(options)),
      table_(Table{}),
      refresh_failures_(metrics.GetCounter(
          "sluice_creator_token_refresh_failures_total",
          "Polls of the creator tokens' version or reads of the tokens that failed; the tokens "
          "already read stay in force.")),
      refused_(metrics.GetCounter(
          "sluice_creator_token_refusals_total",
          "Creates refused 401 invalid_token: a bearer token malformed, unknown, revoked or "
          "expired.")),
      gauges_(metrics) {
  gauges_.Add("sluice_creator_tokens", "Creator tokens in force, as this process last read them.",
              {}, [this] { return static_cast<double>(size()); });
}

CreatorTokens::~CreatorTokens() { Stop(); }

bool CreatorTokens::IsSecretText(std::string_view secret) {
  if (secret.size() != kSecretLength || !secret.starts_with(kSecretPrefix)) return false;
  for (const char c : secret.substr(kSecretPrefix.size())) {
    if (!IsBase64Url(c)) return false;
  }
  return true;
}

std::optional<admission::PresentedToken> CreatorTokens::Find(std::string_view secret) const {
  // The shape first: a stranger's junk costs a comparison, never a hash, a lock or a store call.
  if (!IsSecretText(secret)) {
    refused_.Inc();
    return std::nullopt;
  }
  const store::TokenHash hash = HashDeleteToken(secret);
  const std::shared_ptr<const Table> table = table_.Load();
  auto it = table->by_secret.find(hash);
  // The table's key compare is not constant-time, but what it compares is a SHA-256 of the
  // guess: timing could at best tell how many leading bytes of a hash matched, which says
  // nothing of any secret.
  if (it == table->by_secret.end() ||
      (it->second.expires_at != 0 && it->second.expires_at <= clock_.UnixSeconds())) {
    refused_.Inc();
    return std::nullopt;
  }
  return admission::PresentedToken{it->second.id, it->second.label, it->second.budget};
}

void CreatorTokens::NoteCreate(std::string_view id) const {
  const std::shared_ptr<const Table> table = table_.Load();
  auto it = table->creates_by_id.find(std::string(id));
  if (it != table->creates_by_id.end()) it->second->Inc();
}

awaitable<Status> CreatorTokens::Refresh() {
  const auto options = options_.Load();
  auto versioning = meta_.CreatorTokensVersion(Deadline::After(clock_, options->budget));
  Result<int64_t> version = co_await std::move(versioning);
  if (!version.ok()) {
    refresh_failures_.Inc();
    co_return version.error();
  }
  if (*version == version_.load(std::memory_order_acquire)) co_return Ok();
  auto reading = meta_.CreatorTokens(Deadline::After(clock_, options->budget));
  Result<store::CreatorTokenList> list = co_await std::move(reading);
  if (!list.ok()) {
    refresh_failures_.Inc();
    co_return list.error();
  }
  Table table;
  const int64_t now = clock_.UnixSeconds();
  for (const store::CreatorToken& t : list->tokens) {
    if (!t.LiveAt(now)) continue;
    Entry e;
    e.id = t.id;
    e.label = t.label;
    e.budget.count = admission::TokenBucketPolicy{static_cast<double>(t.rate_milli) / 1000.0,
                                                  static_cast<double>(t.burst)};
    if (t.bytes_rate > 0) {
      e.budget.bytes = admission::TokenBucketPolicy{static_cast<double>(t.bytes_rate),
                                                    static_cast<double>(t.bytes_burst)};
    }
    e.expires_at = t.expires_at;
    // The label, never the secret nor its hash: the operator's name for it. Bounded by
    // max_creator_tokens (and the tokens revoked while this process runs).
    table.creates_by_id[t.id] = &metrics_.GetCounter(
        "sluice_creator_token_creates_total", "Creates stored with a creator token, by its label.",
        {{"token", t.label}});
    table.by_secret.emplace(t.secret_sha256, std::move(e));
  }
  const size_t n = table.by_secret.size();
  std::lock_guard lock(swap_mu_);
  if (list->version < version_.load(std::memory_order_acquire)) co_return Ok();
  table_.Store(std::move(table));
  size_.store(n, std::memory_order_relaxed);
  version_.store(list->version, std::memory_order_release);
  co_return Ok();
}

void CreatorTokens::Start(boost::asio::any_io_executor executor) {
  boost::asio::co_spawn(executor, PollLoop(), asio_glue::LogIfThrown("creator tokens: poll"));
}

awaitable<void> CreatorTokens::PollLoop() {
  asio_glue::Timer timer(clock_, co_await boost::asio::this_coro::executor);
  while (!stopping_.load()) {
    auto refreshing = Refresh();
    if (Status s = co_await std::move(refreshing); !s.ok()) {
      spdlog::warn("creator tokens not reread (those read stay in force): {}", s.error().message);
    }
    // In steps, so Stop ends the loop within one.
    const auto step = std::chrono::milliseconds(100);
    const auto refresh = options_.Load()->refresh;
    for (auto slept = std::chrono::milliseconds(0); slept < refresh && !stopping_.load();
         slept += step) {
      auto waiting = timer.WaitUntil(clock_.Now() + step);
      (void)co_await std::move(waiting);
    }
  }
}

awaitable<Result<MintedCreatorToken>> CreatorTokens::Create(CreatorTokenRequest request) {
  if (request.label.size() > kMaxLabelBytes || !admission::IsValidForwardedUser(request.label)) {
    co_return BadRequest(fmt::format(
        "a token's label is 1 to {} letters, digits or '.', '_', '@', '+', '-'", kMaxLabelBytes));
  }
  // Bounds that keep each number exact in every backend and sane in a bucket.
  constexpr double kMaxRate = 1e6;
  if (!(request.rate > 0) || request.rate > kMaxRate || !(request.burst >= 1) ||
      request.burst > kMaxRate) {
    co_return BadRequest("a token's rate must be above 0 and its burst at least 1 (at most 1e6)");
  }
  if (!(request.bytes_rate >= 0) || request.bytes_rate > 1e12) {
    co_return BadRequest("a token's bytes rate must be 0 (the per-address budget) up to 1e12");
  }
  if (request.expires_in < 0 || request.expires_in > int64_t{100} * 365 * 86400) {
    co_return BadRequest("a token's lifetime must be 0 (until revoked) up to 100 years");
  }
  const auto options = options_.Load();
  const int64_t now = clock_.UnixSeconds();
  MintedCreatorToken minted;
  minted.secret = MintCreatorTokenSecret();
  store::CreatorToken& t = minted.token;
  t.id = MintCreatorTokenId();
  t.label = std::move(request.label);
  t.secret_sha256 = HashDeleteToken(minted.secret);
  t.rate_milli = std::max<int64_t>(1, std::llround(request.rate * 1000.0));
  t.burst = std::llround(request.burst);
  t.bytes_rate = std::llround(request.bytes_rate);
  t.bytes_burst = t.bytes_rate * kBytesBurstSeconds;
  t.expires_at = request.expires_in == 0 ? 0 : now + request.expires_in;
  t.created_at = now;
  auto adding =
      meta_.AddCreatorToken(t, options->max_tokens, now, Deadline::After(clock_, options->budget));
  if (Status added = co_await std::move(adding); !added.ok()) co_return added.error();
  auto recording = Audit(
      "token_create", t.id,
      fmt::format("label={} rate={}/s burst={} bytes_rate={}/s expires_at={}", t.label,
                  static_cast<double>(t.rate_milli) / 1000.0, t.burst, t.bytes_rate, t.expires_at));
  co_await std::move(recording);
  // Seen here at once; other processes see it at their next poll.
  auto refreshing = Refresh();
  if (Status s = co_await std::move(refreshing); !s.ok()) {
    spdlog::warn("creator tokens not reread after a create: {}", s.error().message);
  }
  co_return minted;
}

awaitable<Result<std::vector<store::CreatorToken>>> CreatorTokens::List() {
  auto reading = meta_.CreatorTokens(Deadline::After(clock_, options_.Load()->budget));
  Result<store::CreatorTokenList> list = co_await std::move(reading);
  if (!list.ok()) co_return list.error();
  co_return std::move(list->tokens);
}

awaitable<void> CreatorTokens::Audit(std::string action, std::string target, std::string detail) {
  // As ModerationService's operator actions: a log line, and a row of the audit trail. Never the
  // secret: the id, the label and the numbers.
  spdlog::info("audit: action={} target={} detail={}", action, target, detail);
  auto adding = meta_.AddAudit(store::AuditEntry{clock_.UnixSeconds(), std::move(action),
                                                 std::move(target), std::move(detail)},
                               Deadline::After(clock_, options_.Load()->budget));
  if (Status added = co_await std::move(adding); !added.ok()) {
    spdlog::error("audit: row not stored: {}", added.error().message);
  }
}

awaitable<Result<bool>> CreatorTokens::Revoke(std::string id) {
  auto revoking = meta_.RevokeCreatorToken(id, clock_.UnixSeconds(),
                                           Deadline::After(clock_, options_.Load()->budget));
  Result<bool> revoked = co_await std::move(revoking);
  if (!revoked.ok()) co_return revoked.error();
  if (*revoked) {
    auto recording = Audit("token_revoke", id, "");
    co_await std::move(recording);
  }
  auto refreshing = Refresh();
  if (Status s = co_await std::move(refreshing); !s.ok()) {
    spdlog::warn("creator tokens not reread after a revocation: {}", s.error().message);
  }
  co_return *revoked;
}

}  // namespace sluice::service
