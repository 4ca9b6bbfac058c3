// Reputation feeds (docs/admission.md, "Reputation feeds"): the netset files operators already
// keep (FireHOL's lists, Spamhaus DROP), each with what to do with a create from a network it
// lists. This part is the feeds' declaration and the decision; reading the files is the app's
// (src/app/feed_loader.h), the budgets of a class and the counts the service's
// (include/sluice/service/reputation_feeds.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/admission/prefix_set.h"
#include "sluice/common/result.h"

namespace sluice::admission {

/// What a feed does to a create from a network it lists.
enum class FeedActionKind {
  /// 403 with the feed's reason text.
  kRefuse,
  /// The create draws on a budget class of its own (FeedAction::budget_class), with lower rates.
  kClass,
  /// Reserved for proof of work (issue 46 item 5). Until it is built it is kClass with the class
  /// "challenge": the same budgets, counted under its own action.
  kChallenge,
};

/// A feed's action. A value type.
struct FeedAction {
  FeedActionKind kind = FeedActionKind::kRefuse;
  /// The class a kClass or kChallenge create draws on; empty for kRefuse.
  std::string budget_class;
  /// "refuse", "class:NAME", "challenge": the setting's spelling and the metrics' label.
  std::string Name() const;
};

/// One feed as the operator declares it.
struct FeedSpec {
  /// 1 to 64 of [a-z0-9_-]: it is a metric label and a word in a refusal.
  std::string name;
  FeedAction action;
  /// The netset file (ParseNetset's formats).
  std::string path;
};

/// One entry of the `feeds` setting: "NAME=ACTION:PATH", ACTION one of "refuse", "class:CLASS",
/// "challenge" (CLASS named as NAME is). InvalidArgument saying what is wrong. Pure.
Result<FeedSpec> ParseFeedSpec(std::string_view entry);

/// A feed with its networks.
struct Feed {
  FeedSpec spec;
  /// Never null.
  std::shared_ptr<const PrefixSet> networks;
  /// Lines of the file that named a network (before merging into ranges).
  size_t entries = 0;
};

/// The feeds in force. Immutable once built, shared by every thread; a reload builds another.
/// One PrefixSet a feed rather than one set with a feed id a range: a feed whose file is broken at
/// a reload keeps its old set while the others take their new ones, and a lookup costs one binary
/// search a feed (tens of ns; operators declare a handful).
class FeedSet {
 public:
  FeedSet() = default;
  explicit FeedSet(std::vector<Feed> feeds) : feeds_(std::move(feeds)) {}

  /// The index of the first feed, in the operator's order, that lists `address_key`; -1 for none.
  /// An IPv6 key (its /64, ClientKeyOf) is listed when the /64's first address is, as in
  /// DecideCreateAccess; a key that is no address (a Unix socket's) is in no feed. Pure.
  int Match(std::string_view address_key) const;
  const std::vector<Feed>& feeds() const { return feeds_; }
  bool empty() const { return feeds_.empty(); }

 private:
  std::vector<Feed> feeds_;
};

}  // namespace sluice::admission
