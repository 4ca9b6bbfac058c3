// The vocabulary shared by the stores and the service: paste ids and metadata rows.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::store {

/// A validated paste id: exactly 12 characters of [0-9A-Za-z]. Only Parse and the minting code make
/// one, so an id that reaches a file name or an object key has always been checked.
class PasteId {
 public:
  static constexpr size_t kLength = 12;

  /// Returns nothing unless `text` is exactly 12 base62 characters.
  static std::optional<PasteId> Parse(std::string_view text);

  std::string_view view() const { return std::string_view(chars_.data(), kLength); }
  std::string str() const { return std::string(view()); }

  friend bool operator==(const PasteId&, const PasteId&) = default;
  friend auto operator<=>(const PasteId&, const PasteId&) = default;

 private:
  PasteId() = default;
  std::array<char, kLength> chars_{};
};

/// SHA-256 of a delete token. The token itself is never stored.
using TokenHash = std::array<unsigned char, 32>;

/// SHA-256 of a paste body, recorded in its row at create so a read can tell the body the store
/// returned from the one that was acknowledged.
using BodyDigest = std::array<unsigned char, 32>;

/// What moderation did to a paste (docs/moderation.md): nothing, withheld pending review
/// (enough distinct clients reported it), taken down by an operator, or withheld by a notice (a
/// hosting abuse desk's, a registrar's, an authority's) until the operator acts. All but the
/// first are answered 451, never the text. Stored as the number: append only.
enum class Moderation { kNone = 0, kWithheld = 1, kTakenDown = 2, kWithheldNotice = 3 };
/// The largest stored value a row's moderation may hold (older values read as kNone).
inline constexpr int64_t kMaxModeration = 3;

/// One metadata row. Times are Unix seconds.
struct PasteMeta {
  PasteId id;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  uint64_t size_bytes = 0;
  TokenHash token_hash{};
  /// A tombstone: deleted by its owner; the body may still be on its way out.
  bool deleted = false;
  /// SHA-256 of the body. Empty on rows written before checksums were recorded: their body is
  /// checked by size alone.
  std::optional<BodyDigest> body_sha256;
  /// Burn after reading: one reader gets the text through MetaStore::Claim, and then the row is a
  /// tombstone. Never served by a plain read, never cached (src/service/paste_service_read.cc).
  bool burn = false;
  /// Of a burn row: the readers still to get the text (max_views at create, 1 for burn after
  /// reading). Each MetaStore::Claim takes one, atomically across processes; the claim that takes
  /// the last one makes the row a tombstone. Meaningless on a row that is not burn.
  uint32_t views_left = 1;
  /// The paste this one was forked from (GET /new?from=ID, then a create naming it), for the
  /// view's "forked from" and its diff; none on a paste made from scratch and on older rows.
  std::optional<PasteId> parent{};
  /// Withheld or taken down pastes are never served, whatever `deleted` says.
  Moderation moderation = Moderation::kNone;
  /// The network the paste was created from, packed (admission::PackNetwork), so that reports
  /// from it never withhold it (docs/moderation.md). Empty on rows from before it was recorded.
  std::optional<uint64_t> creator_network{};
  /// End-to-end encrypted (docs/encryption.md): the body is an envelope the server cannot open.
  /// Served as it is (application/json), never highlighted or previewed.
  bool encrypted = false;
};

/// What the background worker owes the outside world after a commit (at least once).
struct OutboxEntry {
  int64_t seq = 0;
  PasteId id;
  /// kPurgeEdge: only the edge's copies go (a withheld paste keeps its body for review).
  enum class Kind { kDeleteBody, kPurgeEdge } kind = Kind::kDeleteBody;
  int attempts = 0;
  int64_t next_attempt_at = 0;
};

/// A stored body as listed for the orphan reaper.
struct BlobInfo {
  PasteId id;
  /// Last write, in Unix seconds; nothing when the store could not say. The reaper deletes only
  /// what it can date (src/worker/janitor.cc), so a store must never fill in a guess here.
  std::optional<int64_t> modified_at;
};

}  // namespace sluice::store
