// The JSON create of POST /api/v1/pastes ({"content": "...", "ttl": "1d", "language": "python",
// "burn": true, "encrypted": true}),
// decoded strictly: the envelope is a flat object of strings, and anything else is refused with a
// reason before the service sees the text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/result.h"

namespace sluice::http {

struct JsonCreate {
  std::string content;
  std::optional<std::string> ttl;
  std::optional<std::string> language;
  /// "burn": true (a JSON boolean; the only field that is not a string).
  bool burn = false;
  /// "encrypted": true: `content` is an encrypted envelope (docs/encryption.md).
  bool encrypted = false;
  /// "max_views": N (a JSON integer, 1 to service::kMaxViews; checked by the service).
  std::optional<uint64_t> max_views;
  /// "parent": the id of the paste this one is forked from (checked by the service).
  std::optional<std::string> parent;
};

/// True for application/json and text/json (pastebinit's JSON mode sends the latter), with or
/// without parameters, in any case.
bool IsJsonContentType(std::string_view content_type);

/// InvalidArgument (reason "bad_json") for a body that is not one flat object of the known
/// fields: malformed JSON, nesting, a value that is not a string (which covers huge numbers), a
/// duplicate or unknown key, a NUL escape, a lone surrogate escape, or a missing `content`.
Result<JsonCreate> DecodeJsonCreate(std::string_view body);

}  // namespace sluice::http
