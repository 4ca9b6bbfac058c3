// ModerationService: abuse reports, the withholding of a reported paste, and the operator's review
// (takedown, dismissal, blocks), each operator action written to the audit trail (README.md,
// "Moderation"). It knows the stores through their interfaces; nothing of HTTP.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/client_key.h"
#include "sluice/common/clock.h"
#include "sluice/common/result.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/paste_cache.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"
#include "sluice/store/shared_state.h"

namespace sluice::service {

class PasteService;

/// The blocks in force, held in memory so a create asks no store. Thread-safe.
class Blocklist {
 public:
  /// The block that covers `client_key` at `now`: the same key, or a CIDR block containing its
  /// address (an IPv6 key "2001:db8:1:2::/64" by its /64).
  std::optional<store::ClientBlock> Find(std::string_view client_key, int64_t now) const;
  void Replace(std::vector<store::ClientBlock> blocks);
  void Add(store::ClientBlock block);
  /// InvalidArgument unless `prefix` is an address or a CIDR block.
  static Status Check(std::string_view prefix);

 private:
  struct Entry {
    store::ClientBlock block;
    admission::TrustedProxies range;
  };
  static std::optional<Entry> Make(store::ClientBlock block);
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::atomic<size_t> size_{0};  // lets a create skip the lock when nobody is blocked
};

struct ModerationOptions {
  /// Distinct client keys whose open reports withhold a paste until review; 0: never withheld
  /// automatically. Default: 3.
  int64_t hide_threshold = 3;
  /// Longest note of a report, in bytes. Default: 1000.
  size_t max_note_bytes = 1000;
  /// Budget of one moderation call (a report, an operator action). Default: 2 s.
  Duration budget = std::chrono::seconds(2);
  /// How often the blocks are read again from the store, so a block made through another process
  /// reaches this one. Default: 10 s.
  std::chrono::milliseconds blocks_refresh{10'000};
  /// Longest a withheld row stays in the shared metadata cache. Default: 60 s.
  std::chrono::seconds shared_meta_ttl{60};
};

struct ReportReceipt {
  /// False when this client had reported the paste already: nothing more was counted.
  bool counted = false;
  /// True when the paste is withheld pending review (by this report or earlier).
  bool withheld = false;
};

/// A paste as the operator reviews it: its row (moderation state included) and its text, when
/// the body is still there.
struct PasteReview {
  store::PasteMeta meta;
  std::optional<std::string> text;
};

class ModerationService {
 public:
  /// Everything passed must outlive the service; `shared` may be null (no shared cache).
  /// `storage` (may be null) is told of the bytes a takedown frees, so the storage quota sees
  /// them go at once rather than at its next refresh.
  ModerationService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
                    AdmissionControl& admission, Blocklist& blocks, const Clock& clock,
                    ModerationOptions options, store::SharedState* shared = nullptr,
                    PasteService* storage = nullptr);

  /// The reasons a report may give.
  static const std::vector<std::string_view>& Reasons();

  /// One client's report: InvalidArgument (bad_reason, note_too_long), NotFound (no live paste),
  /// ResourceExhausted (report_rate), Unavailable (the store). Withholds the paste when it reaches
  /// hide_threshold distinct clients.
  boost::asio::awaitable<Result<ReportReceipt>> Report(std::string client_key,
                                                       std::string_view id_text, std::string reason,
                                                       std::string note);

  // The operator's side. Each action logs an audit line and appends an audit row.
  boost::asio::awaitable<Result<std::vector<store::ReportSummary>>> OpenReports(size_t limit);
  boost::asio::awaitable<Result<PasteReview>> Show(std::string_view id_text);
  /// 451 from then on, the body deleted through the outbox (as a delete), the edge purged.
  boost::asio::awaitable<Status> Takedown(std::string_view id_text, std::string reason);
  /// Closes the paste's reports and serves it again; InvalidArgument for a taken-down paste.
  boost::asio::awaitable<Status> Dismiss(std::string_view id_text, std::string note);
  boost::asio::awaitable<Result<store::ClientBlock>> Block(std::string prefix,
                                                           std::chrono::seconds duration,
                                                           std::string reason);
  boost::asio::awaitable<Result<std::vector<store::AuditEntry>>> Audit(size_t limit);

  /// Reads the blocks in force from the store into the block list.
  boost::asio::awaitable<Status> LoadBlocks();

  /// Pastes with open reports, as last counted (up to kPendingCountLimit): after every report,
  /// takedown and dismissal here, and every blocks_refresh for those made through other
  /// processes. 0 until first counted.
  int64_t PendingReports() const { return pending_.load(std::memory_order_relaxed); }
  /// Counts them again from the store; a failure keeps the last count.
  boost::asio::awaitable<void> RefreshPending();
  static constexpr size_t kPendingCountLimit = 1000;
  /// Reloads the blocks every blocks_refresh until Stop().
  void Start(boost::asio::any_io_executor executor);
  void Stop() { stopping_ = true; }
  /// A new hide_threshold for reports from now on (README.md, "Reload"): a paste already withheld
  /// stays so, and one whose open reports already reach a lowered threshold is withheld at its
  /// next report.
  void SetHideThreshold(int64_t threshold) {
    hide_threshold_.store(threshold, std::memory_order_relaxed);
  }

 private:
  boost::asio::awaitable<Result<store::PasteMeta>> Find(std::string_view id_text,
                                                        admission::Deadline deadline);
  /// Sets the state and makes every cache let go of the old row, as a delete does.
  boost::asio::awaitable<Status> Moderate(store::PasteMeta meta, store::Moderation state,
                                          std::string reason, admission::Deadline deadline);
  boost::asio::awaitable<void> Record(std::string action, std::string target, std::string detail,
                                      admission::Deadline deadline);
  boost::asio::awaitable<void> RefreshLoop();
  Error WithRetryAfter(Error e);

  store::MetaStore& meta_;
  store::BlobStore& blobs_;
  PasteCache& cache_;
  AdmissionControl& admission_;
  Blocklist& blocks_;
  const Clock& clock_;
  const ModerationOptions options_;
  store::SharedState* const shared_;
  PasteService* const storage_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> pending_{0};
  std::atomic<int64_t> hide_threshold_;  // options_.hide_threshold, then each reload's
};

}  // namespace sluice::service
