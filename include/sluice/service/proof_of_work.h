// Proof of work as a rung of the create ladder (docs/overload.md, "Proof of work"): when the
// anonymous share of the global create budget is spent, a create is answered 429 with a challenge
// instead of a flat refusal, and a create that carries its solution draws on the share reserved
// for solvers. A flood of many addresses, each under its own limit, then pays a hash search per
// create or stays out, while a person who spends a second of CPU gets through.
//
// The format is ALTCHA's (https://altcha.org, its "challenge" and base64 JSON "payload"), so a
// client that already solves ALTCHA solves this: the server picks a secret number in
// [0, maxnumber], publishes SHA-256(salt + number) as the challenge and an HMAC of it, and the
// client searches for the number. The salt carries the expiry, so the server keeps nothing per
// challenge it issues: a solution is checked by one HMAC and one hash, and only a valid one is
// remembered (until its expiry) so that it buys one create.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "sluice/common/clock.h"

namespace sluice::service {

/// A challenge as the client receives it.
struct PowChallenge {
  std::string algorithm;  // always "SHA-256"
  /// Hex SHA-256 of salt + the secret number in decimal.
  std::string challenge;
  uint64_t maxnumber = 0;
  /// Random hex, then "?expires=UNIX_SECONDS": ALTCHA's convention, covered by the hash.
  std::string salt;
  /// Hex HMAC-SHA256 of `challenge` under the server's key.
  std::string signature;

  /// The JSON object of the 429's `challenge` field (docs/api.md).
  std::string ToJson() const;
  /// The challenge of that JSON object; nullopt if a field is missing or of the wrong type.
  static std::optional<PowChallenge> FromJson(std::string_view json);
};

/// Why a solution was refused, or that it was taken.
enum class PowVerdict {
  kValid,
  /// Not base64 of a JSON object with the five fields, or another algorithm.
  kMalformed,
  /// Past the expiry its salt names.
  kExpired,
  /// Its signature is not this server's: a challenge it did not issue, or one edited.
  kForged,
  /// The number does not hash to the challenge.
  kWrong,
  /// Already spent on a create.
  kReplayed,
  /// The spent-solution memory is full of unexpired entries: refused rather than forgotten.
  kBusy,
};

/// "valid", "malformed", ...: the metrics' and the refusal reasons' names.
std::string_view PowVerdictName(PowVerdict verdict);

struct ProofOfWorkOptions {
  /// How long a challenge may be solved and spent. Default: 5 minutes.
  std::chrono::seconds expiry{300};
  /// Spent solutions remembered at most (each until its expiry). Default: 100,000.
  size_t max_spent = 100'000;
};

/// Issues challenges and redeems solutions. Thread-safe: Issue touches no shared state, Redeem
/// takes a mutex around the spent set only after a solution's crypto has passed.
class ProofOfWork {
 public:
  /// `key`: the HMAC key, at least 16 bytes; every process of a fleet needs the same one to take
  /// each other's challenges.
  ProofOfWork(std::string key, ProofOfWorkOptions options, const Clock& clock);

  /// A new challenge whose secret number is uniform in [0, maxnumber].
  PowChallenge Issue(uint64_t maxnumber) const;

  /// Checks `payload` (ALTCHA's base64 of {"algorithm","challenge","number","salt","signature"};
  /// standard or URL-safe alphabet) and, if valid, spends it: the same payload again is kReplayed
  /// until it expires, after which it is kExpired. Order: shape, expiry, signature, hash, spent
  /// set, so what is remembered is only what this server issued and someone solved.
  PowVerdict Redeem(std::string_view payload);

  /// Spent solutions remembered now (the metric's gauge).
  size_t Spent() const;

 private:
  std::string Sign(std::string_view challenge) const;
  void ForgetExpired(int64_t now);

  const std::string key_;
  const ProofOfWorkOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::unordered_set<std::string> spent_;
  std::multimap<int64_t, std::string> spent_by_expiry_;
};

/// The maxnumber to ask for, from the base difficulty and how full the solvers' share of the
/// global budget is (0 empty, 1 full): the base while at least half is left, then doubled at each
/// halving of what is left (a quarter, an eighth) up to 8x, so a flood that solves drains the share
/// more slowly the harder it pushes. Pure.
uint64_t PowDifficulty(uint64_t base, double solver_share_left);

/// The secret number a solver finds, or nullopt past `maxnumber`: what `sluice paste` and the
/// tests run. Costs up to maxnumber + 1 hashes.
std::optional<uint64_t> SolvePow(const PowChallenge& challenge);

/// The payload that carries a solution (the format Redeem takes).
std::string PowPayload(const PowChallenge& challenge, uint64_t number);

}  // namespace sluice::service
