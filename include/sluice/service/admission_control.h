// AdmissionControl: the limits and caps of docs/overload.md, asked in order before any expensive
// call. Creates: per-client count and byte buckets, global count and byte buckets (429), then the
// per-process in-flight caps on count and buffered bytes (503). Reads that miss the cache: the
// per-client origin GET limit (429), the read pool (503), and for metadata fills the fill cap with
// its per-client share (503). It knows client keys and sizes, not sockets.
//
// With a SharedState (Redis) the create buckets live there, so one client key has one budget across
// every process of the tier. The shared store is never a create dependency: when it does not answer
// within its budget, per-client buckets fail open and the global caps fall back to this process's
// local share of them (docs/overload.md, "Shared state").
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "sluice/admission/concurrency_limiter.h"
#include "sluice/admission/create_access.h"
#include "sluice/admission/jitter.h"
#include "sluice/admission/keyed_limiter.h"
#include "sluice/admission/keyed_slots.h"
#include "sluice/admission/network.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/common/swappable.h"
#include "sluice/store/shared_state.h"

namespace sluice::service {

struct AdmissionOptions {
  /// Creates per client key. Default: 1/s, burst 10.
  admission::TokenBucketPolicy ip_create_count{1, 10};
  /// Create bytes per client key. Default: 100 KB/s, burst 2 MB.
  admission::TokenBucketPolicy ip_create_bytes{100'000, 2'000'000};
  /// Creates across the process, or across the tier when the buckets are shared. Default: 350/s,
  /// burst 350.
  admission::TokenBucketPolicy global_create_count{350, 350};
  /// Create bytes across the process, or the tier when shared. Default: 10 MB/s, burst 10 MB.
  admission::TokenBucketPolicy global_create_bytes{10'000'000, 10'000'000};
  /// Share of the global create-count burst kept for creator tokens' creates: an anonymous create
  /// is refused (global_count) once taking it would leave fewer than this share of the burst, so
  /// a flood of anonymous creates cannot spend all of it. 0 to 0.9; this process's buckets only
  /// (with a SharedState the tier's budget is not split). Default: 0.
  double token_reserved_share = 0;
  /// App processes sharing the global caps. While the shared store does not answer, each enforces
  /// global / processes x local_share_slack on its own. Only used with a SharedState. Default: 1.
  int64_t processes = 1;
  /// Share of global_create_count kept for creates that carry a solved proof of work
  /// (docs/overload.md, "Proof of work"): the other creates draw on the rest, solvers only on this
  /// share, so a flood that spends the rest leaves solvers theirs. 0: nothing kept, and no create
  /// is a solver's. Default: 0 (proof_of_work off).
  double solver_share = 0;
  /// Head-room of that local share: balancers do not spread load perfectly. Default: 1.2.
  double local_share_slack = 1.2;
  /// Budget of one shared-store call; past it the call is a fail-open. Default: 5 ms.
  Duration shared_timeout = std::chrono::milliseconds(5);
  /// In-flight creates per process. Default: 50.
  int64_t create_slots = 50;
  /// Of which one client key may hold, so a few slow uploaders cannot hold them all. Default: 10.
  int64_t create_slots_per_client = 10;
  /// Of which the client keys of one network (`networks`: an IPv4 /24, an IPv6 /48) may hold
  /// together, so that one /48 of 65,536 client keys cannot take the slots one /64 cannot.
  /// Default: 20 (two client keys' shares; at most 40% of the default slots).
  int64_t create_slots_per_network = 20;
  /// What makes a network of a client key for `create_slots_per_network`
  /// (include/sluice/admission/network.h). Default: IPv4 /24, IPv6 /48.
  admission::NetworkPrefixes networks{};
  /// Bytes of create bodies buffered per process. Default: 32 MiB.
  int64_t create_slot_bytes = int64_t{32} << 20;
  /// AIMD on PUT latency instead of the fixed create_slots (which becomes its ceiling).
  /// Default: false.
  bool adaptive_create_cap = false;
  /// The PUT latency the adaptive cap aims under. Default: 500 ms.
  Duration adaptive_target = std::chrono::milliseconds(500);
  /// In-flight origin reads per process. Default: 200.
  int64_t read_slots = 200;
  /// Origin GETs (cache misses) per client key. Default: 50/s, burst 50.
  admission::TokenBucketPolicy ip_read{50, 50};
  /// Concurrent metadata fills per process. Default: 50.
  int64_t fill_cap = 50;
  /// Of which one client key may hold. Default: 3.
  int64_t fill_cap_per_client = 3;
  /// Retry-After of a 503 from a cap, uniform in [min, max] seconds. Default: 5..15.
  int retry_after_min = 5;
  int retry_after_max = 15;
  /// Client keys remembered by each keyed limiter. Default: 100,000.
  /// Abuse reports per client key: their own bucket, so reporting never spends a create's budget
  /// and a flood of reports is refused with 429 like creates. Per process, never shared.
  /// Default: one every 10 s, 5 at once.
  admission::TokenBucketPolicy ip_report{0.1, 5};
  /// Deletes per client key: their own bucket, loose, so that a script cannot turn the delete
  /// path (a row lookup and a tombstone commit each) into load on the primary. Per process.
  /// Default: 1/s, 60 at once.
  admission::TokenBucketPolicy ip_delete{1, 60};
  size_t max_client_keys = 100'000;
};

/// A client's budgets, read without spending (GET /api/v1/limits).
struct ClientBudgets {
  struct Bucket {
    std::string name;
    admission::TokenBucketPolicy policy;
    double available = 0;
  };
  /// Where the buckets' numbers come from: this process's own buckets (no shared store), the
  /// shared store that decides for the tier, or this process's while the shared store is silent
  /// (its per-client limits are open then, and the global caps run on this process's share).
  enum class Source {
    kThisProcess,
    kSharedStore,
    kThisProcessSharedStoreSilent,
    /// The process's budget of peeks at the shared store is spent (AdmissionControl::kPeeks).
    kThisProcessPeeksSpent,
  };
  Source source = Source::kThisProcess;
  std::vector<Bucket> buckets;
  admission::SlotGauges create_slots;
  admission::SlotGauges read_slots;
  admission::SlotGauges fill_slots;
};

/// An admitted create: its slot of the create cap and its unit of the client's share of it, both
/// given back when it is destroyed.
struct CreateAdmission {
  admission::Permit slot;
  admission::KeyedSlots::Slot client_share;
  /// Its unit of the client's network's share (create_slots_per_network).
  admission::KeyedSlots::Slot network_share;
  /// Which buckets its tokens came from, for AdmissionControl::RefundCreate.
  enum class Tokens { kLocal, kShared, kLocalShare } tokens = Tokens::kLocal;
  uint64_t declared_bytes = 0;
  /// A creator token's own budget, when its buckets were the token's rather than the address's.
  std::optional<admission::TokenBudget> own{};
  /// Its count token came from the solvers' share (AdmissionOptions::solver_share).
  bool solver = false;
};

class AdmissionControl;

/// One create slot kept for the create that cut a slow body to free it (docs/overload.md,
/// "Pressure"): while it is held, every other create sees the cap one slot lower, so the slot the
/// cut frees is not taken by whoever asks first (the cut client reconnecting, say). A promise of a
/// network's share (AdmissionControl::PromiseNetworkSlot) keeps a unit of that share the same way
/// from the network's other creates. The create it is for passes it to AdmitCreate, which spends
/// it; given back on destruction if unspent. Move-only. Precondition: the AdmissionControl
/// outlives it.
class CreateSlotPromise {
 public:
  CreateSlotPromise(CreateSlotPromise&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)), network_(std::move(other.network_)) {}
  CreateSlotPromise& operator=(CreateSlotPromise&&) = delete;
  CreateSlotPromise(const CreateSlotPromise&) = delete;
  ~CreateSlotPromise() { Release(); }
  /// True until spent or given back.
  bool held() const { return owner_ != nullptr; }
  void Release();

 private:
  friend class AdmissionControl;
  /// `network` empty: a slot of the create cap; else a unit of that network's share.
  CreateSlotPromise(AdmissionControl* owner, std::string network);
  AdmissionControl* owner_;
  std::string network_;
};

/// Thread-safe.
class AdmissionControl {
 public:
  /// `shared`, when given, holds the create buckets and must outlive this object.
  AdmissionControl(AdmissionOptions options, const Clock& clock, MetricsRegistry& metrics,
                   store::SharedState* shared = nullptr);

  /// Step 2 and 3 of a create, from the client key and the declared length alone. A refused
  /// create spends nothing: tokens taken before a later refusal are given back. Without a
  /// SharedState it completes without suspending; with one it waits at most `shared_timeout`.
  /// Then the create cap and the client's and its network's shares of it (Unavailable, reason
  /// create_slots, create_bytes, create_slots_per_client or create_slots_per_network).
  /// With a `promise` (PromiseCreateSlot) the create slot is the promised one, and spends it.
  /// With `own` (a creator token's budget) the per-client buckets of `client_key` are kept at the
  /// token's rates instead of ip_create_count and ip_create_bytes (reasons token_create_count,
  /// token_create_bytes), in the shared store when there is one; the global caps and the slots
  /// are the same as everyone's.
  /// A `solver` (a create whose proof of work was redeemed) takes its count token from the
  /// solvers' share instead of the others' (refused as solver_count); with no share kept it is
  /// judged as any other create.
  /// With `count_full_cap` false, a refusal of a full cap (create_slots or
  /// create_slots_per_network) is returned uncounted: the caller may free a slot and ask once
  /// more, and counts only the refusal that stands (CountRefusal), so the counter is one per
  /// create answered 503, as the clients see it.
  boost::asio::awaitable<Result<CreateAdmission>> AdmitCreate(
      std::string client_key, uint64_t declared_bytes, CreateSlotPromise* promise = nullptr,
      std::optional<admission::TokenBudget> own = std::nullopt, bool solver = false,
      bool count_full_cap = true);
  /// Counts `refusal` in sluice_admission_rejections_total under its reason.
  void CountRefusal(const Error& refusal);
  /// A refusal of AdmitCreate's that a freed slot may still turn into an admission.
  static bool AtFullCap(const Error& refusal) {
    return refusal.reason == "create_slots" || refusal.reason == "create_slots_per_network";
  }

  /// What is left of the solvers' share, 0 (spent) to 1 (full); 1 when none is kept. What the
  /// proof of work's difficulty follows (PowDifficulty).
  double SolverShareLeft() const;

  /// Gives back the tokens of an admitted create that a later check refused before it cost
  /// anything (a storage quota the reservation found full): the client did nothing wrong, and a
  /// flood of such refusals must not spend the global caps. The slot goes back with `admitted`.
  boost::asio::awaitable<void> RefundCreate(const CreateAdmission& admitted,
                                            std::string_view client_key);

  /// A create slot kept from now on for one create (CreateSlotPromise).
  CreateSlotPromise PromiseCreateSlot() { return CreateSlotPromise(this, std::string()); }
  /// A unit of `client_key`'s network's share (create_slots_per_network) kept from now on for one
  /// create of that network (CreateSlotPromise).
  CreateSlotPromise PromiseNetworkSlot(std::string_view client_key) {
    return CreateSlotPromise(this, admission::ClientNetwork(client_key, options_.Load()->networks));
  }

  /// True while the last shared-store call failed and the create limits run on local shares.
  bool FailingOpen() const { return failing_open_.load(std::memory_order_relaxed); }

  /// With a SharedState: the seconds of silence the local shares of the global caps stood in for,
  /// each counted once (sluice_limiter_silent_seconds_total). Over any interval the local share
  /// admits at most its rate times what this grew, plus a token.
  double SilentSeconds() const {
    return std::chrono::duration<double>(Duration(silent_ns_.load(std::memory_order_relaxed)))
        .count();
  }

  /// An origin read (a cache miss): the per-client GET limit (shared, when there is a
  /// SharedState, and open while it is silent), then a read slot.
  boost::asio::awaitable<Result<admission::Permit>> AdmitOriginRead(std::string client_key);

  /// A page of `page_bytes` about to be answered to `client_key`: past the first kPageBytesPerRead,
  /// every kPageBytesPerRead more spends one more origin read of the client's per-client GET limit
  /// (at most its burst), cached or not, so a client that loops on large views is limited by the
  /// bytes it makes the server send, not only by its cache misses. ResourceExhausted (reason
  /// page_bytes_ip) when the bucket lacks them; open while the SharedState is silent. A page
  /// smaller than kPageBytesPerRead decides nothing and takes no lock.
  static constexpr size_t kPageBytesPerRead = size_t{64} << 10;
  boost::asio::awaitable<Status> AdmitPageBytes(std::string client_key, size_t page_bytes);

  /// A metadata fill: a slot of the fill cap within the client's share of it.
  struct FillTicket {
    admission::Permit slot;
    admission::KeyedSlots::Slot client_share;
  };
  Result<FillTicket> AdmitFill(std::string_view client_key);

  /// This process's buckets for `client_key`, spending nothing.
  ClientBudgets Budgets(std::string_view client_key) const;
  /// The budgets that decide for `client_key`: with a SharedState, its buckets, read without
  /// spending (waiting at most `shared_timeout`); this process's when it is silent.
  boost::asio::awaitable<ClientBudgets> DecidingBudgets(std::string client_key);

  /// One abuse report of `client_key`: ResourceExhausted (reason report_rate, with Retry-After and
  /// the limit) when its report bucket is empty.
  Status AdmitReport(std::string_view client_key);

  /// One delete of `client_key`: ResourceExhausted (reason delete_rate, with Retry-After and the
  /// limit) when its delete bucket is empty.
  Status AdmitDelete(std::string_view client_key);

  /// The client keys this process has seen create in the last minute, by the share of their
  /// create-count budget they used (admission::KeyedLimiter::UseHistogram): one count per bound,
  /// then one for above them all. No key leaves this object.
  std::vector<uint64_t> CreateBudgetUse(const std::vector<double>& upper_bounds) const;

  /// Create slots in flight over the create cap now, 0 to 1 (docs/overload.md, "Abuse or
  /// growth").
  double CreateSlotSaturation() const;
  /// The create slots in use and their cap now (the adaptive cap's current limit).
  admission::SlotGauges CreateSlotGauges() const { return create_slots_->Gauges(); }

  /// A Retry-After for 503s, uniform in the configured band, so shed clients do not return as a
  /// wave.
  int JitteredRetryAfterSeconds() { return retry_after_.NextSeconds(); }

  /// The options now (a reload replaces them); hold the pointer for the length of one decision.
  std::shared_ptr<const AdmissionOptions> options() const { return options_.Load(); }

  /// New limits for requests from now on (docs/operations.md, "Reload"); nothing in flight is
  /// dropped. Each bucket keeps its tokens (capped at its new burst); a cap lowered below what is
  /// in flight lets those finish and admits nothing new until under it. `adaptive_create_cap` and
  /// `max_client_keys` stay as built: they choose what the limiters are, not their numbers.
  void Reconfigure(AdmissionOptions next);

 private:
  Error Refuse(ErrorCode code, const char* reason, std::string message);
  /// Refuse's error, not counted.
  Error Refusal(ErrorCode code, const char* reason, std::string message);
  Error RateLimited(const char* reason, const admission::TokenBucketPolicy& policy,
                    const admission::TakeDecision& decision, double available);
  void NotePeak(std::atomic<int64_t>& peak, const admission::SlotLimiter& limiter);
  Result<CreateAdmission> AdmitCreateLocal(std::string_view client_key, uint64_t declared_bytes,
                                           CreateSlotPromise* promise,
                                           const std::optional<admission::TokenBudget>& own,
                                           bool solver, bool count_full_cap);
  /// For an anonymous create: the refusal when taking it would leave less of the global count
  /// bucket than token_reserved_share of its burst; nothing otherwise.
  std::optional<Error> RefuseFromTokensReserve();
  /// A creator token's buckets on this process: a pair per budget key, at the token's rates.
  struct OwnBuckets {
    OwnBuckets(const admission::TokenBudget& budget,
               const admission::TokenBucketPolicy& address_bytes, const Clock& clock)
        : count(budget.count, clock), bytes(budget.bytes.value_or(address_bytes), clock) {}
    admission::TokenBucket count;
    admission::TokenBucket bytes;
  };
  /// The byte policy of a token budget: its own, else the per-address one.
  admission::TokenBucketPolicy OwnBytesPolicy(const admission::TokenBudget& own) const {
    return own.bytes.value_or(options_.Load()->ip_create_bytes);
  }
  std::shared_ptr<OwnBuckets> OwnBucketsOf(std::string_view client_key,
                                           const admission::TokenBudget& own);
  /// The global buckets only, then the slots: the fail-open path when the shared store is silent.
  Result<CreateAdmission> AdmitCreateOnLocalShare(std::string_view client_key,
                                                  uint64_t declared_bytes,
                                                  CreateSlotPromise* promise, bool solver,
                                                  bool count_full_cap);
  /// The policy of the global count bucket a create draws on, across the tier.
  static admission::TokenBucketPolicy CountPolicy(const AdmissionOptions& o, bool solver);
  /// The global count bucket a create draws on: the solvers' share or the others'.
  admission::TokenBucket& CountBucket(bool solver) {
    return solver ? solver_count_ : global_count_;
  }
  /// Takes the client's share and a create slot after the rate limits passed; Unavailable (and
  /// the tokens owed back) if either is full.
  Result<CreateAdmission> TakeCreateSlot(std::string_view client_key, uint64_t declared_bytes,
                                         CreateSlotPromise* promise, bool count_full_cap);
  Result<admission::Permit> TakeReadSlot();
  std::vector<store::BucketTake> SharedCreateTakes(
      std::string_view client_key, uint64_t declared_bytes,
      const std::optional<admission::TokenBudget>& own = std::nullopt, bool solver = false) const;
  store::BucketTake SharedReadTake(std::string_view client_key) const;
  /// What the shared store said of a take: all taken, refused (with the 429 to answer; `reasons`
  /// names each bucket of `takes`), or nothing in time (fail open).
  struct SharedVerdict {
    enum Kind { kAllowed, kRefused, kSilent } kind;
    std::optional<Error> refusal;
  };
  boost::asio::awaitable<SharedVerdict> AskShared(std::vector<store::BucketTake> takes,
                                                  const char* const* reasons);
  /// Gives back a take whose request a later check refused.
  boost::asio::awaitable<void> RefundShared(std::vector<store::BucketTake> takes);
  /// Gives back what a create admitted on this process's buckets (`taken` kLocal or kLocalShare)
  /// took from them.
  void RefundLocalTokens(CreateAdmission::Tokens taken, std::string_view client_key,
                         uint64_t declared_bytes,
                         const std::optional<admission::TokenBudget>& own = std::nullopt,
                         bool solver = false);
  void NoteSharedAnswer();
  void NoteSharedSilence(const Error& why);
  /// The shared store decided a create of this process: its local shares have nothing to stand in
  /// for, so they are drained, and refill from now.
  void NoteCreateAnswered();
  /// A create decision the shared store missed: counts the silence it stands in for.
  void NoteCreateSilent();

  Swappable<AdmissionOptions> options_;
  const Clock& clock_;
  MetricsRegistry& metrics_;
  store::SharedState* const shared_;
  admission::KeyedLimiter ip_create_;
  admission::KeyedLimiter ip_read_;
  admission::KeyedLimiter ip_report_;
  admission::KeyedLimiter ip_delete_;
  // Creator tokens' buckets, by budget key. Only tokens found in force make an entry, so it holds
  // at most the live tokens and those revoked while this process ran; refilled entries are
  // forgotten past kMaxOwnBuckets.
  static constexpr size_t kMaxOwnBuckets = 10'000;
  std::mutex own_mu_;
  std::unordered_map<std::string, std::shared_ptr<OwnBuckets>> own_buckets_;  // own_mu_
  /// The others' part of global_create_count (all of it with no solver share), and the solvers'.
  admission::TokenBucket global_count_;
  admission::TokenBucket solver_count_;
  admission::TokenBucket global_bytes_;
  // GET /api/v1/limits costs no budget of the client's, but a peek is a call to the shared store:
  // a flood of them must not become Redis's load, nor slow the takes until they fail open. Status
  // reads are for people and scripts; 50 a second per process is ample for them.
  static constexpr admission::TokenBucketPolicy kPeeks{50, 50};
  admission::TokenBucket peeks_;
  std::unique_ptr<admission::SlotLimiter> create_slots_;
  admission::ConcurrencyLimiter read_slots_;
  admission::ConcurrencyLimiter fill_slots_;
  admission::KeyedSlots fill_per_client_;
  admission::KeyedSlots create_per_client_;
  admission::KeyedSlots create_per_network_;
  admission::JitteredRetryAfter retry_after_;
  std::atomic<int64_t> create_peak_{0};
  friend class CreateSlotPromise;
  // Create slots promised (CreateSlotPromise) and not yet spent or given back.
  std::atomic<int64_t> promised_slots_{0};
  // Units of networks' shares promised, by network; a network with none is forgotten.
  mutable std::mutex promised_networks_mu_;
  std::unordered_map<std::string, int64_t> promised_networks_;  // guarded by promised_networks_mu_
  int64_t PromisedToNetwork(const std::string& network) const;
  std::atomic<int64_t> read_peak_{0};
  std::atomic<int64_t> fill_peak_{0};
  std::atomic<bool> failing_open_{false};
  std::atomic<int64_t> last_fail_open_log_ns_{0};
  // Clock nanoseconds: of the last create the shared store decided, and the silence counted.
  std::atomic<int64_t> last_create_answer_ns_{0};
  std::mutex silent_mu_;
  int64_t silent_counted_to_ns_ = 0;  // guarded by silent_mu_
  std::atomic<int64_t> silent_ns_{0};
  Counter* shared_allowed_ = nullptr;
  Counter* shared_refused_ = nullptr;
  Counter* shared_fail_open_ = nullptr;
  GaugeCallbacks gauges_;  // last: its callbacks read the members above
};

}  // namespace sluice::service
