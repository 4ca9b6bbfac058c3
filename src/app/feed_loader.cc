#include "feed_loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

namespace sluice::app {

namespace {

Result<admission::Feed> LoadFeed(const admission::FeedSpec& spec) {
  std::ifstream file(spec.path, std::ios::binary);
  std::ostringstream text;
  if (!file || !(text << file.rdbuf())) {
    return MakeError(ErrorCode::kInvalidArgument, "cannot read " + spec.path);
  }
  Result<std::vector<admission::Cidr>> blocks = admission::ParseNetset(text.str());
  if (!blocks.ok()) {
    return MakeError(ErrorCode::kInvalidArgument, spec.path + ": " + blocks.error().message);
  }
  admission::Feed feed{spec, std::make_shared<const admission::PrefixSet>(*blocks), blocks->size()};
  return feed;
}

const admission::Feed* FindFeed(const admission::FeedSet* set, const std::string& name) {
  if (set == nullptr) return nullptr;
  for (const admission::Feed& feed : set->feeds()) {
    if (feed.spec.name == name) return &feed;
  }
  return nullptr;
}

}  // namespace

FeedLoad LoadFeeds(const std::vector<admission::FeedSpec>& specs,
                   const admission::FeedSet* previous) {
  const auto start = std::chrono::steady_clock::now();
  FeedLoad load;
  std::vector<admission::Feed> feeds;
  for (const admission::FeedSpec& spec : specs) {
    const auto began = std::chrono::steady_clock::now();
    Result<admission::Feed> feed = LoadFeed(spec);
    if (feed.ok()) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began)
              .count();
      spdlog::info("feed {}: {} networks ({} ranges, {:.1f} MiB) from {}, action {}, in {:.0f} ms",
                   spec.name, feed->entries, feed->networks->ranges(),
                   static_cast<double>(feed->networks->MemoryBytes()) / (1 << 20), spec.path,
                   spec.action.Name(), ms);
      feeds.push_back(std::move(*feed));
      continue;
    }
    std::string failure = fmt::format("{}: {}", spec.name, feed.error().message);
    if (const admission::Feed* kept = FindFeed(previous, spec.name)) {
      // The networks it had, under the action now declared: the file is what failed.
      feeds.push_back({spec, kept->networks, kept->entries});
      failure += fmt::format("; kept the {} networks it had", kept->entries);
    } else {
      failure += "; left out (no networks loaded before)";
    }
    load.failures.push_back(std::move(failure));
  }
  load.feeds = admission::FeedSet(std::move(feeds));
  load.took = std::chrono::steady_clock::now() - start;
  return load;
}

}  // namespace sluice::app
