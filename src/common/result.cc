#include "sluice/common/result.h"

namespace sluice {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kLengthRequired:
      return "length_required";
    case ErrorCode::kTooLarge:
      return "too_large";
    case ErrorCode::kResourceExhausted:
      return "rate_limited";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kInsufficientStorage:
      return "insufficient_storage";
    case ErrorCode::kPermissionDenied:
      return "forbidden";
    case ErrorCode::kWithheld:
      return "withheld";
  }
  return "internal";
}

}  // namespace sluice
