#include "public_contact.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <mutex>

#include "pages.h"

namespace sluice::http {

namespace {

// Pastes are links their creator hands to chosen readers, not publications: a search engine that
// indexes them turns the site into a finder of leaked keys and personal data, and gives spammers
// what they paste for (links that rank). So by default crawlers get the site's own pages and no
// paste. RFC 9309: the longest matching rule wins, so "Allow: /$" (the create page alone) beats
// "Disallow: /"; "$" ends a pattern (2.2.3), which keeps /abuse from also allowing a paste whose
// id starts with "abuse". A crawler that ignores "$" allows less, never more.
constexpr std::string_view kRobotsSite =
    "# sluice: crawlers may fetch the site's own pages, never a paste (setting robots)\n"
    "User-agent: *\n"
    "Allow: /$\n"
    "Allow: /abuse$\n"
    "Allow: /status$\n"
    "Allow: /static/\n"
    "Allow: /.well-known/security.txt$\n"
    "Disallow: /\n";
// Pastes too, but never the pages that act on one (a delete's or a report's form) or the API.
constexpr std::string_view kRobotsAll =
    "# sluice: crawlers may fetch pastes (setting robots)\n"
    "User-agent: *\n"
    "Disallow: /api/\n"
    "Disallow: /delete/\n"
    "Disallow: /report/\n"
    "Disallow: /claim/\n"
    "Disallow: /settings/\n"
    "Allow: /\n";
constexpr std::string_view kRobotsNone =
    "# sluice: no crawling (setting robots)\n"
    "User-agent: *\n"
    "Disallow: /\n";

std::string_view RobotsText(ContactOptions::Robots robots) {
  switch (robots) {
    case ContactOptions::Robots::kAll:
      return kRobotsAll;
    case ContactOptions::Robots::kNone:
      return kRobotsNone;
    case ContactOptions::Robots::kSite:
      break;
  }
  return kRobotsSite;
}

std::atomic<const PublicContact*> g_current{nullptr};
std::atomic<uint64_t> g_serials{0};

}  // namespace

std::string ContactText(std::string_view uri) {
  for (std::string_view scheme : {"mailto:", "tel:"}) {
    if (uri.starts_with(scheme)) {
      std::string_view rest = uri.substr(scheme.size());
      return std::string(rest.substr(0, rest.find('?')));
    }
  }
  return std::string(uri);
}

PublicContact::PublicContact(ContactOptions options, std::string_view public_url)
    : options_(std::move(options)),
      serial_(++g_serials),
      robots_txt_(std::make_shared<const std::string>(RobotsText(options_.robots))) {
  for (const std::string& uri : options_.contacts) links_.push_back({uri, ContactText(uri)});
  std::string_view base = public_url;
  while (base.ends_with('/')) base.remove_suffix(1);
  if (base.starts_with("https://")) {
    canonical_ = fmt::format("{}/.well-known/security.txt", base);
    policy_ = fmt::format("{}/abuse", base);
  }
}

const PublicContact& PublicContact::Current() {
  static const PublicContact defaults(ContactOptions{}, "");
  const PublicContact* current = g_current.load(std::memory_order_acquire);
  return current != nullptr ? *current : defaults;
}

void PublicContact::Install(std::shared_ptr<const PublicContact> contact) {
  static std::mutex mutex;
  static std::vector<std::shared_ptr<const PublicContact>> installed;
  const std::lock_guard lock(mutex);
  g_current.store(contact.get(), std::memory_order_release);
  installed.push_back(std::move(contact));
}

std::string PublicContact::SecurityTxtFor(int64_t day_start_unix) const {
  // RFC 9116 4: fields are "Name: value" lines; Contact may repeat, in order of preference;
  // Expires is one RFC 3339 time. Comments start with "#".
  std::string out =
      "# Security and abuse contact of this sluice server (RFC 9116). How to report a paste and\n"
      "# what is removed: /abuse\n";
  for (const ContactLink& link : links_) out += fmt::format("Contact: {}\n", link.url);
  const int64_t lifetime = options_.security_txt_lifetime.count();
  out += fmt::format("Expires: {}\n", FormatUnixTime(day_start_unix + lifetime));
  if (!options_.languages.empty()) {
    out += fmt::format("Preferred-Languages: {}\n", fmt::join(options_.languages, ", "));
  }
  if (!canonical_.empty()) out += fmt::format("Canonical: {}\n", canonical_);
  if (!policy_.empty()) out += fmt::format("Policy: {}\n", policy_);
  return out;
}

std::shared_ptr<const std::string> PublicContact::SecurityTxt(int64_t now_unix) const {
  if (links_.empty()) return nullptr;
  constexpr int64_t kDay = 86'400;
  const int64_t day_start = now_unix - ((now_unix % kDay) + kDay) % kDay;
  // Made again only when the day or the contact changes, so a flood of requests formats nothing.
  struct Made {
    uint64_t serial = 0;
    int64_t day_start = 0;
    std::shared_ptr<const std::string> text;
  };
  thread_local Made made;
  if (made.serial != serial_ || made.day_start != day_start || !made.text) {
    made = {serial_, day_start, std::make_shared<const std::string>(SecurityTxtFor(day_start))};
  }
  return made.text;
}

}  // namespace sluice::http
