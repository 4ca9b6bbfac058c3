// The request id and the access log (docs/operations.md, "Logs"): an id taken from a trusted
// proxy's X-Request-Id or minted, echoed on the answer and written on the request's access log
// line.
#pragma once

#include <string>
#include <string_view>

#include "sluice/admission/client_key.h"

namespace sluice::http {

/// The request id: the X-Request-Id a trusted proxy sent, if it is 1-128 characters of
/// [A-Za-z0-9._:+/=-]; otherwise a new one (16 hex digits). A client that is not a trusted proxy
/// cannot choose its id, so it cannot make its lines look like another request's.
std::string RequestIdFor(std::string_view header, const std::string& peer,
                         const admission::TrustedProxies& trusted);

/// What the access log keeps of a client key: IPv4 to its /24, IPv6 (a /64 key) to its /48,
/// enough to tell a flood's network apart and no more.
std::string ClientKeyPrefix(std::string_view key);

struct AccessEntry {
  std::string_view request_id;
  std::string_view method;
  std::string_view route;
  unsigned status = 0;
  std::string_view reason;
  std::string_view client_key;
  double seconds = 0;
};

/// Whether this answer gets a line: every 5xx, and `sample` of the others, drawn at random.
bool AccessLogWants(unsigned status, double sample);
/// Writes the line: fields after the message as key=value, or as JSON keys with log_format json.
void LogAccess(const AccessEntry& entry);

}  // namespace sluice::http
