// An abuse notice read from an e-mail (`sluice admin notice --email`, so a mail server can pipe an
// abuse mailbox into it): RFC 5322 headers, MIME multipart, quoted-printable and base64 text
// parts, read by GMime (Debian's libgmime-3.0) rather than by hand, since real abuse desks send
// every shape of MIME there is. Nothing here talks to the server; the CLI sends what it found as
// a notice (docs/moderation.md, "Notices").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.h"

namespace sluice::notice {

/// Largest e-mail read: an abuse notice is text and a few links; a larger one is refused whole
/// rather than read in part.
inline constexpr size_t kMaxEmailBytes = size_t{1} << 20;

struct EmailNotice {
  /// The From mailbox's address ("abuse@hoster.example").
  std::string sender;
  /// The Message-ID, without its angle brackets; empty when the message has none.
  std::string message_id;
  std::string subject;
  /// Paste ids named by links in the text parts (service::PasteLinksIn), each once, in order.
  std::vector<std::string> pastes;
};

/// InvalidArgument (reason bad_email) for a message over kMaxEmailBytes, one GMime cannot read as
/// a message, or one without a From mailbox; a message whose text names no paste is read (its
/// `pastes` empty): the caller decides.
Result<EmailNotice> ParseNoticeEmail(std::string_view message);

}  // namespace sluice::notice
