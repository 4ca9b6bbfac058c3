// In-flight caps over count and bytes together (docs/overload.md, "Create"): at most 50 creates and
// 32 MB of buffered bodies per process by default. Never a queue: TryAcquire answers at once, and a
// refusal becomes a 503 before the body is read. Permits release on destruction, so a slot cannot
// leak on an error path; a slot that never returns is the same as no cap.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "sluice/common/clock.h"

namespace sluice::admission {

class SlotLimiter;

/// How the call that held a permit went; the adaptive limiter learns from it, the static one
/// ignores it.
enum class Outcome {
  /// The dependency answered (any answer, errors included, that came back in time).
  kSuccess,
  /// We stopped waiting. The strongest sign of overload.
  kTimeout,
  /// The dependency pushed back (throttled, 503, refused): slot free, request failed.
  kDropped,
  /// No signal about the dependency (the client went away, validation failed before the call).
  kIgnore,
};

/// Which cap refused an acquire; maps to the reasons `create_slots` and `create_bytes`.
enum class SlotRefusal { kCount, kBytes };

/// Bytes that stay counted against a byte cap after their request is gone, until the work under
/// them (a PUT still running after its timeout) really ends. Move-only; releases on destruction.
class BytesLease {
 public:
  BytesLease() = default;
  BytesLease(BytesLease&& other) noexcept;
  BytesLease& operator=(BytesLease&& other) noexcept;
  ~BytesLease();

  int64_t bytes() const { return bytes_; }
  /// Releases now; later calls and the destructor do nothing.
  void Release();

 private:
  friend class Permit;
  BytesLease(SlotLimiter* owner, int64_t bytes) : owner_(owner), bytes_(bytes) {}
  SlotLimiter* owner_ = nullptr;
  int64_t bytes_ = 0;
};

/// One admitted unit of in-flight work. Move-only; releases its slot and bytes on destruction,
/// reporting Outcome::kIgnore. Not thread-safe itself (one owner at a time), but may be released
/// on any thread. Precondition: the limiter outlives every permit and lease it handed out.
class Permit {
 public:
  Permit(Permit&& other) noexcept;
  Permit& operator=(Permit&& other) noexcept;
  ~Permit();

  int64_t bytes() const { return bytes_; }
  TimePoint acquired_at() const { return acquired_at_; }
  bool released() const { return owner_ == nullptr; }

  /// Releases now, reporting the outcome with the time since acquire as the latency.
  void Done(Outcome outcome);
  /// Releases now with a latency the caller measured: the adaptive create cap should learn from
  /// the PUT alone, not from a slow client's upload that happened while the permit was held.
  void Done(Outcome outcome, Duration latency);
  /// Frees the slot now (the request is answered) but keeps the bytes counted until the returned
  /// lease is destroyed: hand it to the work that is still running.
  [[nodiscard]] BytesLease HandOffBytes(Outcome outcome);
  /// The same, with a latency the caller measured (the PUT alone) for the adaptive limiter.
  [[nodiscard]] BytesLease HandOffBytes(Outcome outcome, Duration latency);

 private:
  friend class SlotLimiter;
  Permit(SlotLimiter* owner, int64_t bytes, TimePoint acquired_at)
      : owner_(owner), bytes_(bytes), acquired_at_(acquired_at) {}
  void Finish(Outcome outcome, std::optional<Duration> latency, bool release_bytes);
  BytesLease HandOff(Outcome outcome, std::optional<Duration> latency);

  SlotLimiter* owner_ = nullptr;
  int64_t bytes_ = 0;
  TimePoint acquired_at_{};
};

/// The answer to one acquire: a permit, or which cap said no.
struct AcquireResult {
  std::optional<Permit> permit;
  SlotRefusal refusal = SlotRefusal::kCount;
  bool ok() const { return permit.has_value(); }
};

/// Gauges for /metrics.
struct SlotGauges {
  int64_t in_use = 0;
  int64_t bytes_in_use = 0;
  /// The count cap now (fixed, or the adaptive limiter's current limit).
  int64_t limit = 0;
  int64_t max_bytes = 0;
  uint64_t refused_count = 0;
  uint64_t refused_bytes = 0;
};

/// Anything that hands out permits for in-flight work: the static ConcurrencyLimiter or the
/// AdaptiveConcurrencyLimiter, so the server can choose by configuration. Implementations are
/// thread-safe.
class SlotLimiter {
 public:
  virtual ~SlotLimiter() = default;
  /// Admits one unit holding `bytes` (0 for work that buffers nothing), or refuses at once.
  /// Precondition: bytes >= 0.
  virtual AcquireResult TryAcquire(int64_t bytes = 0) = 0;
  virtual SlotGauges Gauges() const = 0;

 protected:
  Permit MakePermit(int64_t bytes, TimePoint acquired_at) {
    return Permit(this, bytes, acquired_at);
  }
  /// Frees the count of one permit; `latency` is nullopt when the permit should measure itself.
  virtual void ReleaseSlot(const Permit& permit, Outcome outcome,
                           std::optional<Duration> latency) = 0;
  virtual void ReleaseBytes(int64_t bytes) = 0;

 private:
  friend class Permit;
  friend class BytesLease;
};

namespace internal {

/// Count and bytes in one atomic word, so both caps are checked and taken in one compare-and-swap:
/// no lock, and never a moment where one is taken and the other refused. Count uses the top 20
/// bits, bytes the low 44 (16 TiB).
class SlotCounter {
 public:
  static constexpr int64_t kMaxCount = (int64_t{1} << 20) - 1;
  static constexpr int64_t kMaxBytes = (int64_t{1} << 44) - 1;

  /// Returns nullopt when admitted, the refusing cap otherwise.
  std::optional<SlotRefusal> TryAcquire(int64_t max_count, int64_t max_bytes, int64_t bytes);
  void ReleaseCount() { word_.fetch_sub(kOneCount, std::memory_order_acq_rel); }
  void ReleaseBytes(int64_t bytes) {
    word_.fetch_sub(static_cast<uint64_t>(bytes), std::memory_order_acq_rel);
  }
  /// Count and bytes read together, so a gauge never pairs one permit's count with another's bytes.
  struct Snapshot {
    int64_t count;
    int64_t bytes;
  };
  Snapshot Load() const {
    const uint64_t word = word_.load(std::memory_order_acquire);
    return Snapshot{static_cast<int64_t>(word >> 44), static_cast<int64_t>(word & kMaxBytes)};
  }

 private:
  static constexpr uint64_t kOneCount = uint64_t{1} << 44;
  std::atomic<uint64_t> word_{0};
};

}  // namespace internal

struct ConcurrencyLimiterOptions {
  /// In-flight units at once. Precondition: 1 to 1'048'575. Default: 50 (creates per process).
  int64_t max_count = 50;
  /// Bytes held by in-flight units at once. Precondition: 0 to 2^44-1. Default: 32 MiB.
  int64_t max_bytes = int64_t{32} << 20;
};

/// A fixed cap on in-flight count and bytes. Thread-safe and lock-free.
class ConcurrencyLimiter final : public SlotLimiter {
 public:
  /// `clock` stamps permits (acquired_at) and must outlive the limiter.
  ConcurrencyLimiter(ConcurrencyLimiterOptions options, const Clock& clock);

  AcquireResult TryAcquire(int64_t bytes = 0) override;
  SlotGauges Gauges() const override;
  /// New caps for acquires from now on (a configuration reload). Permits already out are kept:
  /// lowered below what is in flight, the cap lets them finish and admits nothing until under it.
  /// Same preconditions as the options.
  void SetLimits(ConcurrencyLimiterOptions options);

 private:
  void ReleaseSlot(const Permit& permit, Outcome outcome, std::optional<Duration> latency) override;
  void ReleaseBytes(int64_t bytes) override;

  // Each read once per acquire; a reload may change one between the two loads, and either pair of
  // caps is one the operator asked for at some point.
  std::atomic<int64_t> max_count_;
  std::atomic<int64_t> max_bytes_;
  const Clock& clock_;
  internal::SlotCounter counter_;
  std::atomic<uint64_t> refused_count_{0};
  std::atomic<uint64_t> refused_bytes_{0};
};

}  // namespace sluice::admission
