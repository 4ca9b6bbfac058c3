// ReputationFeeds: the feeds in force (admission::FeedSet), the budgets of their classes and their
// counts (docs/admission.md, "Reputation feeds"). PasteService asks it once per anonymous create,
// right after who may create, before anything that costs (docs/overload.md, "Create").
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/keyed_limiter.h"
#include "sluice/admission/reputation_feed.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/common/clock.h"
#include "sluice/common/metrics.h"
#include "sluice/common/result.h"
#include "sluice/common/swappable.h"

namespace sluice::service {

/// The rates of every budget class (each class has buckets of its own with these numbers).
struct FeedClassRates {
  /// Creates per client key of a class, taken on top of the key's own ip_create budget, so the
  /// lower of the two binds. Default: one every 10 s, 3 at once.
  admission::TokenBucketPolicy per_key{0.1, 3};
  /// Creates of all the class's clients together. Default: 2/s, 10 at once.
  admission::TokenBucketPolicy per_class{2, 10};
};

/// What Judge says of one create.
struct FeedVerdict {
  /// Set when the create is refused: PermissionDenied (reason feed_refused, the feed's text) or
  /// ResourceExhausted (reason feed_class_key or feed_class, with Retry-After and the limit).
  std::optional<Error> refusal;
  /// The class whose tokens an admitted create took; empty: none. Refund gives them back.
  std::string charged_class;
  /// A "challenge" feed listed the address: with proof_of_work on, the create needs a solved
  /// challenge (PasteService::AdmitCreate).
  bool challenge = false;
};

/// Thread-safe.
class ReputationFeeds {
 public:
  /// `refuse_text`: what a refused creator reads, "{feed}" replaced by the feed's name; empty: a
  /// sentence of ours. `clock` and `metrics` must outlive it.
  ReputationFeeds(const Clock& clock, MetricsRegistry& metrics, FeedClassRates rates = {},
                  std::string refuse_text = {});

  /// The feeds from now on; a create already judged keeps its verdict. Sets each feed's entries
  /// gauge (a feed no longer declared reads 0). Cheap: no file is read here.
  void Replace(admission::FeedSet feeds);
  /// The feeds in force now.
  std::shared_ptr<const admission::FeedSet> Current() const { return state_.Load()->feeds; }
  /// New rates and text from now on; each bucket keeps its tokens, capped at its new burst.
  void Reconfigure(FeedClassRates rates, std::string refuse_text);

  /// The decision for a create from `address_key` (an address key, admission::ClientKeyOf):
  /// nothing when no feed lists it; a refusal from a kRefuse feed; else one token of the class's
  /// per-key bucket and of its class-wide bucket, both or neither. Counts each hit
  /// (sluice_feed_hits_total{feed,action}).
  FeedVerdict Judge(std::string_view address_key);
  /// True if the feed that lists `address_key` asks its creates for a proof of work: what a page
  /// learns before it sends (GET /api/v1/limits). Takes, counts and spends nothing.
  bool AsksProofOfWork(std::string_view address_key) const;
  /// Gives back what Judge took for a create that a later check refused, so that a refused
  /// create spends nothing (PasteService::AdmitCreate).
  void Refund(const FeedVerdict& verdict, std::string_view address_key);

  /// The text a refusal from `feed` carries.
  static std::string RefusalText(std::string_view refuse_text, std::string_view feed);

 private:
  struct State {
    std::shared_ptr<const admission::FeedSet> feeds;
    std::vector<Counter*> hits;  // by feed index
  };
  admission::TokenBucket& ClassBucket(const std::string& budget_class);

  const Clock& clock_;
  MetricsRegistry& metrics_;
  Swappable<State> state_;
  admission::KeyedLimiter per_key_;  // keyed "CLASS|address key"
  mutable std::mutex mu_;
  FeedClassRates rates_;     // guarded by mu_
  std::string refuse_text_;  // guarded by mu_
  std::map<std::string, std::unique_ptr<admission::TokenBucket>, std::less<>>
      per_class_;                    // guarded by mu_; a class is never forgotten (a handful)
  std::vector<std::string> gauged_;  // guarded by mu_: feeds with an entries gauge
};

}  // namespace sluice::service
