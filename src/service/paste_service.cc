#include "sluice/service/paste_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sluice/service/ids.h"
#include "sluice/service/text.h"

namespace sluice::service {

using admission::Deadline;
using boost::asio::awaitable;

namespace {

Error NotFound() {
  return MakeError(ErrorCode::kNotFound,
                   "no paste with this id (it may have expired or been deleted)", "not_found");
}

Error Invalid(std::string message, std::string reason) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message), std::move(reason));
}

}  // namespace

PasteService::PasteService(store::MetaStore& meta, store::BlobStore& blobs, PasteCache& cache,
                           const Clock& clock, MetricsRegistry& metrics, ServiceOptions options)
    : meta_(meta),
      blobs_(blobs),
      cache_(cache),
      clock_(clock),
      options_(options),
      cache_hits_(metrics.GetCounter("sluice_paste_cache_total", "Paste cache lookups by outcome",
                                     {{"outcome", "hit"}})),
      cache_misses_(metrics.GetCounter("sluice_paste_cache_total", "Paste cache lookups by outcome",
                                       {{"outcome", "miss"}})) {}

Status PasteService::CheckCreateHeaders(const CreateHeaders& headers, uint64_t allowance) const {
  if (headers.chunked || !headers.declared_length) {
    return MakeError(
        ErrorCode::kLengthRequired,
        "send the body with a Content-Length header (chunked uploads are not accepted)",
        "length_required");
  }
  if (*headers.declared_length > options_.max_paste_bytes + allowance) {
    return MakeError(ErrorCode::kTooLarge,
                     fmt::format("a paste may be at most {} bytes", options_.max_paste_bytes),
                     "too_large");
  }
  return Ok();
}

bool PasteService::IsLive(const store::PasteMeta& meta) const {
  return !meta.deleted && meta.expires_at > clock_.UnixSeconds();
}

awaitable<Result<CreatedPaste>> PasteService::Create(std::string body, std::string_view ttl_text) {
  if (body.size() > options_.max_paste_bytes) {
    co_return MakeError(ErrorCode::kTooLarge,
                        fmt::format("a paste may be at most {} bytes", options_.max_paste_bytes),
                        "too_large");
  }
  switch (CheckPasteText(body)) {
    case TextProblem::kNone:
      break;
    case TextProblem::kEmpty:
      co_return Invalid("the paste is empty", "empty_body");
    case TextProblem::kInvalidUtf8:
      co_return Invalid("the paste is not valid UTF-8 text", "invalid_utf8");
    case TextProblem::kNulByte:
      co_return Invalid("the paste contains a NUL byte; only text is accepted", "nul_byte");
  }
  std::chrono::seconds ttl = options_.default_ttl;
  if (!ttl_text.empty()) {
    auto parsed = ParseTtl(ttl_text);
    if (!parsed)
      co_return Invalid("unknown ttl; choose one of 10m, 1h, 1d, 1w, 30d", "invalid_ttl");
    if (*parsed > options_.max_ttl) {
      co_return Invalid("this server does not keep pastes that long", "ttl_over_max");
    }
    ttl = *parsed;
  }

  const Deadline deadline = Deadline::After(clock_, options_.create_budget);
  const store::PasteId id = MintPasteId();
  std::string token = MintDeleteToken();
  const int64_t now = clock_.UnixSeconds();
  store::PasteMeta meta{id, now, now + ttl.count(), body.size(), HashDeleteToken(token), false};

  if (Status put = co_await blobs_.Put(id, body, deadline.ForCall(clock_, options_.put_timeout));
      !put.ok()) {
    spdlog::warn("create {}: body not stored: {}", id.view(), put.error().message);
    Error e = put.error();
    e.code = ErrorCode::kUnavailable;
    e.message = "the paste store is unavailable; nothing was saved, try again later";
    co_return e;
  }
  if (Status insert =
          co_await meta_.Insert(meta, deadline.ForCall(clock_, options_.insert_timeout));
      !insert.ok()) {
    // The body stays for the orphan reaper: deleting it here could race an insert that did commit.
    spdlog::error("create {}: row not stored: {}", id.view(), insert.error().message);
    co_return MakeError(ErrorCode::kInternal,
                        "the paste could not be recorded; nothing was published, try again",
                        insert.error().reason.empty() ? "insert_failed" : insert.error().reason);
  }
  cache_.Put(CachedPaste{meta, std::make_shared<const std::string>(std::move(body))});
  co_return CreatedPaste{id, std::move(token), meta.expires_at};
}

awaitable<Result<CachedPaste>> PasteService::Read(std::string_view id_text) {
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  if (auto hit = cache_.Get(*id)) {
    cache_hits_.Inc();
    if (!IsLive(hit->meta)) co_return NotFound();
    co_return *std::move(hit);
  }
  cache_misses_.Inc();
  const Deadline deadline = Deadline::After(clock_, options_.read_budget);
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) co_return meta.error();
  if (!IsLive(*meta)) co_return NotFound();
  Result<std::string> body = co_await blobs_.Get(*id, deadline);
  if (!body.ok()) {
    if (body.error().code == ErrorCode::kNotFound) {
      // A live row always has its body (the PUT precedes the insert): this is damage, not absence.
      spdlog::error("read {}: row without body", id->view());
      co_return MakeError(ErrorCode::kInternal, "the paste body is missing", "body_missing");
    }
    co_return body.error();
  }
  CachedPaste paste{*meta, std::make_shared<const std::string>(std::move(*body))};
  cache_.Put(paste);
  co_return paste;
}

awaitable<Status> PasteService::Delete(std::string_view id_text, std::string_view token) {
  const auto id = store::PasteId::Parse(id_text);
  if (!id) co_return NotFound();
  const Deadline deadline = Deadline::After(clock_, options_.read_budget);
  Result<store::PasteMeta> meta = co_await meta_.Get(*id, deadline);
  if (!meta.ok()) co_return meta.error();
  if (!SameTokenHash(meta->token_hash, HashDeleteToken(token))) co_return NotFound();
  if (meta->deleted) co_return Ok();
  if (meta->expires_at <= clock_.UnixSeconds()) co_return NotFound();
  if (Status s = co_await meta_.MarkDeleted(*id, clock_.UnixSeconds(), deadline); !s.ok()) {
    co_return s.error();
  }
  cache_.MarkDeleted(*id);
  co_return Ok();
}

}  // namespace sluice::service
