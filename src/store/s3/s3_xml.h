// The two S3 XML answers the blob store reads: a ListObjectsV2 page and an error body.
//
// A minimal reader rather than an XML library on purpose: S3 answers are flat, machine-written and
// fixed in shape, and the store needs four elements of one and two of the other. It still decodes
// what S3 escapes (the five entities and numeric references), so a key comes back byte-exact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::store::s3 {

struct ListedObject {
  std::string key;
  /// Unix seconds from LastModified; 0 if absent or unreadable.
  int64_t modified_at = 0;
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

/// Replaces XML entities and character references by the characters they stand for. Returns
/// nothing on a malformed or unknown reference.
std::optional<std::string> XmlUnescape(std::string_view text);

/// Unix seconds of an ISO 8601 UTC time such as 2015-08-30T12:36:00.000Z; nothing if malformed.
std::optional<int64_t> ParseIso8601(std::string_view text);

}  // namespace sluice::store::s3
