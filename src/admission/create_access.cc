#include "sluice/admission/create_access.h"

#include <array>
#include <utility>

namespace sluice::admission {

namespace {

constexpr std::array<std::pair<CreateAccess, std::string_view>, 4> kNames = {{
    {CreateAccess::kAnyone, "anyone"},
    {CreateAccess::kTokens, "tokens"},
    {CreateAccess::kNetworks, "networks"},
    {CreateAccess::kTokensOrNetworks, "tokens_or_networks"},
}};

bool InNetworks(const CreateAccessPolicy& policy, std::string_view address_key) {
  if (!policy.networks) return false;
  // An IPv4 key is an address, an IPv6 key its /64 ("2001:db8:1:2::/64"): Cidr reads both.
  const std::optional<Cidr> key = Cidr::Parse(address_key);
  return key && policy.networks->Contains(key->base);
}

}  // namespace

std::string_view CreateAccessName(CreateAccess access) {
  for (const auto& [mode, name] : kNames) {
    if (mode == access) return name;
  }
  return "anyone";
}

std::optional<CreateAccess> ParseCreateAccess(std::string_view name) {
  for (const auto& [mode, known] : kNames) {
    if (known == name) return mode;
  }
  return std::nullopt;
}

bool IsValidForwardedUser(std::string_view name) {
  if (name.empty() || name.size() > kMaxForwardedUserBytes) return false;
  for (const char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '.' && c != '_' && c != '@' && c != '+' && c != '-') return false;
  }
  return true;
}

std::string Creator::BudgetKey() const {
  if (token) return "token:" + token->label + "/" + token->id;
  if (!forwarded_user.empty()) return "user:" + forwarded_user;
  return address_key;
}

AccessVerdict DecideCreateAccess(const CreateAccessPolicy& policy, const Creator& creator) {
  switch (policy.mode) {
    case CreateAccess::kAnyone:
      return AccessVerdict::kAllowed;
    case CreateAccess::kTokens:
      return creator.HoldsCredential() ? AccessVerdict::kAllowed
                                       : AccessVerdict::kCredentialRequired;
    case CreateAccess::kNetworks:
      return InNetworks(policy, creator.address_key) ? AccessVerdict::kAllowed
                                                     : AccessVerdict::kNetworkNotAllowed;
    case CreateAccess::kTokensOrNetworks:
      return creator.HoldsCredential() || InNetworks(policy, creator.address_key)
                 ? AccessVerdict::kAllowed
                 : AccessVerdict::kCredentialRequired;
  }
  return AccessVerdict::kCredentialRequired;
}

}  // namespace sluice::admission
