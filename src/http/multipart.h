// A small multipart/form-data reader (RFC 7578) for `curl -F file=@f` and the browser form. Hand
// written because no Debian-packaged C++ library parses a form from memory, and the need is narrow:
// named parts of a body that is already fully read and bounded.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::http {

struct FormPart {
  std::string name;
  std::optional<std::string> filename;
  std::string_view content;  // points into the parsed body
};

/// True when a Content-Type names a multipart/* media type (RFC 2046), whatever its parameters.
bool IsMultipart(std::string_view content_type);

/// The boundary parameter of a multipart/form-data Content-Type, or nothing if it is not one.
std::optional<std::string> MultipartBoundary(std::string_view content_type);

/// Splits `body` into its parts; nothing if the framing is malformed.
std::optional<std::vector<FormPart>> ParseMultipart(std::string_view body,
                                                    std::string_view boundary);

}  // namespace sluice::http
