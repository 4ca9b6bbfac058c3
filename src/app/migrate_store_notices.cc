#include "migrate_store_notices.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "migrate_store_differences.h"

namespace sluice::app::migrate {
namespace {

using boost::asio::awaitable;
using store::Notice;

// Notices read per call: a range of the primary key each.
constexpr size_t kNoticePage = 500;

// The target's notices by sender and reference, the key a notice is unique by on every store (the
// ids are each store's own). At most the target's max_notices of them.
using NoticeIndex = std::map<std::pair<std::string, std::string>, Notice>;

awaitable<std::optional<std::vector<Notice>>> NoticePage(store::MetaStore& side_store,
                                                         const char* side, int64_t after_id,
                                                         CallDeadlineFn deadline) {
  auto reading = side_store.Notices(after_id, kNoticePage, deadline());
  auto page = co_await std::move(reading);
  if (!page.ok()) {
    std::printf("failed: reading the %s's notices after id %lld: %s\n", side,
                static_cast<long long>(after_id), page.error().message.c_str());
    co_return std::nullopt;
  }
  co_return std::move(*page);
}

// Every notice of `side_store` in id order through `visit`; false when a read failed.
awaitable<bool> ForEachNotice(store::MetaStore& side_store, const char* side,
                              CallDeadlineFn deadline, std::function<void(Notice&)> visit) {
  for (int64_t after_id = 0;;) {
    auto page = co_await NoticePage(side_store, side, after_id, deadline);
    if (!page) co_return false;
    if (page->empty()) co_return true;
    for (Notice& n : *page) visit(n);
    after_id = page->back().id;
  }
}

awaitable<std::optional<NoticeIndex>> IndexTarget(store::MetaStore& target,
                                                  CallDeadlineFn deadline) {
  NoticeIndex index;
  const bool read = co_await ForEachNotice(target, "target", deadline, [&](Notice& n) {
    auto key = std::make_pair(n.sender, n.reference);
    index.emplace(std::move(key), std::move(n));
  });
  if (!read) co_return std::nullopt;
  co_return index;
}

awaitable<bool> ImportOne(store::MetaStore& target, const Notice& n, int64_t max_notices,
                          CallDeadlineFn deadline, NoticeCopy& copy) {
  auto importing = target.ImportNotice(n, max_notices, deadline());
  Result<bool> stored = co_await std::move(importing);
  if (!stored.ok()) {
    std::printf("failed: copying notice %s from %s: %s\n", n.reference.c_str(), n.sender.c_str(),
                stored.error().message.c_str());
    co_return false;
  }
  if (*stored) ++copy.added;
  co_return true;
}

// The pastes the operator acted on at the source (closed in `want`) after an earlier run copied
// `got` with them open: closed on the target as that action closed them at the source, in every
// notice naming them, so the new store's takedown clock does not wait on them.
awaitable<bool> CloseActedOn(store::MetaStore& target, const Notice& want, const Notice& got,
                             int64_t now, CallDeadlineFn deadline, NoticeCopy& copy) {
  for (const store::NoticePaste& p : want.pastes) {
    const bool open_there = std::any_of(got.pastes.begin(), got.pastes.end(), [&](const auto& g) {
      return g.paste == p.paste && g.open;
    });
    const auto id = store::PasteId::Parse(p.paste);
    if (p.open || !open_there || !id) continue;
    auto closing = target.CloseNotices(*id, now, deadline());
    auto closed = co_await std::move(closing);
    if (!closed.ok()) {
      std::printf("failed: closing %s in the target's notices: %s\n", p.paste.c_str(),
                  closed.error().message.c_str());
      co_return false;
    }
    ++copy.closed;
  }
  co_return true;
}

}  // namespace

awaitable<bool> CopyNotices(store::MetaStore& source, store::MetaStore& target, int64_t max_notices,
                            int64_t now, CallDeadlineFn deadline, NoticeCopy& copy) {
  auto indexing = IndexTarget(target, deadline);
  std::optional<NoticeIndex> there = co_await std::move(indexing);
  if (!there) co_return false;
  for (int64_t after_id = 0;;) {
    auto page = co_await NoticePage(source, "source", after_id, deadline);
    if (!page) co_return false;
    if (page->empty()) co_return true;
    for (const Notice& n : *page) {
      auto found = there->find(std::make_pair(n.sender, n.reference));
      bool ok = true;
      if (found == there->end()) {
        ok = co_await ImportOne(target, n, max_notices, deadline, copy);
      } else {
        ok = co_await CloseActedOn(target, n, found->second, now, deadline, copy);
      }
      if (!ok) co_return false;
    }
    after_id = page->back().id;
  }
}

awaitable<std::optional<uint64_t>> VerifyNotices(store::MetaStore& source, store::MetaStore& target,
                                                 CallDeadlineFn deadline) {
  auto indexing = IndexTarget(target, deadline);
  std::optional<NoticeIndex> there = co_await std::move(indexing);
  if (!there) co_return std::nullopt;
  uint64_t differences = 0;
  const bool read = co_await ForEachNotice(source, "source", deadline, [&](Notice& want) {
    auto found = there->find(std::make_pair(want.sender, want.reference));
    const std::vector<std::string> named = found == there->end()
                                               ? std::vector<std::string>{"missing on the target"}
                                               : NoticeDifferences(want, found->second);
    for (const std::string& d : named) {
      ++differences;
      std::printf("difference: notice %s from %s: %s\n", want.reference.c_str(),
                  want.sender.c_str(), d.c_str());
    }
  });
  if (!read) co_return std::nullopt;
  co_return differences;
}

awaitable<std::optional<uint64_t>> CountNotices(store::MetaStore& source, CallDeadlineFn deadline) {
  uint64_t count = 0;
  const bool read = co_await ForEachNotice(source, "source", deadline, [&](Notice&) { ++count; });
  if (!read) co_return std::nullopt;
  co_return count;
}

}  // namespace sluice::app::migrate
