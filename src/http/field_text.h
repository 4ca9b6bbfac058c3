// Small text helpers for header fields and their parameters, shared by the parsers of the request
// bodies (src/http/multipart.cc, src/http/json_create.cc).
#pragma once

#include <string_view>

namespace sluice::http {

/// `s` without the spaces and tabs (a field's optional whitespace, RFC 9110 5.6.3) around it.
inline std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace sluice::http
