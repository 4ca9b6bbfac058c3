#include "framing.h"

#include <algorithm>

namespace sluice::http {

namespace {

constexpr std::string_view kCrlf = "\r\n";

// tchar of RFC 9110 5.6.2: what a method or a coding name may be made of.
bool IsTchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

HeadScan Refuse(unsigned status, std::string_view message) {
  HeadScan scan;
  scan.state = HeadScan::State::kRefuse;
  scan.status = status;
  scan.message = message;
  return scan;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

}  // namespace

HeadScan ScanHead(std::string_view bytes, const HeadLimits& limits) {
  // RFC 9112 2.2: a server SHOULD ignore at least one empty line received before the request line
  // (some clients send a CRLF after a POST body). They count against the head's limit, so a stream
  // of empty lines is cut like any other oversized head.
  size_t skip = 0;
  while (bytes.substr(skip).starts_with(kCrlf)) skip += kCrlf.size();
  if (skip >= limits.head) return Refuse(431, "the request head is larger than 16 KB");
  const std::string_view rest = bytes.substr(skip);
  if (rest == "\r") return HeadScan{};

  // Bytes that cannot start a request line are refused at once rather than after a timeout: a
  // TLS handshake or a stray protocol is not going to turn into HTTP.
  for (const char c : rest) {
    if (c == ' ') break;
    if (!IsTchar(c)) return Refuse(400, "malformed request: bad method");
  }

  // The head ends at the first empty line; what follows it (a body) is not the head's business.
  const size_t end = rest.find("\r\n\r\n");
  const size_t head_length = end == std::string_view::npos ? std::string_view::npos : end + 4;
  const std::string_view head = rest.substr(0, head_length);

  // A bare LF ends a line for some parsers and not for others: refused (RFC 9112 2.2 allows it).
  for (size_t at = head.find('\n'); at != std::string_view::npos; at = head.find('\n', at + 1)) {
    if (at == 0 || head[at - 1] != '\r') {
      return Refuse(400, "malformed request: a line ends in a bare LF");
    }
  }

  const size_t line_end = rest.find(kCrlf);
  const size_t line_length = line_end == std::string_view::npos ? rest.size() : line_end;
  if (line_length > limits.request_line) {
    return Refuse(414, "the request line (its target) is longer than 8 KB");
  }
  if (line_end == std::string_view::npos) {
    if (skip + rest.size() > limits.head)
      return Refuse(431, "the request head is larger than 16 KB");
    return HeadScan{};
  }

  if ((head_length == std::string_view::npos ? skip + rest.size() : skip + head_length) >
      limits.head) {
    return Refuse(431, "the request head is larger than 16 KB");
  }
  // A field line starting with SP or HTAB continues the previous one (obs-fold). RFC 9112 5.2 lets
  // a server refuse it, and it must: a front end that does not unfold reads a different header
  // than one that does, which is a way to smuggle a field past it. Checked on the lines that have
  // arrived, so a fold is refused as soon as it is seen.
  const std::string_view fields =
      rest.substr(line_end + kCrlf.size(), head_length == std::string_view::npos
                                               ? std::string_view::npos
                                               : head_length - line_end - kCrlf.size());
  for (size_t at = 0; at < fields.size();) {
    if (fields[at] == ' ' || fields[at] == '\t') {
      return Refuse(400, "malformed request: a folded header line (obs-fold) is not accepted");
    }
    const size_t next = fields.find(kCrlf, at);
    if (next == std::string_view::npos) break;
    at = next + kCrlf.size();
  }
  if (head_length == std::string_view::npos) return HeadScan{};
  HeadScan scan;
  scan.state = HeadScan::State::kComplete;
  scan.skip = skip;
  scan.length = head_length;
  return scan;
}

std::optional<CodingProblem> CheckTransferCodings(const std::vector<std::string_view>& fields) {
  std::vector<std::string_view> codings;
  for (std::string_view field : fields) {
    // A list (RFC 9110 5.6.1): empty elements are allowed and ignored.
    for (size_t at = 0; at <= field.size();) {
      size_t comma = field.find(',', at);
      if (comma == std::string_view::npos) comma = field.size();
      std::string_view element = TrimOws(field.substr(at, comma - at));
      at = comma + 1;
      if (element.empty()) continue;
      // A coding's parameters (";q=..." and the like) belong to codings this server does not
      // implement anyway; the name is what decides.
      const std::string_view name = TrimOws(element.substr(0, element.find(';')));
      if (name.empty() || !std::all_of(name.begin(), name.end(), IsTchar)) {
        return CodingProblem{400, "a Transfer-Encoding that is not a list of codings"};
      }
      if (name.size() != element.size() && EqualsNoCase(name, "chunked")) {
        return CodingProblem{400, "chunked takes no parameters"};
      }
      codings.push_back(name);
    }
  }
  if (codings.empty()) return CodingProblem{400, "an empty Transfer-Encoding"};
  if (!EqualsNoCase(codings.back(), "chunked")) {
    return CodingProblem{400, "a Transfer-Encoding that does not end in chunked"};
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (EqualsNoCase(codings[i], "chunked")) {
      return CodingProblem{400, "chunked applied more than once"};
    }
  }
  if (codings.size() > 1) {
    return CodingProblem{501, "a transfer coding other than chunked, which is not implemented"};
  }
  return std::nullopt;
}

bool IsSingleLength(std::string_view value) {
  value = TrimOws(value);
  return !value.empty() &&
         std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace sluice::http
