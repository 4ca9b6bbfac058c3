// Who may create (docs/admission.md, "Who may create"): the policy an operator sets with
// `create_access`, the creator a request names, and the one decision between them. Reads are
// never asked: they stay public in every mode.
//
// `Creator` is the one place that says who a create is from and which key its per-key budgets are
// kept under: an address, a forward-auth name, or a creator token (docs/admission.md, "Creator
// tokens"), each one more field here and one more line in `BudgetKey` and `HoldsCredential`, not
// a new path through the service.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/admission/prefix_set.h"
#include "sluice/admission/token_bucket.h"

namespace sluice::admission {

/// Who may create. kAnyone is the default: anonymous creation, limited by the per-key budgets.
enum class CreateAccess {
  kAnyone,
  /// Only creators who hold a credential: a creator token, or a name from the trusted forward-auth
  /// header.
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

/// The budget of a creator token: its own rate and burst of creates and, if it has them, of
/// bytes (else the per-address byte budget's numbers, kept under the token's key).
struct TokenBudget {
  TokenBucketPolicy count;
  std::optional<TokenBucketPolicy> bytes;
};

/// A creator token as a create presents it, looked up by its secret's hash (never the secret).
struct PresentedToken {
  /// The token's public id (8 base62 characters) and the operator's label for it (valid by
  /// IsValidForwardedUser, at most 64 bytes).
  std::string id;
  std::string label;
  TokenBudget budget;
};

/// Who a create is from. A value type.
struct Creator {
  /// The client key of its address (ClientKey): the socket peer or the trusted balancer's hop.
  std::string address_key;
  /// The name a trusted forward-auth header gave (valid by IsValidForwardedUser); empty: none.
  std::string forwarded_user;
  /// The creator token it presented and that was found in force; none: no token. A token names
  /// the creator before a forward-auth name does: it is the credential the client chose to send.
  std::optional<PresentedToken> token;

  /// The key its per-key budgets (buckets, create slots per client and per network) and the abuse
  /// view are kept under: "token:LABEL/ID" for a token holder, "user:NAME" for a named creator, so
  /// each has budgets of its own instead of its address's (and many names behind one gateway do
  /// not share one address's), still inside the global caps; else the address key. None can be
  /// taken for another kind: "token:" and "user:" hold a colon no IPv4 key has, no IPv6 key starts
  /// with "t" or "u", and a name holds no colon. The label makes the key readable in the heavy
  /// hitters; the id keeps two tokens of one label apart. Pure.
  std::string BudgetKey() const;
  /// True if it holds a credential that `tokens` accepts.
  bool HoldsCredential() const { return token.has_value() || !forwarded_user.empty(); }
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
