#include "sluice/service/reputation_feeds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace sluice::service {

namespace {

const char* const kHitsHelp =
    "Creates from a network a reputation feed lists, by feed and action (refuse, class:NAME, "
    "challenge), refused or not";
const char* const kEntriesHelp =
    "Networks (lines) of each reputation feed in force; 0 for a feed no longer declared";

// The sentence of ours: it names the feed, never the range that matched, so the list's contents
// are not read out one probe at a time.
constexpr std::string_view kDefaultRefuseText =
    "new pastes are not taken from your network: it is listed in the operator's reputation feed "
    "'{feed}'; reading pastes is open to everyone, and the operator can be asked for access";

Error ClassLimited(const char* reason, const std::string& budget_class,
                   const admission::TokenBucketPolicy& policy,
                   const admission::TakeDecision& decision, double available) {
  const int retry = std::clamp(decision.RetryAfterSeconds(), 1, 3600);
  Error e = MakeError(
      ErrorCode::kResourceExhausted,
      fmt::format("new pastes from networks in the budget class '{}' are limited to {} a second "
                  "({} at once){}; retry after {} s",
                  budget_class, policy.rate_per_second, policy.burst,
                  std::string_view(reason) == "feed_class_key" ? " per client" : " together",
                  retry),
      reason);
  e.retry_after_seconds = retry;
  e.limit = LimitInfo{reason, policy.burst, policy.burst / policy.rate_per_second,
                      std::floor(std::max(0.0, available)), retry};
  return e;
}

std::string PerKeyKey(std::string_view budget_class, std::string_view address_key) {
  std::string key;
  key.reserve(budget_class.size() + 1 + address_key.size());
  key.append(budget_class).append("|").append(address_key);
  return key;
}

}  // namespace

ReputationFeeds::ReputationFeeds(const Clock& clock, MetricsRegistry& metrics, FeedClassRates rates,
                                 std::string refuse_text)
    : clock_(clock),
      metrics_(metrics),
      state_(State{std::make_shared<const admission::FeedSet>(), {}}),
      per_key_(admission::KeyedLimiterOptions{{rates.per_key}}, clock),
      rates_(rates),
      refuse_text_(std::move(refuse_text)) {}

void ReputationFeeds::Replace(admission::FeedSet feeds) {
  State next;
  next.feeds = std::make_shared<const admission::FeedSet>(std::move(feeds));
  std::vector<std::string> names;
  for (const admission::Feed& feed : next.feeds->feeds()) {
    next.hits.push_back(
        &metrics_.GetCounter("sluice_feed_hits_total", kHitsHelp,
                             {{"feed", feed.spec.name}, {"action", feed.spec.action.Name()}}));
    metrics_.GetGauge("sluice_feed_entries", kEntriesHelp, {{"feed", feed.spec.name}})
        .Set(static_cast<double>(feed.entries));
    names.push_back(feed.spec.name);
  }
  {
    std::lock_guard lock(mu_);
    for (const std::string& old : gauged_) {
      if (std::find(names.begin(), names.end(), old) == names.end()) {
        metrics_.GetGauge("sluice_feed_entries", kEntriesHelp, {{"feed", old}}).Set(0);
      }
    }
    gauged_ = std::move(names);
  }
  state_.Store(std::move(next));
}

void ReputationFeeds::Reconfigure(FeedClassRates rates, std::string refuse_text) {
  per_key_.SetPolicies({rates.per_key});
  std::lock_guard lock(mu_);
  rates_ = rates;
  refuse_text_ = std::move(refuse_text);
  for (auto& [name, bucket] : per_class_) bucket->SetPolicy(rates.per_class);
}

std::string ReputationFeeds::RefusalText(std::string_view refuse_text, std::string_view feed) {
  std::string text(refuse_text.empty() ? kDefaultRefuseText : refuse_text);
  for (size_t at = text.find("{feed}"); at != std::string::npos;
       at = text.find("{feed}", at + feed.size())) {
    text.replace(at, 6, feed);
  }
  return text;
}

admission::TokenBucket& ReputationFeeds::ClassBucket(const std::string& budget_class) {
  std::lock_guard lock(mu_);
  auto it = per_class_.find(budget_class);
  if (it == per_class_.end()) {
    it = per_class_
             .emplace(budget_class,
                      std::make_unique<admission::TokenBucket>(rates_.per_class, clock_))
             .first;
  }
  return *it->second;
}

FeedVerdict ReputationFeeds::Judge(std::string_view address_key) {
  const std::shared_ptr<const State> state = state_.Load();
  const int index = state->feeds->Match(address_key);
  if (index < 0) return {};
  const admission::Feed& feed = state->feeds->feeds()[static_cast<size_t>(index)];
  state->hits[static_cast<size_t>(index)]->Inc();
  FeedVerdict verdict;
  if (feed.spec.action.kind == admission::FeedActionKind::kRefuse) {
    std::string text;
    {
      std::lock_guard lock(mu_);
      text = RefusalText(refuse_text_, feed.spec.name);
    }
    verdict.refusal = MakeError(ErrorCode::kPermissionDenied, std::move(text), "feed_refused");
    return verdict;
  }
  const std::string& budget_class = feed.spec.action.budget_class;
  const std::string key = PerKeyKey(budget_class, address_key);
  const admission::KeyedDecision mine = per_key_.TryTake(key);
  if (!mine.allowed()) {
    verdict.refusal = ClassLimited("feed_class_key", budget_class, per_key_.policies().front(),
                                   mine.decision, per_key_.Peek(key).available[0]);
    return verdict;
  }
  admission::TokenBucket& bucket = ClassBucket(budget_class);
  const admission::TakeDecision all = bucket.TryTake();
  if (!all.allowed) {
    per_key_.Refund(key, 1);
    verdict.refusal =
        ClassLimited("feed_class", budget_class, bucket.policy(), all, bucket.Available());
    return verdict;
  }
  verdict.charged_class = budget_class;
  verdict.challenge = feed.spec.action.kind == admission::FeedActionKind::kChallenge;
  return verdict;
}

bool ReputationFeeds::AsksProofOfWork(std::string_view address_key) const {
  const std::shared_ptr<const State> state = state_.Load();
  const int index = state->feeds->Match(address_key);
  return index >= 0 && state->feeds->feeds()[static_cast<size_t>(index)].spec.action.kind ==
                           admission::FeedActionKind::kChallenge;
}

void ReputationFeeds::Refund(const FeedVerdict& verdict, std::string_view address_key) {
  if (verdict.charged_class.empty()) return;
  per_key_.Refund(PerKeyKey(verdict.charged_class, address_key), 1);
  ClassBucket(verdict.charged_class).Refund(1);
}

}  // namespace sluice::service
