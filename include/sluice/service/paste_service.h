// PasteService: the create, read and delete use-cases and the order of their checks. It knows the
// stores through their interfaces and time through a Clock; it knows nothing of sockets or HTTP.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sluice/admission/create_access.h"
#include "sluice/admission/network.h"
#include "sluice/admission/singleflight.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/common/swappable.h"
#include "sluice/service/abuse_watch.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/content_blocklist.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_cache.h"
#include "sluice/service/proof_of_work.h"
#include "sluice/service/reputation_feeds.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"
#include "sluice/store/shared_state.h"

namespace sluice::service {

struct ServiceOptions {
  /// Largest body accepted, in bytes. Default: 1,000,000.
  uint64_t max_paste_bytes = 1'000'000;
  /// Expiry when the creator names none; must be on the allow-list. Default: 1w.
  std::chrono::seconds default_ttl{7 * 86400};
  /// Longest expiry the operator allows; allow-list entries above it are refused. Default: 30d.
  std::chrono::seconds max_ttl{30 * 86400};
  /// Whole budget of one create (PUT then insert). Default: 2 s.
  Duration create_budget = std::chrono::seconds(2);
  /// Timeout of the body PUT inside the create budget. Default: 1 s.
  Duration put_timeout = std::chrono::seconds(1);
  /// Timeout of the row insert. Default: 50 ms. (The embedded SQLite group commit needs more under
  /// a burst; the server configures it.)
  Duration insert_timeout = std::chrono::milliseconds(50);
  /// Whole budget of one origin read. Default: 300 ms.
  Duration read_budget = std::chrono::milliseconds(300);
  /// Whole budget of one delete (row lookup and tombstone commit). Default: 1 s.
  Duration delete_budget = std::chrono::seconds(1);
  /// Budget of one call to the shared metadata cache; a slower answer is a miss. Default: 5 ms.
  Duration cache_timeout = std::chrono::milliseconds(5);
  /// Longest a row stays in the shared metadata cache. Bounds how long a delete whose
  /// invalidation was lost (the cache was unreachable then) can be served. Default: 60 s.
  std::chrono::seconds shared_meta_ttl{60};
  /// Record each body's SHA-256 at create and check every body fetched from the blob store against
  /// its row (size and checksum) before it is served or cached. Off only to measure what the
  /// checks cost (bench/run_body_checks_bench.sh): then a short, empty or altered body is served
  /// as the paste. Default: true.
  bool verify_bodies = true;
  /// Storage quota: the live bytes (store::MetaStore::LiveBytes) a create may not take past, in
  /// bytes; 0: none. Default: 0.
  uint64_t max_storage_bytes = 0;
  /// Longest this process decides the quota from live bytes it has not re-read from the store;
  /// its own creates and deletes count at once. Default: 1 s.
  Duration storage_refresh = std::chrono::seconds(1);
  /// Longest a create's reservation of its declared bytes holds room under the quota if nothing
  /// ends it (its process crashed): the body's time to arrive plus the create's budget. The
  /// server sets it to body_timeout + create_budget. Default: 32 s.
  Duration reservation_lifetime = std::chrono::seconds(32);
  /// The network each paste records of its creator (store::PasteMeta::creator_network), as
  /// reports count networks (ModerationOptions::networks). Default: IPv4 /24, IPv6 /48.
  admission::NetworkPrefixes creator_networks{};
  /// Who may create (create_access, create_networks, create_networks_file): checked first of a
  /// create's steps. Default: anyone.
  admission::CreateAccessPolicy create_access{};
  /// What a refused creator reads: how to get access, in the operator's words. Empty: a sentence
  /// that explains the mode (DefaultCreateAccessText). Default: empty.
  std::string create_access_text{};
  /// The search a proof-of-work challenge asks for while the solvers' share is at least half
  /// full (its maxnumber; PowDifficulty raises it as the share drains). Default: 100,000.
  uint64_t proof_of_work_difficulty = 100'000;
  /// The read-only window of a cutover (docs/scale-out.md, "Outgrowing one box"): every write a
  /// copy of the store would miss (a create or fork, a delete, a claim of a counted paste, a
  /// report, an operator's moderation) is refused Unavailable, reason read_only, before anything
  /// is spent; reads go on. Default: false.
  bool read_only = false;
  /// The Retry-After of a write refused in the window: about how long the operator expects it to
  /// last. Default: 30 s.
  std::chrono::seconds read_only_retry_after{30};
};

/// The refusal's text when the operator wrote none: what the mode takes, and that reading is open.
std::string DefaultCreateAccessText(admission::CreateAccess mode);

/// What a create's request line and headers say, before any of the body is read.
struct CreateHeaders {
  /// Content-Length, if the request declared one.
  std::optional<uint64_t> declared_length;
  /// Transfer-Encoding: chunked (or any transfer coding): the length is not bounded up front.
  bool chunked = false;
  /// A solved proof of work (ProofOfWork::Redeem's payload), from the Sluice-Proof header or
  /// the `proof` query parameter; empty: none.
  std::string proof{};
};

/// What a create refused at a full cap (create_slots, or its network's share of them) may do
/// before it is answered 503: the edge cuts the slowest body in flight under the rate a full cap
/// requires (docs/overload.md, "Pressure"). True when a slot may have freed; `own_network`: only
/// the network's own bodies may give way, as another network's frees no unit of its share.
using FreeCreateSlot = std::function<boost::asio::awaitable<bool>(bool own_network)>;

/// The most views a counted paste may be created with (max_views): past a few thousand readers a
/// paste is public, and a short TTL says so better.
inline constexpr uint32_t kMaxViews = 10000;

struct CreatedPaste {
  store::PasteId id;
  std::string delete_token;
  int64_t expires_at = 0;
};

/// Who is asking, worked out only when a limit needs it: a read served from the cache never does,
/// and on the hot path that saves parsing the forwarded-for chain of every request.
class ClientKeySource {
 public:
  virtual ~ClientKeySource() = default;
  virtual std::string Key() const = 0;
  /// The creator's name from the forward-auth header (forward_auth_header), as sent and not yet
  /// checked: only from a trusted proxy, so nobody else can pick a key of their own. Nullopt when
  /// the header is off, absent, or came from an untrusted peer.
  virtual std::optional<std::string> ForwardedUser() const { return std::nullopt; }
};

/// A create admitted from its headers: holds its create slot (and the bytes it declared) until
/// the create answers; the bytes stay counted while an abandoned PUT still runs.
struct CreateTicket {
  admission::Permit slot;
  /// The client's share of the create slots (create_slots_per_client), held as long as the slot.
  admission::KeyedSlots::Slot client_share;
  /// Its network's share of them (create_slots_per_network), held as long as the slot.
  admission::KeyedSlots::Slot network_share;
  /// Who it is for (admission::Creator::BudgetKey), so the stored create is counted for them
  /// (AbuseWatch).
  std::string client_key;
  /// The client key of its address, whatever the creator's budget key: the network a paste
  /// records of its creator (moderation) is where it came from, not who said they sent it.
  std::string address_key;
  /// With a storage quota: the declared bytes held against it, for the paste id the create will
  /// use. Given back if the create ends without its row; its row's insert takes them as live.
  store::StorageReservation reservation;
};

/// The create, read and delete use-cases. Thread-safe; the stores, cache and admission control
/// must outlive it.
class PasteService {
 public:
  /// `shared`, when given, is the metadata cache between `cache` and `meta`, and its invalidations
  /// drop ids from `cache`; it must outlive the service, and `cache` must outlive it. `blocks`,
  /// when given, refuses creates from blocked clients (403) and must outlive the service.
  /// `abuse`, when given, counts each stored create and each create refused for its client (429,
  /// 403, 507) and must outlive the service. `blocked_contents`, when given, refuses a create
  /// whose body's SHA-256 is in it (451 blocked_content) before anything is stored, and must
  /// outlive the service.
  PasteService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
               AdmissionControl& admission, const Clock& clock, MetricsRegistry& metrics,
               ServiceOptions options, store::SharedState* shared = nullptr,
               const Blocklist* blocks = nullptr, AbuseWatch* abuse = nullptr,
               const ContentBlocklist* blocked_contents = nullptr);

  /// The options now (a reload replaces them); hold the pointer for the length of one request.
  std::shared_ptr<const ServiceOptions> options() const { return options_.Load(); }
  /// New limits and budgets for requests from now on (docs/operations.md, "Reload"):
  /// max_paste_bytes, the TTLs, create_budget, read_budget, delete_budget, max_storage_bytes,
  /// reservation_lifetime, put_timeout, insert_timeout, cache_timeout, verify_bodies, create_access
  /// and create_access_text. The
  /// per-call timeouts are also the guarded stores' own (service::LiveCallTimeouts), which the
  /// caller changes with these. shared_meta_ttl and storage_refresh stay as built.
  void Reconfigure(const ServiceOptions& next);
  /// Opens (true) or closes the read-only window from now on, whatever the options said
  /// (the admin listener's PUT /admin/read-only); the next Reconfigure sets it again.
  void SetReadOnly(bool on);
  /// Nothing outside the read-only window (ServiceOptions::read_only); in it, the refusal every
  /// write answers: Unavailable, reason read_only, Retry-After read_only_retry_after. Checked
  /// first by each use case that writes, here and in ModerationService.
  std::optional<Error> ReadOnlyRefusal() const;

  /// Step 1 of a create, from the headers alone: LengthRequired without a bounded length, TooLarge
  /// over the limit. `allowance` is extra framing the transport adds (multipart boundaries).
  Status CheckCreateHeaders(const CreateHeaders& headers, uint64_t allowance = 0) const;

  /// Steps 1 to 3 of a create, before any of the body is read: the size (LengthRequired,
  /// TooLarge), an operator's block of the client (PermissionDenied, reason blocked), the storage
  /// quota as this process last saw it (InsufficientStorage, reason "storage_quota", with a
  /// Retry-After), the rate limits (ResourceExhausted, with the limit), the in-flight caps
  /// (Unavailable, with a jittered Retry-After), and last, with a quota, the reservation of the
  /// declared bytes in the metadata store (store::MetaStore::ReserveStorage): InsufficientStorage
  /// as above when concurrent creates hold the room, Unavailable when the store cannot decide.
  /// Nothing is spent for a refused create, except that one the reservation refuses has taken
  /// its rate-limit tokens (the quota filled between the first look and the reservation).
  /// Suspends to ask a shared limiter store, for at most its budget, and, with a quota, the
  /// metadata store, for at most the insert's timeout.
  /// With `free_slot`, a create refused at a full cap asks it to free a slot and, if it did, asks
  /// for the slot once more, kept for it meanwhile (CreateSlotPromise); the checks before the
  /// slot are not asked twice, and only the refusal that stands is counted.
  /// Before all of these, who may create (ServiceOptions::create_access): a creator the policy
  /// does not take is refused with reason "create_access_credential" (Unauthenticated in spirit:
  /// PermissionDenied, which the edge answers 401) or "create_access_network" (PermissionDenied,
  /// 403), with the operator's text as the message, before anything is spent or counted.
  /// `creator`'s budget key (admission::Creator::BudgetKey) keys every per-key budget.
  /// First of all, the read-only window (ReadOnlyRefusal): the server's state, not the client's.
  boost::asio::awaitable<Result<CreateTicket>> AdmitCreate(
      admission::Creator creator, CreateHeaders headers, uint64_t allowance = 0,
      const FreeCreateSlot* free_slot = nullptr);
  /// The same for a creator known by its address alone.
  boost::asio::awaitable<Result<CreateTicket>> AdmitCreate(
      std::string client_key, CreateHeaders headers, uint64_t allowance = 0,
      const FreeCreateSlot* free_slot = nullptr) {
    admission::Creator creator;
    creator.address_key = std::move(client_key);
    return AdmitCreate(std::move(creator), headers, allowance, free_slot);
  }
  /// Turns on the proof-of-work rung (docs/overload.md, "Proof of work"): a create refused by the
  /// others' share of the global count (global_count) or by the solvers' share (solver_count)
  /// carries a challenge, and a create with a solution (CreateHeaders::proof) draws on the
  /// solvers' share; a creator holding a credential is never asked. A solution that is not this
  /// server's or does not solve is refused 400 invalid_proof; one expired, already spent, or met
  /// by a full memory, 429 with a new challenge. Call once, before serving; `pow` must outlive
  /// the service and the AdmissionControl must keep a solver share.
  void UseProofOfWork(ProofOfWork* pow, MetricsRegistry& metrics);
  bool ProofOfWorkOn() const { return pow_ != nullptr; }
  /// A challenge for a create `creator` is about to send, if one would be asked of it now: the
  /// others' share of the global count is spent in `budgets` (DecidingBudgets) and the creator
  /// holds no credential. What /api/v1/limits gives a page, so a person solves before sending.
  std::optional<std::string> ChallengeBeforeCreate(const admission::Creator& creator,
                                                   const ClientBudgets& budgets) const;
  /// Who may create (create_access): nothing for a creator the policy takes, else the refusal.
  std::optional<Error> CheckCreateAccess(const admission::Creator& creator) const;
  /// The reputation feeds AdmitCreate asks, right after who may create, for a creator who holds
  /// no credential (docs/admission.md, "Reputation feeds"): a refusal (403 feed_refused, or 429
  /// from the class's budgets) before anything else is spent. Null (the default): none. Set
  /// before the first request; `feeds` must outlive the service.
  void UseReputationFeeds(ReputationFeeds* feeds) { feeds_ = feeds; }

  /// Validates the body and TTL (InvalidArgument), stores the body, then the row. Nothing durable
  /// happens for a rejected create; a failed or timed-out PUT is Unavailable and leaves no row.
  /// An insert whose answer was lost (see store::InsertOutcomeUnknown) is checked by reading the
  /// row: found, the create succeeded; otherwise Unavailable with reason "outcome_unknown" (the
  /// paste may or may not exist), and the body stays for the orphan reaper.
  /// `max_views`: 0 for an ordinary paste; N (1 to kMaxViews) for one whose text is served N
  /// times, each by Claim, and never cached (1 is burn after reading). InvalidArgument (reason
  /// invalid_max_views) above kMaxViews. `parent`: the id of the paste this one is forked from
  /// (PasteMeta::parent), or empty; it must be a live paste that may be forked (CheckForkable),
  /// else InvalidArgument, reason bad_parent, and nothing is stored. `encrypted`: the body is an
  /// end-to-end encrypted envelope (docs/encryption.md), checked for its shape only
  /// (CheckEnvelope: InvalidArgument "bad_envelope"), never opened.
  boost::asio::awaitable<Result<CreatedPaste>> Create(CreateTicket ticket, std::string body,
                                                      std::string_view ttl, uint32_t max_views = 0,
                                                      std::string_view parent = {},
                                                      bool encrypted = false);

  /// Whether the server may show `meta`'s text to make a fork or a diff of it: not a burn
  /// (counted) paste, whose text is given only by Claim, nor an encrypted one, whose text the
  /// server cannot read. InvalidArgument, reason not_forkable, otherwise.
  static Status CheckForkable(const store::PasteMeta& meta);

  /// Returns a live paste: Withheld (reason under_review or taken_down) for a paste moderation
  /// withholds, whatever else its row says (a burn paste too); NotFound for malformed ids (without
  /// touching storage), absent, expired or deleted pastes; Unavailable when a store fails, never
  /// NotFound, and Unavailable with reason "body_mismatch" when the blob store's body is not the
  /// one the row describes (never served, never cached). A cache hit costs no slot and no limit; a
  /// miss that joins a fill of the id already in flight costs nothing either; the miss that leads
  /// a fill takes the client's origin-read budget, a read slot, and one fill within the fill cap.
  /// A live burn-after-reading paste comes back as its row with a null body: the caller never
  /// serves it from here (it confirms, or points to Claim).
  boost::asio::awaitable<Result<CachedPaste>> Read(const ClientKeySource& client,
                                                   std::string_view id_text);

  /// Reads a burn (counted) paste once: fetches and checks the body, then claims one of its views
  /// (store::MetaStore::Claim), and only the callers whose claims commit get the text, one per
  /// view left (the returned row's views_left counts this one); every other, concurrent or
  /// later, gets NotFound. Withheld (451) for a paste moderation withholds,
  /// before anything is claimed: it is never burned. InvalidArgument (reason "not_burn") for a
  /// paste that is not burn-after-reading; Unavailable when a store fails (nothing burned, unless
  /// the claim's own answer was lost). Costs an origin read like a fill's leader; nothing is
  /// cached.
  boost::asio::awaitable<Result<CachedPaste>> Claim(const ClientKeySource& client,
                                                    std::string_view id_text);

  /// A page of `page_bytes` about to be answered (AdmissionControl::AdmitPageBytes).
  boost::asio::awaitable<Status> AdmitPageBytes(std::string client_key, size_t page_bytes) {
    return admission_.AdmitPageBytes(std::move(client_key), page_bytes);
  }

  /// Create slots in flight over the create cap now, 0 to 1 (AdmissionControl).
  double CreateSlotSaturation() const { return admission_.CreateSlotSaturation(); }
  /// The create slots in use and their cap now (AdmissionControl).
  admission::SlotGauges CreateSlotGauges() const { return admission_.CreateSlotGauges(); }

  /// The caller's budgets in this process, spending nothing.
  ClientBudgets Budgets(std::string_view client_key) const {
    return admission_.Budgets(client_key);
  }
  /// The caller's budgets where they are decided (AdmissionControl::DecidingBudgets).
  boost::asio::awaitable<ClientBudgets> DecidingBudgets(std::string client_key) {
    return admission_.DecidingBudgets(std::move(client_key));
  }

  /// Deletes with the token. NotFound for a malformed id, a missing paste or a wrong token alike;
  /// success again for a paste already deleted with the right token. With a `client_key`, first
  /// its delete budget (ResourceExhausted, reason delete_rate), before any store call, so that
  /// guessing tokens costs the primary nothing either. A paste whose row the metadata store does
  /// not have (a promotion lost it, or it was purged) is NotFound whatever the token, since the
  /// token's hash was in the row; the caches stop serving it too (ForgetRowless).
  boost::asio::awaitable<Status> Delete(std::string_view id_text, std::string_view token,
                                        std::string_view client_key = {});

  /// Re-reads the live bytes from the metadata store (a failure keeps the last value). The
  /// server calls it at start; creates call it when the value is older than storage_refresh.
  boost::asio::awaitable<void> RefreshStorage();

  /// Bytes a paste removed by another use-case than Delete and Claim gave back (a takedown,
  /// src/service/moderation.cc), whose store transaction counted them out already: the quota
  /// sees them go at once, as a delete's, not at the next storage_refresh.
  void CountFreed(uint64_t bytes) { CountLive(-static_cast<int64_t>(bytes)); }

  /// What the storage quota sees now.
  struct StorageUsage {
    uint64_t live_bytes = 0;
    bool known = false;  // false until the first read from the store succeeded
    uint64_t quota_bytes = 0;
    uint64_t created_bytes_24h = 0;  // by this process
  };
  StorageUsage Storage() const;

 private:
  bool IsLive(const store::PasteMeta& meta) const;
  /// `refusal` with a new proof-of-work challenge at the difficulty the solvers' share calls for.
  Error WithChallenge(Error refusal) const;
  /// Redeems a solution: nothing if valid (the create is a solver's), else the refusal.
  std::optional<Error> RedeemProof(std::string_view proof);
  /// AdmitCreate's checks in their order, without the counting of refusals. `may_solve`: a
  /// proof of work is asked of this creator, so a solution it carries is redeemed.
  boost::asio::awaitable<Result<CreateTicket>> AdmitCreateInOrder(
      const FreeCreateSlot* free_slot, const std::string& client_key,
      const std::string& address_key, const CreateHeaders& headers, uint64_t allowance,
      std::optional<admission::TokenBudget> own, bool may_solve);
  /// Gives a store failure the Retry-After band of the caps, so a failing store is not met by a
  /// wave of clients either.
  Error WithRetryAfter(Error e);
  boost::asio::awaitable<Result<CachedPaste>> Fill(store::PasteId id, std::string client_key);
  static constexpr std::string_view kBodyMissing = "body_missing";
  boost::asio::awaitable<Result<std::string>> FetchCheckedBody(const store::PasteMeta& meta,
                                                               Deadline deadline,
                                                               std::string_view action);
  /// After an insert whose outcome is unknown: reads the row to learn whether it was written.
  /// Success if `meta` is there; otherwise the outcome_unknown error.
  boost::asio::awaitable<Status> ConfirmInsert(const store::PasteMeta& meta, const Error& lost,
                                               admission::Deadline deadline);
  /// Leads or joins the fill of `id`. A leader first takes `client_key`'s origin-read budget and
  /// a read slot; refused, it sets `refusal` and its joiners receive an error whose reason is
  /// kLeaderRefused.
  boost::asio::awaitable<Result<CachedPaste>> FillShared(
      store::PasteId id, std::string client_key, std::shared_ptr<std::optional<Error>> refusal);
  /// The row from the shared metadata cache, or nullopt on a miss or any failure of the cache.
  boost::asio::awaitable<std::optional<store::PasteMeta>> SharedMeta(store::PasteId id,
                                                                     admission::Deadline deadline);
  /// Puts a row read from the primary into the shared metadata cache; a failure only counts.
  boost::asio::awaitable<void> KeepShared(const store::PasteMeta& meta,
                                          admission::Deadline deadline);
  /// Drops a paste the metadata store has no row for from this process's cache and, when the
  /// shared cache still holds it live, from there and every process's (Delete).
  boost::asio::awaitable<void> ForgetRowless(store::PasteId id, admission::Deadline deadline);
  /// How long the shared cache may keep `meta`: never past its expiry, at most shared_meta_ttl.
  std::chrono::seconds SharedTtl(const store::PasteMeta& meta) const;
  /// The quota's refusal, from the declared length alone, or nothing.
  boost::asio::awaitable<std::optional<Error>> CheckQuota(uint64_t declared_length);
  /// Holds `declared_length` against the quota for a new paste id (store::MetaStore::
  /// ReserveStorage); its refusal answers 507, the store's failure 503.
  boost::asio::awaitable<Result<store::StorageReservation>> ReserveStorage(
      uint64_t declared_length, std::shared_ptr<const ServiceOptions> options);
  /// A quota refusal, counted, with the caps' Retry-After band.
  Error QuotaRefusal(Error e);
  /// This process's own change to the live bytes (+ a create, - a delete or claim).
  void CountLive(int64_t delta);
  void CountCreated(uint64_t bytes);
  uint64_t CreatedLastDay() const;

  struct IdHash {
    size_t operator()(const store::PasteId& id) const {
      return std::hash<std::string_view>()(id.view());
    }
  };

  store::MetaStore& meta_;
  store::BlobStore& blobs_;
  PasteCache& cache_;
  AdmissionControl& admission_;
  const Clock& clock_;
  Swappable<ServiceOptions> options_;
  store::SharedState* const shared_;
  const Blocklist* const blocks_;
  AbuseWatch* const abuse_;
  const ContentBlocklist* const blocked_contents_;
  ProofOfWork* pow_ = nullptr;
  /// sluice_pow_challenges_total by outcome: "issued", then each PowVerdict's name.
  std::unordered_map<std::string_view, Counter*> pow_outcomes_;
  ReputationFeeds* feeds_ = nullptr;
  Counter& cache_hits_;
  Counter& cache_misses_;
  Counter& fills_shared_;
  Counter& shared_hits_;
  Counter& shared_misses_;
  Counter& shared_errors_;
  Counter& size_mismatches_;
  Counter& checksum_mismatches_;
  Counter& undecodable_mismatches_;
  Counter& confirmed_inserts_;
  Counter& unknown_inserts_;
  Counter& claims_won_;
  Counter& claims_gone_;
  Counter& put_bytes_;
  Counter& blocked_content_refusals_;
  admission::Singleflight<store::PasteId, Result<CachedPaste>, IdHash> fills_;

  // Storage accounting (docs/overload.md, "Create", step 1).
  std::atomic<int64_t> live_bytes_{0};
  std::atomic<bool> live_known_{false};
  std::atomic<int64_t> live_read_at_ns_{0};  // clock_.Now() of the last read, since its epoch
  std::atomic<bool> refreshing_{false};
  Counter& created_bytes_;
  Counter& quota_refusals_;
  // Bytes created per hour over the last 24 h, by hour number (Unix hours), for the 24 h gauge.
  mutable std::mutex created_mu_;
  std::array<std::pair<int64_t, uint64_t>, 24> created_hours_{};
  Counter& read_only_refusals_;
  // Reconfigure and SetReadOnly each read, change and store the options: one at a time, so that
  // neither undoes the other.
  std::mutex reconfigure_mu_;
  GaugeCallbacks storage_gauges_;  // last: its callbacks read the members above
};

}  // namespace sluice::service
