#include "sluice/admission/reputation_feed.h"

#include <optional>

namespace sluice::admission {

namespace {

constexpr size_t kMaxNameBytes = 64;

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

Error Invalid(std::string_view entry, std::string_view why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "feed '" + std::string(entry) + "': " + std::string(why));
}

}  // namespace

std::string FeedAction::Name() const {
  switch (kind) {
    case FeedActionKind::kRefuse:
      return "refuse";
    case FeedActionKind::kClass:
      return "class:" + budget_class;
    case FeedActionKind::kChallenge:
      return "challenge";
  }
  return "refuse";
}

Result<FeedSpec> ParseFeedSpec(std::string_view entry) {
  const size_t equals = entry.find('=');
  if (equals == std::string_view::npos) {
    return Invalid(entry, "write NAME=ACTION:PATH, e.g. drop=refuse:/etc/sluice/drop.txt");
  }
  FeedSpec spec;
  spec.name = std::string(entry.substr(0, equals));
  if (!IsValidName(spec.name)) {
    return Invalid(entry, "the name must be 1 to 64 of a-z, 0-9, '_' and '-'");
  }
  std::string_view rest = entry.substr(equals + 1);
  if (rest.starts_with("refuse:")) {
    spec.action.kind = FeedActionKind::kRefuse;
    rest.remove_prefix(7);
  } else if (rest.starts_with("challenge:")) {
    spec.action = {FeedActionKind::kChallenge, "challenge"};
    rest.remove_prefix(10);
  } else if (rest.starts_with("class:")) {
    rest.remove_prefix(6);
    const size_t colon = rest.find(':');
    spec.action = {FeedActionKind::kClass, std::string(rest.substr(0, colon))};
    if (colon == std::string_view::npos || !IsValidName(spec.action.budget_class)) {
      return Invalid(entry, "write class:CLASS:PATH, CLASS 1 to 64 of a-z, 0-9, '_' and '-'");
    }
    rest.remove_prefix(colon + 1);
  } else {
    return Invalid(entry, "the action must be refuse, class:CLASS or challenge");
  }
  if (rest.empty()) return Invalid(entry, "the file's path is missing after the action");
  spec.path = std::string(rest);
  return spec;
}

int FeedSet::Match(std::string_view address_key) const {
  if (feeds_.empty()) return -1;
  // An IPv4 key is an address, an IPv6 key its /64 ("2001:db8:1:2::/64"): Cidr reads both.
  const std::optional<Cidr> key = Cidr::Parse(address_key);
  if (!key) return -1;
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (feeds_[i].networks->Contains(key->base)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace sluice::admission
