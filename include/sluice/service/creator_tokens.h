// CreatorTokens: the creator tokens in force, held in memory so that a create presenting one costs
// a SHA-256 and a hash lookup and no store round trip (docs/admission.md, "Creator tokens"). The
// MetaStore holds the tokens; every process polls their version (one row) every `refresh` and
// reads them again only when it changed, so a revocation reaches every process of a fleet within
// `refresh` plus one store call. It knows the store through its interface; nothing of HTTP.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/admission/create_access.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/common/swappable.h"
#include "sluice/store/meta_store.h"

namespace sluice::service {

struct CreatorTokensOptions {
  /// Live tokens (neither revoked nor expired) across every process sharing the store
  /// (max_creator_tokens): each process holds them all in memory. Default: 1,000.
  int64_t max_tokens = 1000;
  /// How often each process asks the store whether the tokens changed
  /// (creator_tokens_refresh): the longest a token made or revoked through another process takes
  /// to count here, plus one store call. Default: 5 s.
  std::chrono::milliseconds refresh{5000};
  /// Budget of one store call (a poll, a read, an operator's change). Default: 2 s.
  Duration budget = std::chrono::seconds(2);
};

/// What an operator asks for (`sluice admin token create`).
struct CreatorTokenRequest {
  /// 1 to 64 of the characters a forward-auth name may hold (admission::IsValidForwardedUser).
  std::string label;
  /// Creates a second and at once: > 0.
  double rate = 0;
  double burst = 0;
  /// Create bytes a second (the burst is kBytesBurstSeconds of it); 0: the per-address budget.
  double bytes_rate = 0;
  /// Lifetime in seconds; 0: until revoked.
  int64_t expires_in = 0;
};

/// A new token and its secret, which is shown once and kept nowhere.
struct MintedCreatorToken {
  store::CreatorToken token;
  std::string secret;
};

/// Thread-safe. The store and the metrics registry must outlive it.
class CreatorTokens {
 public:
  /// "slt_" then 43 base64url characters: 32 bytes from the kernel's CSPRNG.
  static constexpr std::string_view kSecretPrefix = "slt_";
  static constexpr size_t kSecretLength = 4 + 43;
  /// Longest label.
  static constexpr size_t kMaxLabelBytes = 64;
  /// A token's byte burst is this many seconds of its byte rate (the per-address default's
  /// ratio: 2 MB at 100 KB/s).
  static constexpr int64_t kBytesBurstSeconds = 20;

  CreatorTokens(store::MetaStore& meta, const Clock& clock, MetricsRegistry& metrics,
                CreatorTokensOptions options);
  ~CreatorTokens();

  /// Whether `secret` has the shape of a secret this server mints: the cheap check before any
  /// hash, so junk costs a length and a prefix comparison. Pure.
  static bool IsSecretText(std::string_view secret);

  /// The token whose secret is `secret`, if it is in force now; nullopt for anything else
  /// (malformed, unknown, revoked, expired). Never asks the store: one SHA-256 and one lookup.
  std::optional<admission::PresentedToken> Find(std::string_view secret) const;
  /// Counts one create made with token `id` (sluice_creator_token_creates_total{token=LABEL}).
  void NoteCreate(std::string_view id) const;

  /// Reads the tokens again if their version changed since the last read. Until a first read
  /// succeeds, no token is known (a create presenting one is refused 401, never let through as
  /// anonymous).
  boost::asio::awaitable<Status> Refresh();
  /// Polls every `refresh` until Stop.
  void Start(boost::asio::any_io_executor executor);
  void Stop() { stopping_.store(true); }

  /// The operator's changes, through the store (so every process sees them), then read back
  /// here at once. InvalidArgument for a bad request; InsufficientStorage (kCreatorTokensFull).
  boost::asio::awaitable<Result<MintedCreatorToken>> Create(CreatorTokenRequest request);
  /// Every token, revoked and expired ones included; never a secret (only hashes are kept).
  boost::asio::awaitable<Result<std::vector<store::CreatorToken>>> List();
  /// True if it was in force; NotFound for an unknown id.
  boost::asio::awaitable<Result<bool>> Revoke(std::string id);

  /// Tokens held now (live at the last read).
  size_t size() const { return size_.load(std::memory_order_relaxed); }
  /// The store's version this copy was read at; -1 before the first read.
  int64_t version() const { return version_.load(std::memory_order_acquire); }

  void SetOptionsForReload(CreatorTokensOptions options) { options_.Store(std::move(options)); }

 private:
  struct Entry {
    std::string id;
    std::string label;
    admission::TokenBudget budget;
    int64_t expires_at = 0;
  };
  struct HashOfDigest {
    size_t operator()(const store::TokenHash& h) const;
  };
  struct Table {
    std::unordered_map<store::TokenHash, Entry, HashOfDigest> by_secret;
    std::unordered_map<std::string, Counter*> creates_by_id;
  };

  boost::asio::awaitable<void> PollLoop();
  /// An operator's change: an "audit:" log line and a row of the audit trail (as
  /// ModerationService records its actions).
  boost::asio::awaitable<void> Audit(std::string action, std::string target, std::string detail);

  store::MetaStore& meta_;
  const Clock& clock_;
  MetricsRegistry& metrics_;
  Swappable<CreatorTokensOptions> options_;
  Swappable<Table> table_;
  std::atomic<size_t> size_{0};
  std::atomic<int64_t> version_{-1};
  std::atomic<bool> stopping_{false};
  // Orders the swaps of concurrent reads (the poll and an operator's change), so an older read
  // never replaces a newer one.
  std::mutex swap_mu_;
  Counter& refresh_failures_;
  Counter& refused_;
  GaugeCallbacks gauges_;  // last: its callbacks read the members above
};

}  // namespace sluice::service
