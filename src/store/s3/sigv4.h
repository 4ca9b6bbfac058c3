// AWS Signature Version 4 for S3 requests, and the few string helpers it needs.
//
// Written here rather than taken from a library on purpose: Debian ships no AWS SDK, and signing is
// small (a canonical request, a string to sign, four HMACs). It is checked against the published
// AWS SigV4 test-suite vector and the S3 documentation example in tests/unit/store/sigv4_test.cc,
// and against a real S3-compatible peer in tests/backend/.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::store::s3 {

/// The parts of one request that the signature covers. Names of headers may be in any case; the
/// signer lowercases and sorts them. Every header given here is signed.
struct SigV4Request {
  std::string method;
  /// The path as sent on the wire, already URI-encoded (S3 encodes each key segment once).
  std::string encoded_path;
  /// Query parameters, not yet encoded.
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;
  /// Lowercase hex SHA-256 of the body, also sent as x-amz-content-sha256 for S3.
  std::string payload_sha256;
};

struct SigV4Key {
  std::string access_key;
  std::string secret_key;
  std::string region;
  std::string service;
};

/// Percent-encodes everything but the RFC 3986 unreserved characters (and '/' if `keep_slash`),
/// with uppercase hex, as SigV4 requires.
std::string UriEncode(std::string_view text, bool keep_slash);

/// Lowercase hex of SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

/// Base64 of the MD5 of `data`: the Content-MD5 header that S3 requires on DeleteObjects (an
/// integrity check of the body, not a security measure).
std::string Md5Base64(std::string_view data);

/// The canonical request (SigV4 task 1).
std::string CanonicalRequest(const SigV4Request& request);

/// The string to sign (task 2). `amz_date` is YYYYMMDDTHHMMSSZ.
std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request);

/// The derived signing key (task 3), raw bytes.
std::string SigningKey(std::string_view secret_key, std::string_view date, std::string_view region,
                       std::string_view service);

/// The Authorization header value for `request` signed at `amz_date` (task 4).
std::string Authorization(const SigV4Request& request, const SigV4Key& key,
                          std::string_view amz_date);

/// The canonical query string: encoded pairs sorted by name, then value, joined by '&'.
std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query);

/// x-amz-date for the given Unix time: YYYYMMDDTHHMMSSZ in UTC.
std::string AmzDate(int64_t unix_seconds);

}  // namespace sluice::store::s3
