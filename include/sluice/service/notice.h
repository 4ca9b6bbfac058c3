// A notice as the operator's tools send it (docs/moderation.md, "Notices"): who sent it, their
// reference, a category, the pastes it names (ids or links) and, when the sender gave one, a
// deadline. Parsed and bounded here, before any store call, so that the admin route, the CLI and
// the fuzz target (fuzz/notice_fuzz.cc) share one reading of it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::service {

/// The categories a notice may give. Append only: they are stored and counted by name.
inline constexpr std::array<std::string_view, 8> kNoticeCategories = {
    "copyright", "malware", "phishing", "personal_data", "illegal", "spam", "terrorism", "other"};

/// The kinds of sender a notice may give, for the transparency report's "notices by kind of
/// sender" (docs/moderation.md, "Transparency"). Append only: they are counted by name. A notice
/// that gives none is counted as kNoticeSenderUnclassified.
inline constexpr std::array<std::string_view, 5> kNoticeSenderKinds = {
    "hosting", "registrar", "authority", "rights_holder", "other"};
inline constexpr std::string_view kNoticeSenderUnclassified = "unclassified";

/// Pastes one notice may name: a notice is one sender's list, not a bulk interface.
inline constexpr size_t kMaxNoticePastes = 100;
/// Longest sender and reference, in bytes (a mail address, a Message-ID, a case number).
inline constexpr size_t kMaxNoticeField = 512;

struct NoticeRequest {
  std::string sender;
  std::string reference;
  std::string category;
  /// Paste ids, each once, in the order the notice named them.
  std::vector<std::string> pastes;
  /// Unix seconds; none when the sender gave no deadline.
  std::optional<int64_t> deadline_at{};
  /// One of kNoticeSenderKinds; empty: the sender did not say (counted as unclassified).
  std::string sender_kind{};
};

/// The paste id a link or a bare id names: "ID", "https://host/ID", ".../raw/ID",
/// ".../documents/ID", ".../api/v1/pastes/ID", ".../ID/diff", ".../ID/rendered", ".../new?from=ID"
/// (a query other than from= and any #fragment, such as an encrypted paste's key, ignored). None
/// for anything else.
std::optional<std::string> PasteIdOfLink(std::string_view link);

/// Every paste link in free text (an e-mail's body): http(s) URLs whose path names a paste as
/// PasteIdOfLink reads them, each id once, in order of appearance.
std::vector<std::string> PasteLinksIn(std::string_view text);

/// A deadline as a notice gives it: RFC 3339 ("2026-12-05T18:00:00Z", an offset, fractions of a
/// second ignored) or a duration from `now` ("1h", "90m", "2d"). InvalidArgument (bad_deadline).
Result<int64_t> ParseNoticeDeadline(std::string_view text, int64_t now);

/// `{"sender": "...", "sender_kind": "...", "reference": "...", "category": "...", "pastes":
/// ["ID or link", ...], "deadline": "RFC 3339 or duration"}`, strictly: InvalidArgument with a
/// reason naming the field (bad_json, bad_sender, bad_sender_kind, bad_reference, bad_category,
/// bad_pastes, too_many_pastes, bad_deadline)
/// for anything else. A paste that is neither an id nor a paste link is bad_pastes: the sender
/// gets told which, rather than the notice being half taken.
Result<NoticeRequest> ParseNoticeJson(std::string_view body, int64_t now);

/// Checks a request built elsewhere (the CLI's flags, the e-mail reader) as ParseNoticeJson
/// checks its fields, removing repeated pastes.
Status CheckNoticeRequest(NoticeRequest& request);

}  // namespace sluice::service
