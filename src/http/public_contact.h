// The public contact (docs/moderation.md, "The public contact"): /.well-known/security.txt
// (RFC 9116), /robots.txt, the /abuse page and the abuse contact in every page's footer, all made
// from the settings (ContactOptions, sluice/http/server.h) once at start. A pastebin whose operator
// cannot be reached gets its abuse notices sent to its host and registrar instead, which is how
// public pastebins lose their domain; so the surface is there by default and says honestly what
// the operator has not set.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "page_catalog.h"
#include "sluice/http/server.h"

namespace sluice::http {

/// One contact as a page shows it: the link and its text ("abuse@paste.example" for
/// mailto:abuse@paste.example).
struct ContactLink {
  std::string url;
  std::string text;
};

/// Immutable once made; thread-safe.
class PublicContact {
 public:
  /// `public_url` (may be empty): security.txt names its Canonical and Policy URIs only when it is
  /// https://, as RFC 9116 3 requires of both.
  PublicContact(ContactOptions options, std::string_view public_url);

  /// The contact every page's footer shows: the one the public listener installed at start, else
  /// the defaults (no contact). A process-wide value because the footer is drawn by the pages'
  /// free functions, the presenter's error pages among them, which have no Context; it never
  /// changes while a listener serves (the settings are restart-only, docs/operations.md).
  static const PublicContact& Current();
  /// Makes `contact` Current(). Call before the listener accepts; an earlier one stays alive
  /// (a test process may start several servers), so a page being drawn never loses its contact.
  static void Install(std::shared_ptr<const PublicContact> contact);

  const ContactOptions& options() const { return options_; }
  const std::vector<ContactLink>& links() const { return links_; }
  /// The first contact, for the footer; nullptr when none is set.
  const ContactLink* footer() const { return links_.empty() ? nullptr : &links_.front(); }
  /// True when security.txt is served (a contact is set).
  bool has_security_txt() const { return !links_.empty(); }

  /// /robots.txt, made once.
  const std::shared_ptr<const std::string>& RobotsTxt() const { return robots_txt_; }
  /// /.well-known/security.txt as served on the UTC day of `now_unix` (its Expires counts from
  /// that day's start); nullptr when no contact is set. Made once per day and thread.
  std::shared_ptr<const std::string> SecurityTxt(int64_t now_unix) const;
  /// The text of security.txt for the day starting at `day_start_unix` (for SecurityTxt, tests).
  std::string SecurityTxtFor(int64_t day_start_unix) const;

 private:
  ContactOptions options_;
  // Names this contact in the threads' made answers: an address may be reused by a later one.
  uint64_t serial_;
  std::vector<ContactLink> links_;
  std::string canonical_;  // https://HOST/.well-known/security.txt, or empty
  std::string policy_;     // https://HOST/abuse, or empty
  std::shared_ptr<const std::string> robots_txt_;
};

/// What a contact URI shows as text: a mailto: or tel: URI without its scheme (and a mailto:'s
/// query), an https:// URI as it is.
std::string ContactText(std::string_view uri);

}  // namespace sluice::http
