// Who may create (docs/admission.md, "Who may create"): the policy an operator sets with
// `create_access`, the creator a request names, and the one decision between them. Reads are
// never asked: they stay public in every mode.
//
// `Creator` is the one place that says who a create is from and which key its per-key budgets are
// kept under, so that a credential of another kind (creator tokens, issue 46 item 2) is one more
// field here and one more line in `BudgetKey` and `HoldsCredential`, not a new path through the
// service.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/admission/prefix_set.h"

namespace sluice::admission {

/// Who may create. kAnyone is the default: anonymous creation, limited by the per-key budgets.
enum class CreateAccess {
  kAnyone,
  /// Only creators who hold a credential: today a name from the trusted forward-auth header.
  kTokens,
  /// Only creators whose address is in the allow-list of networks.
  kNetworks,
  /// Either of the two.
  kTokensOrNetworks,
};

/// "anyone", "tokens", "networks", "tokens_or_networks": the setting's and /api/v1/limits's names.
std::string_view CreateAccessName(CreateAccess access);
/// The mode of one of those names; nullopt for anything else.
std::optional<CreateAccess> ParseCreateAccess(std::string_view name);

/// The longest forward-auth name taken (a login, an e-mail address): longer is junk, refused.
inline constexpr size_t kMaxForwardedUserBytes = 128;

/// True if `name` may name a creator: 1 to kMaxForwardedUserBytes bytes of ASCII letters, digits
/// and `. _ @ + -` (what oauth2-proxy and VPN gateways put in X-Forwarded-User or
/// X-Forwarded-Email). Anything else (spaces, controls, quotes, non-ASCII) could not be told apart
/// from another name in a log line, a metric label or the heavy hitters, so it is refused rather
/// than cleaned. Pure function.
bool IsValidForwardedUser(std::string_view name);

/// Who a create is from. A value type.
struct Creator {
  /// The client key of its address (ClientKey): the socket peer or the trusted balancer's hop.
  std::string address_key;
  /// The name a trusted forward-auth header gave (valid by IsValidForwardedUser); empty: none.
  std::string forwarded_user;

  /// The key its per-key budgets (buckets, create slots per client and per network) and the abuse
  /// view are kept under: "user:NAME" for a named creator, so a name has budgets of its own
  /// instead of its address's (and many names behind one gateway do not share one address's),
  /// still inside the global caps; else the address key. A name can never be taken for an address
  /// key, nor an address key for a name: "user:" holds a colon no IPv4 key has, and no IPv6 key
  /// starts with "user". Pure.
  std::string BudgetKey() const;
  /// True if it holds a credential that `tokens` accepts.
  bool HoldsCredential() const { return !forwarded_user.empty(); }
};

/// The operator's policy. Immutable once built, shared by every thread; a reload builds another.
struct CreateAccessPolicy {
  /// Default: kAnyone.
  CreateAccess mode = CreateAccess::kAnyone;
  /// The networks that may create (create_networks and create_networks_file). Null: none.
  /// Default: null.
  std::shared_ptr<const PrefixSet> networks;
};

/// What DecideCreateAccess says.
enum class AccessVerdict {
  kAllowed,
  /// A credential would admit it (tokens, tokens_or_networks): the edge answers 401.
  kCredentialRequired,
  /// Only another network would (networks): the edge answers 403.
  kNetworkNotAllowed,
};

/// The decision. An address key that is an IPv6 /64 (ClientKeyOf) is in the allow-list when its
/// /64's first address is: every per-client decision sees IPv6 by /64, and so does this one. A key
/// that is no address (a Unix socket's) is in no network. Pure function.
AccessVerdict DecideCreateAccess(const CreateAccessPolicy& policy, const Creator& creator);

}  // namespace sluice::admission
