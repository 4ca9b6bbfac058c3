#include "sluice/admission/concurrency_limiter.h"

#include <utility>

namespace sluice::admission {

BytesLease::BytesLease(BytesLease&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

BytesLease& BytesLease::operator=(BytesLease&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

BytesLease::~BytesLease() { Release(); }

void BytesLease::Release() {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->ReleaseBytes(bytes_);
}

Permit::Permit(Permit&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      bytes_(other.bytes_),
      acquired_at_(other.acquired_at_) {}

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    Finish(Outcome::kIgnore, std::nullopt, true);
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = other.bytes_;
    acquired_at_ = other.acquired_at_;
  }
  return *this;
}

Permit::~Permit() { Finish(Outcome::kIgnore, std::nullopt, true); }

void Permit::Done(Outcome outcome) { Finish(outcome, std::nullopt, true); }

void Permit::Done(Outcome outcome, Duration latency) { Finish(outcome, latency, true); }

BytesLease Permit::HandOffBytes(Outcome outcome) { return HandOff(outcome, std::nullopt); }

BytesLease Permit::HandOffBytes(Outcome outcome, Duration latency) {
  return HandOff(outcome, latency);
}

BytesLease Permit::HandOff(Outcome outcome, std::optional<Duration> latency) {
  if (owner_ == nullptr) return BytesLease();
  SlotLimiter* owner = owner_;
  Finish(outcome, latency, false);
  return BytesLease(owner, bytes_);
}

void Permit::Finish(Outcome outcome, std::optional<Duration> latency, bool release_bytes) {
  if (owner_ == nullptr) return;
  SlotLimiter* owner = std::exchange(owner_, nullptr);
  owner->ReleaseSlot(*this, outcome, latency);
  if (release_bytes) owner->ReleaseBytes(bytes_);
}

namespace internal {

std::optional<SlotRefusal> SlotCounter::TryAcquire(int64_t max_count, int64_t max_bytes,
                                                   int64_t bytes) {
  uint64_t word = word_.load(std::memory_order_relaxed);
  while (true) {
    const auto count = static_cast<int64_t>(word >> 44);
    const auto held = static_cast<int64_t>(word & kMaxBytes);
    if (count >= max_count) return SlotRefusal::kCount;
    if (bytes > max_bytes - held) return SlotRefusal::kBytes;
    const uint64_t next = word + kOneCount + static_cast<uint64_t>(bytes);
    if (word_.compare_exchange_weak(word, next, std::memory_order_acq_rel,
                                    std::memory_order_relaxed)) {
      return std::nullopt;
    }
  }
}

}  // namespace internal

ConcurrencyLimiter::ConcurrencyLimiter(ConcurrencyLimiterOptions options, const Clock& clock)
    : max_count_(options.max_count), max_bytes_(options.max_bytes), clock_(clock) {}

void ConcurrencyLimiter::SetLimits(ConcurrencyLimiterOptions options) {
  max_count_.store(options.max_count, std::memory_order_relaxed);
  max_bytes_.store(options.max_bytes, std::memory_order_relaxed);
}

AcquireResult ConcurrencyLimiter::TryAcquire(int64_t bytes) {
  if (auto refusal = counter_.TryAcquire(max_count_.load(std::memory_order_relaxed),
                                         max_bytes_.load(std::memory_order_relaxed), bytes)) {
    (*refusal == SlotRefusal::kCount ? refused_count_ : refused_bytes_)
        .fetch_add(1, std::memory_order_relaxed);
    return AcquireResult{std::nullopt, *refusal};
  }
  return AcquireResult{MakePermit(bytes, clock_.Now()), SlotRefusal::kCount};
}

SlotGauges ConcurrencyLimiter::Gauges() const {
  const internal::SlotCounter::Snapshot now = counter_.Load();
  return SlotGauges{now.count,
                    now.bytes,
                    max_count_.load(std::memory_order_relaxed),
                    max_bytes_.load(std::memory_order_relaxed),
                    refused_count_.load(std::memory_order_relaxed),
                    refused_bytes_.load(std::memory_order_relaxed)};
}

void ConcurrencyLimiter::ReleaseSlot(const Permit&, Outcome, std::optional<Duration>) {
  counter_.ReleaseCount();
}

void ConcurrencyLimiter::ReleaseBytes(int64_t bytes) { counter_.ReleaseBytes(bytes); }

}  // namespace sluice::admission
