// Result<T>: the value of an expected failure, shaped like std::expected (C++23, absent on g++ 12
// in C++20 mode). Error codes know nothing of HTTP; src/http maps them to statuses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

enum class ErrorCode {
  /// The input is malformed (bad UTF-8, unknown TTL, empty body). Retrying the same input cannot
  /// help.
  kInvalidArgument,
  /// The thing is absent, expired, deleted, or the caller may not know it exists. Not retryable.
  kNotFound,
  /// The request did not declare a bounded length. Retrying with a Content-Length helps.
  kLengthRequired,
  /// The declared or actual size is over the limit. Retrying the same body cannot help.
  kTooLarge,
  /// A rate limit said no. Retrying after `retry_after_seconds` helps.
  kResourceExhausted,
  /// A cap or a dependency said no: shed, refused, broken. Retrying later may help; never at once.
  kUnavailable,
  /// We stopped waiting; the work may still be running. Never retried by the caller.
  kDeadlineExceeded,
  /// A bug or an unexpected dependency answer. Not retryable by the app.
  kInternal,
  /// The operator's storage quota is reached. Retrying after `retry_after_seconds` may help, once
  /// pastes expire or are deleted.
  kInsufficientStorage,
  /// The operator refused this client (a block). Retrying cannot help until the block ends.
  kPermissionDenied,
  /// Moderation withholds the thing: under review after reports, or taken down (HTTP 451).
  kWithheld,
};

/// The name of a code as it appears in JSON bodies and logs ("not_found").
const char* ErrorCodeName(ErrorCode code);

/// The limit that refused a request, for the RateLimit-Policy and RateLimit fields (IETF httpapi
/// draft): a token bucket seen as a quota `quota` refilled over `window_seconds`.
struct LimitInfo {
  std::string name;
  double quota = 0;
  double window_seconds = 0;
  double remaining = 0;
  /// Seconds until the request could pass.
  int64_t reset_seconds = 0;
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  /// For a person: what happened and, where useful, what to do.
  std::string message;
  /// For a machine: the limit or cause (`ip_create_count`, `create_slots`, `storage_unavailable`).
  std::string reason;
  /// Seconds after which a retry may succeed; set on 429 and 503 style errors.
  std::optional<int> retry_after_seconds;
  /// True only when the request provably never left this process (connect refused before send).
  /// The one case where a single retry cannot double the work on the other side.
  bool never_sent = false;
  /// Set on rate-limit refusals: which limit, its quota and what is left.
  std::optional<LimitInfo> limit;
  /// Set on a 429 that a proof of work would lift (docs/overload.md, "Proof of work"): the
  /// challenge to solve, as its JSON object.
  std::optional<std::string> challenge{};
};

inline Error MakeError(ErrorCode code, std::string message, std::string reason = {}) {
  return Error{code,  std::move(message), std::move(reason), std::nullopt,
               false, std::nullopt,       std::nullopt};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

inline Status Ok() { return Status(); }

}  // namespace sluice
