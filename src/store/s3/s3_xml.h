// The S3 XML the blob store reads and writes: a ListObjectsV2 page, an error body, and the request
// and answer of DeleteObjects (POST /BUCKET?delete).
//
// A minimal reader rather than an XML library on purpose: S3 answers are flat, machine-written and
// fixed in shape, and the store needs a few elements of each. It still decodes what S3 escapes
// (the five entities and numeric references), so a key comes back byte-exact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::store::s3 {

struct ListedObject {
  std::string key;
  /// Unix seconds from LastModified; nothing if absent or unreadable, never a guess: the reaper
  /// deletes by age, and a body it cannot date must look young rather than old.
  std::optional<int64_t> modified_at;
  uint64_t size = 0;
};

struct ListPage {
  std::vector<ListedObject> objects;
  bool truncated = false;
};

/// Parses a ListBucketResult. Returns nothing if `xml` is not one.
std::optional<ListPage> ParseListObjectsV2(std::string_view xml);

/// The Code and Message of an S3 <Error> body; empty strings if absent.
struct S3ErrorBody {
  std::string code;
  std::string message;
};
S3ErrorBody ParseErrorBody(std::string_view xml);

/// DeleteObjects accepts at most this many keys per request.
inline constexpr size_t kMaxKeysPerDelete = 1000;

/// The body of a quiet DeleteObjects request for `keys` (each XML-escaped): the answer then lists
/// only the keys that failed. The caller keeps `keys` to kMaxKeysPerDelete.
std::string DeleteObjectsBody(const std::vector<std::string>& keys);

/// One key a DeleteObjects answer says it could not delete.
struct DeleteError {
  std::string key;
  std::string code;
  std::string message;
};

struct DeleteResult {
  /// In the order of the answer. Keys listed as <Deleted> (peers that ignore Quiet) are not kept.
  std::vector<DeleteError> errors;
};

/// Parses a DeleteResult. Returns nothing if `xml` is not one, or if an <Error> in it is
/// malformed (no Code, or an undecodable Key or Code): an answer we cannot read is no proof that
/// a body went.
std::optional<DeleteResult> ParseDeleteResult(std::string_view xml);

/// Escapes the five characters XML reserves (& < > " '). Bytes are passed through otherwise: keys
/// here are built from a configured prefix and paste ids.
std::string XmlEscape(std::string_view text);

/// Replaces XML entities and character references by the characters they stand for. Returns
/// nothing on a malformed or unknown reference.
std::optional<std::string> XmlUnescape(std::string_view text);

/// Unix seconds of an ISO 8601 time such as 2015-08-30T12:36:00.000Z (Z or a +HH:MM offset, any
/// fraction, which is dropped); nothing if malformed or out of range.
std::optional<int64_t> ParseIso8601(std::string_view text);

/// Unix seconds of an RFC 1123 (HTTP) time such as "Sun, 06 Nov 1994 08:49:37 GMT", which some
/// S3-compatible stores put in LastModified; nothing if malformed or out of range.
std::optional<int64_t> ParseRfc1123(std::string_view text);

/// LastModified in either form above; nothing otherwise.
std::optional<int64_t> ParseLastModified(std::string_view text);

}  // namespace sluice::store::s3
