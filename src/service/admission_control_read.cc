// AdmissionControl's reads (include/sluice/service/admission_control.h): an origin read's budget
// and slot, a page's bytes, and a cache fill's ticket.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "sluice/admission/adaptive_concurrency_limiter.h"
#include "sluice/service/admission_control.h"

namespace sluice::service {

boost::asio::awaitable<Result<admission::Permit>> AdmissionControl::AdmitOriginRead(
    std::string client_key) {
  if (!shared_) {
    const admission::KeyedDecision mine = ip_read_.TryTake(client_key, 1);
    if (!mine.allowed()) {
      co_return RateLimited("origin_get_ip", ip_read_.policies()[0], mine.decision,
                            ip_read_.Peek(client_key).available[0]);
    }
    Result<admission::Permit> slot = TakeReadSlot();
    if (!slot.ok()) ip_read_.Refund(client_key, 1);
    co_return slot;
  }
  static constexpr const char* kReasons[] = {"origin_get_ip"};
  std::vector<store::BucketTake> takes = {SharedReadTake(client_key)};
  auto asking = AskShared(takes, kReasons);
  SharedVerdict verdict = co_await std::move(asking);
  // Silent: the per-client read limit fails open like the create limits; the read pool still holds.
  if (verdict.kind == SharedVerdict::kRefused) co_return std::move(*verdict.refusal);
  Result<admission::Permit> slot = TakeReadSlot();
  if (!slot.ok() && verdict.kind == SharedVerdict::kAllowed) {
    auto refunding = RefundShared(std::move(takes));
    co_await std::move(refunding);
  }
  co_return slot;
}

boost::asio::awaitable<Status> AdmissionControl::AdmitPageBytes(std::string client_key,
                                                                size_t page_bytes) {
  const size_t reads = page_bytes / kPageBytesPerRead;
  if (reads == 0) co_return Ok();
  const admission::TokenBucketPolicy policy = options_.Load()->ip_read;
  // Never more than the bucket holds: a page the bucket could never pay for would be refused for
  // ever, whatever the client's pace.
  const double cost = std::min(static_cast<double>(reads), policy.burst);
  if (!shared_) {
    const admission::KeyedDecision mine = ip_read_.TryTake(client_key, cost);
    if (!mine.allowed()) {
      co_return RateLimited("page_bytes_ip", ip_read_.policies()[0], mine.decision,
                            ip_read_.Peek(client_key).available[0]);
    }
    co_return Ok();
  }
  static constexpr const char* kReasons[] = {"page_bytes_ip"};
  store::BucketTake take = SharedReadTake(client_key);
  take.cost = cost;
  auto asking = AskShared({std::move(take)}, kReasons);
  SharedVerdict verdict = co_await std::move(asking);
  if (verdict.kind == SharedVerdict::kRefused) co_return std::move(*verdict.refusal);
  co_return Ok();
}

Result<admission::Permit> AdmissionControl::TakeReadSlot() {
  admission::AcquireResult slot = read_slots_.TryAcquire(0);
  if (!slot.ok()) {
    return Refuse(ErrorCode::kUnavailable, "read_slots",
                  "the server is at its limit of reads in flight; retry later");
  }
  NotePeak(read_peak_, read_slots_);
  return std::move(*slot.permit);
}

Result<AdmissionControl::FillTicket> AdmissionControl::AdmitFill(std::string_view client_key) {
  auto share = fill_per_client_.TryAcquire(client_key);
  if (!share) {
    return Refuse(ErrorCode::kUnavailable, "fill_cap",
                  "too many lookups of uncached pastes from this address at once; retry later");
  }
  admission::AcquireResult slot = fill_slots_.TryAcquire(0);
  if (!slot.ok()) {
    return Refuse(ErrorCode::kUnavailable, "fill_cap",
                  "too many lookups of uncached pastes at once; retry later");
  }
  NotePeak(fill_peak_, fill_slots_);
  return FillTicket{std::move(*slot.permit), std::move(*share)};
}

}  // namespace sluice::service
