// The request head before Beast parses it: the checks RFC 9112 lets a server make on the raw bytes
// and Beast does not (or not exactly), each a status on the wire. Pure: bytes in, a verdict out, so
// tests/unit/http/framing_test.cc covers every branch without a socket. src/http/session.cc reads
// until ScanHead says the head is complete, then hands Beast only the head it approved.
//
// Why not Beast's header_limit: in Boost 1.81 (basic_parser.ipp) it bounds only the bytes one
// put() is given past what earlier calls consumed; complete field lines are consumed as they
// arrive, so a head read in several pieces is never counted whole (200 fields of 100 bytes, 21.9
// KB, passed a 16 KB limit), and it cannot tell a long target (414) from many fields (431).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::http {

struct HeadLimits {
  /// The request line (method, target, version): beyond it, 414.
  size_t request_line = 8 * 1024;
  /// The whole head, request line and fields with their CRLFs: beyond it, 431.
  size_t head = 16 * 1024;
};

struct HeadScan {
  enum class State {
    /// No verdict yet: read more (within the limits, which ScanHead has checked).
    kNeedMore,
    /// A head ends at `skip + length`; the bytes `[skip, skip + length)` are it.
    kComplete,
    /// Refuse with `status` and `message`, then close.
    kRefuse,
  };
  State state = State::kNeedMore;
  /// Empty lines before the request line (RFC 9112 2.2: ignored), in bytes.
  size_t skip = 0;
  /// The head's length after `skip`, through its final empty line.
  size_t length = 0;
  unsigned status = 0;
  std::string_view message;
};

/// Scans the bytes received so far of one request's head.
HeadScan ScanHead(std::string_view bytes, const HeadLimits& limits);

/// The transfer codings of a request, from every Transfer-Encoding field line in order: nothing
/// when they frame a body this server can read (exactly "chunked"), else the status and reason:
/// 400 for a list that is not a list of codings or whose final coding is not chunked (RFC 9112
/// 6.3: the length cannot be known), 501 for a coding before chunked that this server does not
/// implement (RFC 9112 6.1).
struct CodingProblem {
  unsigned status;
  std::string_view message;
};
std::optional<CodingProblem> CheckTransferCodings(const std::vector<std::string_view>& fields);

/// True when a Content-Length field value is one decimal number (RFC 9110 8.6), not a list.
bool IsSingleLength(std::string_view value);

}  // namespace sluice::http
