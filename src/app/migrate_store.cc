#include "migrate_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>

#include "backends.h"
#include "data_dir_lock.h"
#include "migrate_store_cursor.h"
#include "migrate_store_differences.h"
#include "migrate_store_notices.h"
#include "settings.h"
#include "sluice/admission/token_bucket.h"
#include "sluice/asio/completion.h"
#include "sluice/asio/timer.h"
#include "sluice/service/body_check.h"
#include "sluice/service/content_blocklist.h"

namespace sluice::app {

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using migrate::AllDifferences;
using migrate::CreatedDifferences;
using migrate::Cursor;
using migrate::LoadCursor;
using migrate::SameReport;
using migrate::SaveCursor;
using store::PasteId;
using store::PasteMeta;

// Generous: a copy is background work with no client waiting, and a call that times out is
// repeated by the next run (every step is idempotent), never by this one.
constexpr auto kCallTimeout = std::chrono::seconds(30);

Deadline CallDeadline() { return Deadline::After(SystemClock::Instance(), kCallTimeout); }

// One side of the copy: its settings and the stores they name, opened as `sluice serve` opens
// them (backends.cc).
struct Side {
  std::string name;
  Settings settings;
  std::filesystem::path data_dir;
  std::optional<DataDirLock> lock;
  std::unique_ptr<store::MetaStore> own_meta;
  store::MetaStore* meta = nullptr;
  std::unique_ptr<store::BlobStore> blobs;
};

Settings ReadSettingsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return SettingsLoader::FromToml(text.str());
  } catch (const std::exception& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

bool Embedded(const Settings& s) { return s.String("meta").empty(); }

class Migration {
 public:
  Migration(const MigrateStoreOptions& o, Side& source, Side& target, std::string from_key)
      : o_(o),
        source_(source),
        target_(target),
        from_key_(std::move(from_key)),
        bucket_(admission::TokenBucketPolicy{o.rate > 0 ? o.rate : 1.0, std::max(1.0, o.rate / 10)},
                clock_) {}

  awaitable<int> Run() {
    now_ = clock_.UnixSeconds();
    if (o_.dry_run) co_return co_await DryRun();
    if (!o_.verify_only) {
      bool copied = false;
      if (o_.changed) {
        copied = co_await CopyChanged();
      } else {
        copied = co_await Copy();
      }
      if (!copied) co_return 1;
      if (!co_await CopyBlocks()) co_return 1;
      if (!co_await CopyBlockedContents()) co_return 1;
      if (!co_await CopyTransparency()) co_return 1;
      // After the pastes: the rows they name are there, in the state the notices put them in.
      if (!co_await CopyNotices()) co_return 1;
    }
    // After a pass over what changed, what it copied is verified already (CheckOne): the
    // whole walk is left out, so that the window's pass costs a read of each row, not of each
    // body.
    // Not a co_await inside ?: : g++ 12 resumes such a frame at a bad state.
    bool verified = true;
    if (!o_.changed || o_.verify_only) verified = co_await Verify();
    if (verified) verified = co_await VerifyBlocks();
    if (verified) verified = co_await VerifyBlockedContents();
    if (verified) verified = co_await VerifyNotices();
    std::printf("%s\n", nlohmann::json{{"moved", moved_},
                                       {"already_there", already_},
                                       {"unchanged", unchanged_},
                                       {"changed", changed_},
                                       {"not_moved_expired", expired_},
                                       {"not_moved_deleted", deleted_},
                                       {"bytes", bytes_},
                                       {"verified", verified_},
                                       {"blocked_contents_added", blocked_contents_},
                                       {"notices_added", notices_.added},
                                       {"notice_pastes_closed", notices_.closed},
                                       {"differences", differences_}}
                            .dump()
                            .c_str());
    co_return differences_ == 0 && verified ? 0 : 1;
  }

 private:
  void Differ(const PasteId& id, const std::string& what) {
    ++differences_;
    std::printf("difference: %s %s\n", id.str().c_str(), what.c_str());
    std::fflush(stdout);
  }

  // What moves: unexpired rows that are not tombstones, and taken-down ones (a takedown is a
  // tombstone too, src/service/moderation.cc), which must go on answering 451, not 404.
  bool Live(const PasteMeta& row) const {
    return row.expires_at > now_ &&
           (!row.deleted || row.moderation == store::Moderation::kTakenDown);
  }

  // The source's share: one token per paste read from it.
  awaitable<void> Pace() {
    if (o_.rate <= 0) co_return;
    for (;;) {
      const admission::TakeDecision d = bucket_.TryTake(1);
      if (d.allowed) co_return;
      co_await asio_glue::SleepFor(clock_, d.retry_after);
    }
  }

  awaitable<std::optional<std::vector<PasteMeta>>> Page(std::optional<PasteId> after) {
    auto listing = source_.meta->ListPastes(after, o_.page, CallDeadline());
    auto rows = co_await std::move(listing);
    if (!rows.ok()) {
      std::printf("failed: listing the source after %s: %s\n",
                  after ? after->str().c_str() : "the start", rows.error().message.c_str());
      co_return std::nullopt;
    }
    co_return std::move(*rows);
  }

  void Progress(bool last) {
    const auto at = clock_.Now();
    if (!last && at - last_progress_ < std::chrono::seconds(1)) return;
    last_progress_ = at;
    const double seconds = std::chrono::duration<double>(at - started_).count();
    const uint64_t walked = moved_ + already_ + unchanged_ + dead_unchanged_;
    const double rate = seconds > 0 ? static_cast<double>(walked) / seconds : 0;
    const double mb = seconds > 0 ? static_cast<double>(bytes_) / 1e6 / seconds : 0;
    const uint64_t done = done_before_ + walked;
    const uint64_t left = total_ > done ? total_ - done : 0;
    if (o_.changed) {
      // No count first: in the window, a walk of the rows to count them would be time too.
      std::fprintf(stderr, "migrate-store: %llu rows compared, %llu changed; %.0f rows/s\n",
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(changed_),
                   rate);
      return;
    }
    std::fprintf(stderr,
                 "migrate-store: %llu of %llu pastes, %.1f MB; %.0f pastes/s, %.2f MB/s; about "
                 "%.0f s left\n",
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 static_cast<double>(bytes_) / 1e6, rate, mb,
                 rate > 0 ? static_cast<double>(left) / rate : 0.0);
  }

  // Counts the live pastes after `after` (metadata only), for the estimate and the dry run;
  // with `on_target`, also those already there.
  awaitable<bool> Count(std::optional<PasteId> after, uint64_t* live, uint64_t* bytes,
                        uint64_t* on_target) {
    for (;;) {
      auto page = co_await Page(after);
      if (!page) co_return false;
      if (page->empty()) co_return true;
      std::vector<PasteId> ids;
      for (const PasteMeta& row : *page) {
        if (Live(row)) {
          ++*live;
          *bytes += row.size_bytes;
          ids.push_back(row.id);
        } else if (row.deleted) {
          ++deleted_;
        } else {
          ++expired_;
        }
      }
      if (on_target != nullptr && !ids.empty()) {
        auto asking = target_.meta->Existing(ids, CallDeadline());
        auto there = co_await std::move(asking);
        if (!there.ok()) {
          std::printf("failed: asking the target: %s\n", there.error().message.c_str());
          co_return false;
        }
        *on_target += there->size();
      }
      after = page->back().id;
    }
  }

  awaitable<int> DryRun() {
    uint64_t live = 0, bytes = 0, there = 0;
    if (!co_await Count(std::nullopt, &live, &bytes, &there)) co_return 1;
    auto listing = source_.meta->ActiveBlocks(now_, CallDeadline());
    auto blocks = co_await std::move(listing);
    auto counting = migrate::CountNotices(*source_.meta, &CallDeadline);
    const std::optional<uint64_t> notices = co_await std::move(counting);
    std::printf("%s\n", nlohmann::json{{"dry_run", true},
                                       {"would_move", live - there},
                                       {"already_there", there},
                                       {"bytes", bytes},
                                       {"not_moved_expired", expired_},
                                       {"not_moved_deleted", deleted_},
                                       {"blocks", blocks.ok() ? blocks->size() : 0},
                                       {"notices", notices.value_or(0)}}
                            .dump()
                            .c_str());
    co_return blocks.ok() && notices ? 0 : 1;
  }

  awaitable<bool> Copy() {
    Cursor cursor;
    if (auto saved = LoadCursor(state_path(), from_key_)) {
      // A finished copy starts over: a second pass before the cutover brings what changed.
      if (!saved->done) {
        cursor = *saved;
        std::fprintf(stderr, "migrate-store: resuming after %s (%llu pastes moved before)\n",
                     cursor.after ? cursor.after->str().c_str() : "the start",
                     static_cast<unsigned long long>(cursor.moved));
      }
    }
    done_before_ = 0;
    {
      // The estimate's total: what is left after the cursor, plus what was done before it.
      uint64_t left = 0, bytes = 0;
      const uint64_t expired = expired_, deleted = deleted_;
      if (!co_await Count(cursor.after, &left, &bytes, nullptr)) co_return false;
      expired_ = expired;
      deleted_ = deleted;
      done_before_ = cursor.moved;
      total_ = left + cursor.moved;
    }
    started_ = last_progress_ = clock_.Now();
    const bool copied =
        co_await ForEachPage(cursor.after, &Migration::CopyStep, [&](const PasteId& last) {
          cursor.after = last;
          cursor.moved = done_before_ + moved_ + already_;
          cursor.bytes = bytes_;
          SaveCursor(state_path(), from_key_, cursor);
        });
    if (!copied) co_return false;
    cursor.done = true;
    SaveCursor(state_path(), from_key_, cursor);
    Progress(true);
    co_return true;
  }

  // The rows of one page, o_.jobs at a time. The io_context has one thread, so the workers share
  // the page's index and the counts without a lock; a step's own calls run on the stores' pools.
  using RowStep = awaitable<bool> (Migration::*)(const PasteMeta&);
  struct PageRun {
    const std::vector<PasteMeta>* rows;
    RowStep step;
    size_t next = 0;
    bool ok = true;
    std::exception_ptr thrown{};
  };

  awaitable<void> RowWorker(PageRun* run) {
    while (run->ok && run->next < run->rows->size()) {
      const PasteMeta& row = (*run->rows)[run->next++];
      if (!co_await (this->*run->step)(row)) run->ok = false;
    }
  }

  // False when a step failed (the rows not yet begun are then left for the next run).
  awaitable<bool> ForEachRow(const std::vector<PasteMeta>& rows, RowStep step) {
    PageRun run{&rows, step};
    const size_t workers = std::max<size_t>(1, std::min(o_.jobs, rows.size()));
    auto executor = co_await asio::this_coro::executor;
    co_await asio_glue::AwaitCompletion<bool>([&](asio_glue::Completion<bool> done) {
      auto left = std::make_shared<size_t>(workers);
      auto finish = std::make_shared<asio_glue::Completion<bool>>(std::move(done));
      for (size_t i = 0; i < workers; ++i) {
        asio::co_spawn(executor, RowWorker(&run), [&run, left, finish](std::exception_ptr e) {
          if (e && !run.thrown) run.thrown = e;
          if (e) run.ok = false;
          if (--*left == 0) (*finish)(true);
        });
      }
    });
    if (run.thrown) std::rethrow_exception(run.thrown);
    co_return run.ok;
  }

  awaitable<bool> CopyStep(const PasteMeta& row) {
    co_await Pace();
    const bool ok = co_await CopyOne(row);
    Progress(false);
    co_return ok;
  }

  // Every source row after `after`, a page at a time, through `step`; `page_done` (when given)
  // learns the last id of each page finished, for a cursor. False when a read or a step failed.
  awaitable<bool> ForEachPage(std::optional<PasteId> after, RowStep step,
                              std::function<void(const PasteId&)> page_done = {}) {
    for (;;) {
      auto page = co_await Page(after);
      if (!page) co_return false;
      if (page->empty()) co_return true;
      if (!co_await ForEachRow(*page, step)) co_return false;
      after = page->back().id;
      if (page_done) page_done(*after);
    }
  }

  // The window's pass (MigrateStoreOptions::changed): every source row against the target's, and
  // then the pastes with open reports, whose new reports change no row.
  awaitable<bool> CopyChanged() {
    started_ = last_progress_ = clock_.Now();
    if (!co_await ForEachPage(std::nullopt, &Migration::CheckStep)) co_return false;
    Progress(true);
    std::optional<store::ReportCursor> reports_after;
    for (;;) {
      auto listing = source_.meta->OpenReports(reports_after, 500, CallDeadline());
      auto queue = co_await std::move(listing);
      if (!queue.ok()) {
        std::printf("failed: reading the source's review queue: %s\n",
                    queue.error().message.c_str());
        co_return false;
      }
      for (const store::ReportSummary& reported : queue->pastes) {
        if (!co_await CopyReports(reported.id)) co_return false;
        co_await VerifyReports(reported.id);
      }
      if (!queue->next) co_return true;
      reports_after = queue->next;
    }
  }

  // One row of the window's pass: nothing to do when the target's row says the same in every
  // field (its body was checked against the row's SHA-256 when it was copied, and a body never
  // changes under its id); else the paste is copied as by a whole pass, then verified.
  awaitable<bool> CheckStep(const PasteMeta& row) {
    co_await Pace();
    auto getting = target_.meta->Get(row.id, CallDeadline());
    auto there = co_await std::move(getting);
    if (!there.ok() && there.error().code != ErrorCode::kNotFound) {
      std::printf("failed: reading %s on the target: %s\n", row.id.str().c_str(),
                  there.error().message.c_str());
      co_return false;
    }
    Progress(false);
    if (there.ok() && AllDifferences(row, *there).empty()) {
      ++(Live(row) ? unchanged_ : dead_unchanged_);
      co_return true;
    }
    // Expired or deleted at the source, and never copied or gone on the target too (a burn
    // paste's last claim leaves views_left apart on the two tombstones: nothing to carry).
    if (!Live(row) && (!there.ok() || there->deleted || there->expires_at <= now_)) {
      ++dead_unchanged_;
      co_return true;
    }
    ++changed_;
    if (!co_await CopyOne(row)) co_return false;
    if (Live(row)) {
      if (!co_await VerifyOne(row)) co_return false;
      ++verified_;
      co_return true;
    }
    auto reading = target_.meta->Get(row.id, CallDeadline());
    auto after = co_await std::move(reading);
    if (after.ok() && !after->deleted && after->expires_at > now_) {
      Differ(row.id, "deleted: true on the source, false on the target");
    }
    co_return true;
  }

  // One paste, every step idempotent: a run killed anywhere in here and repeated ends the same.
  // The body goes first, as a create writes it (a row never points at a missing body); then the
  // row, its reports and its moderation state. False only for a failure that should stop the run.
  awaitable<bool> CopyOne(const PasteMeta& row) {
    auto getting = target_.meta->Get(row.id, CallDeadline());
    auto there = co_await std::move(getting);
    if (!there.ok() && there.error().code != ErrorCode::kNotFound) {
      std::printf("failed: reading %s on the target: %s\n", row.id.str().c_str(),
                  there.error().message.c_str());
      co_return false;
    }
    if (!Live(row)) {
      if (row.deleted) {
        ++deleted_;
        // Deleted since an earlier pass copied it: the target forgets it too.
        if (there.ok() && !there->deleted) {
          auto deleting = target_.meta->MarkDeleted(row.id, now_, CallDeadline());
          if (Status s = co_await std::move(deleting); !s.ok()) {
            std::printf("failed: deleting %s on the target: %s\n", row.id.str().c_str(),
                        s.error().message.c_str());
            co_return false;
          }
        }
      } else {
        ++expired_;
      }
      co_return true;
    }
    if (there.ok()) {
      if (auto diff = CreatedDifferences(row, *there); !diff.empty()) {
        for (const auto& d : diff) Differ(row.id, d);
        co_return true;  // another paste under this id: named, never overwritten
      }
    }
    // The body: read and checked against its row before anything is written.
    auto reading = source_.blobs->Get(row.id, CallDeadline());
    auto body = co_await std::move(reading);
    bool has_body = body.ok();
    if (!body.ok()) {
      const bool gone = body.error().code == ErrorCode::kNotFound;
      // A takedown deletes the body and keeps the row (docs/moderation.md).
      if (!(gone && row.moderation == store::Moderation::kTakenDown)) {
        if (body.error().reason == store::kBodyUndecodable || gone) {
          Differ(row.id, fmt::format("body: {} at the source; not copied",
                                     gone ? "missing" : "damaged (does not decode)"));
          co_return true;
        }
        std::printf("failed: reading the body of %s at the source: %s\n", row.id.str().c_str(),
                    body.error().message.c_str());
        co_return false;
      }
    }
    if (has_body) {
      const bool damaged = body->size() != row.size_bytes ||
                           (row.body_sha256 && service::DigestBody(*body) != *row.body_sha256);
      if (damaged) {
        Differ(row.id,
               "body: its SHA-256 or size does not match its row at the source (damaged); "
               "not copied");
        co_return true;
      }
      auto checking = target_.blobs->Get(row.id, CallDeadline());
      auto copy = co_await std::move(checking);
      if (!copy.ok() || *copy != *body) {
        auto putting = target_.blobs->Put(
            row.id, std::make_shared<const std::string>(std::move(*body)), CallDeadline());
        if (Status s = co_await std::move(putting); !s.ok()) {
          std::printf("failed: writing the body of %s: %s\n", row.id.str().c_str(),
                      s.error().message.c_str());
          co_return false;
        }
      }
    }
    std::optional<PasteMeta> target_row;
    if (there.ok()) target_row = *there;
    if (!target_row) {
      PasteMeta fresh = row;
      // As Insert writes every row; the state and a takedown's tombstone follow the reports.
      fresh.moderation = store::Moderation::kNone;
      fresh.deleted = false;
      auto inserting = target_.meta->Insert(fresh, CallDeadline());
      if (Status s = co_await std::move(inserting); !s.ok()) {
        std::printf("failed: inserting %s: %s\n", row.id.str().c_str(), s.error().message.c_str());
        co_return false;
      }
      target_row = fresh;
      ++moved_;
      bytes_ += row.size_bytes;
    } else {
      ++already_;
    }
    // Views spent since an earlier pass: claimed on the target too, one by one, as a reader
    // would. More spent on the target than on the source cannot be given back: named.
    if (row.burn && target_row->views_left > row.views_left) {
      for (uint32_t n = target_row->views_left - row.views_left; n > 0; --n) {
        auto claiming = target_.meta->Claim(row.id, now_, CallDeadline());
        if (auto c = co_await std::move(claiming); !c.ok()) {
          Differ(row.id,
                 "views_left: cannot spend the views spent at the source: " + c.error().message);
          break;
        }
      }
    } else if (row.burn && target_row->views_left < row.views_left) {
      Differ(row.id, fmt::format("views_left: {} on the source, {} on the target", row.views_left,
                                 target_row->views_left));
    }
    if (!co_await CopyReports(row.id)) co_return false;
    if (target_row->moderation != row.moderation) {
      store::ModerationChange change{row.moderation, "moved by sluice admin migrate-store", now_};
      auto setting = target_.meta->SetModeration(row.id, change, CallDeadline());
      if (Result<store::ModerationOutcome> s = co_await std::move(setting); !s.ok()) {
        std::printf("failed: moderation of %s: %s\n", row.id.str().c_str(),
                    s.error().message.c_str());
        co_return false;
      }
    }
    // A takedown's tombstone, after its state, as the takedown itself orders them.
    if (row.deleted && !target_row->deleted) {
      auto deleting = target_.meta->MarkDeleted(row.id, now_, CallDeadline());
      if (Status s = co_await std::move(deleting); !s.ok()) {
        std::printf("failed: deleting %s on the target: %s\n", row.id.str().c_str(),
                    s.error().message.c_str());
        co_return false;
      }
    }
    co_return true;
  }

  // The open reports, each as its network made it; a network that already reported the paste on
  // the target is not counted again, so a repeat adds nothing. No charge, threshold or cap: the
  // report is stored as it is, and withholding is the moderation state's to carry.
  awaitable<bool> CopyReports(const PasteId& id) {
    auto listing = source_.meta->ReportsOf(id, CallDeadline());
    auto reports = co_await std::move(listing);
    if (!reports.ok()) {
      std::printf("failed: reports of %s: %s\n", id.str().c_str(), reports.error().message.c_str());
      co_return false;
    }
    // Oldest first, as they were made: the target's queue entry then arrives when the source's
    // first open report did (store::ReportSummary::first_at, the takedown clock).
    std::stable_sort(
        reports->begin(), reports->end(),
        [](const store::AbuseReport& a, const store::AbuseReport& b) { return a.at < b.at; });
    store::ReportPolicy policy;
    policy.hide_threshold = 0;
    policy.withholds_per_network = std::numeric_limits<int64_t>::max();
    policy.max_open_reports = std::numeric_limits<int64_t>::max();
    policy.may_withhold = false;
    for (const store::AbuseReport& r : *reports) {
      auto adding = target_.meta->AddReport(r, policy, CallDeadline());
      if (auto added = co_await std::move(adding); !added.ok()) {
        std::printf("failed: a report of %s: %s\n", id.str().c_str(),
                    added.error().message.c_str());
        co_return false;
      }
    }
    co_return true;
  }

  awaitable<bool> CopyBlocks() {
    auto from = source_.meta->ActiveBlocks(now_, CallDeadline());
    auto blocks = co_await std::move(from);
    auto to = target_.meta->ActiveBlocks(now_, CallDeadline());
    auto present = co_await std::move(to);
    if (!blocks.ok() || !present.ok()) {
      std::printf("failed: reading the blocks: %s\n",
                  (!blocks.ok() ? blocks.error() : present.error()).message.c_str());
      co_return false;
    }
    for (const store::ClientBlock& b : *blocks) {
      const bool there = std::any_of(present->begin(), present->end(), [&](const auto& p) {
        return p.prefix == b.prefix && p.reason == b.reason && p.created_at == b.created_at &&
               p.until == b.until;
      });
      if (there) continue;
      auto adding = target_.meta->AddBlock(b, CallDeadline());
      if (Status s = co_await std::move(adding); !s.ok()) {
        std::printf("failed: adding a block: %s\n", s.error().message.c_str());
        co_return false;
      }
    }
    co_return true;
  }

  // The transparency report's counters (docs/moderation.md, "Transparency"), after the blocks and
  // the content blocklist, whose copies the target counts as it adds them: each target counter
  // is raised to the source's (the difference added), never lowered, so a resumed or second run
  // adds nothing and the report reads the same on the new store.
  awaitable<bool> CopyTransparency() {
    auto from = source_.meta->TransparencyCounts("", kAllTransparencyRows, CallDeadline());
    auto rows = co_await std::move(from);
    auto to = target_.meta->TransparencyCounts("", kAllTransparencyRows, CallDeadline());
    auto present = co_await std::move(to);
    if (!rows.ok() || !present.ok()) {
      std::printf("failed: reading the transparency counters: %s\n",
                  (!rows.ok() ? rows.error() : present.error()).message.c_str());
      co_return false;
    }
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> there;
    for (const store::TransparencyCount& c : *present) there[{c.month, c.kind, c.label}] = c.count;
    std::vector<store::TransparencyCount> missing;
    for (store::TransparencyCount c : *rows) {
      c.count -= there[{c.month, c.kind, c.label}];
      if (c.count > 0) missing.push_back(std::move(c));
    }
    if (missing.empty()) co_return true;
    auto adding = target_.meta->AddTransparency(std::move(missing), CallDeadline());
    if (Status s = co_await std::move(adding); !s.ok()) {
      std::printf("failed: adding the transparency counters: %s\n", s.error().message.c_str());
      co_return false;
    }
    co_return true;
  }
  // Counter rows read at most: decades of every kind and label.
  static constexpr size_t kAllTransparencyRows = 100'000;

  // The content blocklist (docs/moderation.md, "Takedowns that stick"), in digest order: a text
  // taken down on the old store stays refused on the new one. Adding an entry that is there
  // changes nothing, so a resumed or second run simply walks it again.
  awaitable<bool> CopyBlockedContents() {
    const int64_t max_entries = target_.settings.Integer("max_blocked_contents");
    std::optional<store::BodyDigest> after;
    for (;;) {
      auto reading = source_.meta->BlockedContents(after, 1000, CallDeadline());
      auto page = co_await std::move(reading);
      if (!page.ok()) {
        std::printf("failed: reading the content blocklist: %s\n", page.error().message.c_str());
        co_return false;
      }
      for (const store::BlockedContent& entry : page->entries) {
        auto adding = target_.meta->BlockContent(entry, max_entries, CallDeadline());
        auto added = co_await std::move(adding);
        if (!added.ok()) {
          std::printf("failed: adding to the content blocklist: %s\n",
                      added.error().message.c_str());
          co_return false;
        }
        if (*added) ++blocked_contents_;
      }
      if (!page->next) co_return true;
      after = page->next;
    }
  }

  // Every digest of the source's content blocklist is on the target's: both lists are read in
  // digest order, side by side, a page of each at a time.
  awaitable<bool> VerifyBlockedContents() {
    std::optional<store::BodyDigest> source_after, target_after;
    std::vector<store::BlockedContent> target_page;
    size_t next_target = 0;
    bool target_done = false;
    for (;;) {
      auto reading = source_.meta->BlockedContents(source_after, 1000, CallDeadline());
      auto page = co_await std::move(reading);
      if (!page.ok()) co_return false;
      for (const store::BlockedContent& entry : page->entries) {
        for (;;) {
          if (next_target == target_page.size() && !target_done) {
            auto more = target_.meta->BlockedContents(target_after, 1000, CallDeadline());
            auto target = co_await std::move(more);
            if (!target.ok()) co_return false;
            target_page = std::move(target->entries);
            next_target = 0;
            target_done = !target->next;
            target_after = target->next;
          }
          if (next_target < target_page.size() && target_page[next_target].sha256 < entry.sha256) {
            ++next_target;
            continue;
          }
          break;
        }
        if (next_target < target_page.size() && target_page[next_target].sha256 == entry.sha256) {
          ++next_target;
        } else {
          ++differences_;
          std::printf("difference: blocked content %s missing on the target\n",
                      service::ContentBlocklist::Hex(entry.sha256).c_str());
        }
      }
      if (!page->next) co_return true;
      source_after = page->next;
    }
  }

  // The abuse notices (docs/moderation.md, "Notices"), with the target's max_notices, as the
  // content blocklist is copied with its max_blocked_contents (migrate_store_notices.cc).
  awaitable<bool> CopyNotices() {
    const int64_t max_notices = target_.settings.Integer("max_notices");
    co_return co_await migrate::CopyNotices(*source_.meta, *target_.meta, max_notices, now_,
                                            &CallDeadline, notices_);
  }

  awaitable<bool> VerifyNotices() {
    auto verifying = migrate::VerifyNotices(*source_.meta, *target_.meta, &CallDeadline);
    const std::optional<uint64_t> differences = co_await std::move(verifying);
    if (!differences) co_return false;
    differences_ += *differences;
    co_return true;
  }

  // Reads every live source paste back from the target: its row field by field, its reports,
  // and its body against the source row's SHA-256. Every difference is named.
  awaitable<bool> Verify() { co_return co_await ForEachPage(std::nullopt, &Migration::VerifyStep); }

  // Every block in force at the source is on the target.
  awaitable<bool> VerifyBlocks() {
    auto from = source_.meta->ActiveBlocks(now_, CallDeadline());
    auto blocks = co_await std::move(from);
    auto to = target_.meta->ActiveBlocks(now_, CallDeadline());
    auto present = co_await std::move(to);
    if (!blocks.ok() || !present.ok()) co_return false;
    for (const store::ClientBlock& b : *blocks) {
      const bool there = std::any_of(present->begin(), present->end(), [&](const auto& p) {
        return p.prefix == b.prefix && p.until == b.until;
      });
      if (!there) {
        ++differences_;
        std::printf("difference: block %s missing on the target\n", b.prefix.c_str());
      }
    }
    co_return true;
  }

  awaitable<bool> VerifyOne(const PasteMeta& row) {
    auto getting = target_.meta->Get(row.id, CallDeadline());
    auto there = co_await std::move(getting);
    if (!there.ok()) {
      if (there.error().code != ErrorCode::kNotFound) {
        std::printf("failed: reading %s on the target: %s\n", row.id.str().c_str(),
                    there.error().message.c_str());
        co_return false;
      }
      Differ(row.id, "row: missing on the target");
      co_return true;
    }
    for (const auto& d : AllDifferences(row, *there)) Differ(row.id, d);
    auto reading = target_.blobs->Get(row.id, CallDeadline());
    auto body = co_await std::move(reading);
    if (!body.ok()) {
      if (body.error().code != ErrorCode::kNotFound ||
          row.moderation != store::Moderation::kTakenDown) {
        Differ(row.id, "body: " + body.error().message + " on the target");
      }
    } else if (body->size() != row.size_bytes ||
               (row.body_sha256 && service::DigestBody(*body) != *row.body_sha256)) {
      Differ(row.id, "body: its SHA-256 or size on the target does not match the source's row");
    }
    co_await VerifyReports(row.id);
    co_return true;
  }

  // One exit, after the awaits: g++ 12 built this coroutine with a co_return ahead of its first
  // co_await so that resuming it hit a trap (SIGILL).
  awaitable<bool> VerifyStep(const PasteMeta& row) {
    bool ok = true;
    if (Live(row)) {
      co_await Pace();
      ok = co_await VerifyOne(row);
      if (ok) ++verified_;
    }
    co_return ok;
  }

  // Each open report of `id` at the source is on the target.
  awaitable<void> VerifyReports(PasteId id) {
    auto want_listing = source_.meta->ReportsOf(id, CallDeadline());
    auto want = co_await std::move(want_listing);
    auto got_listing = target_.meta->ReportsOf(id, CallDeadline());
    auto got = co_await std::move(got_listing);
    if (!want.ok() || !got.ok()) {
      Differ(id, "reports: cannot be read");
      co_return;
    }
    for (const auto& r : *want) {
      const bool found =
          std::any_of(got->begin(), got->end(), [&](const auto& g) { return SameReport(r, g); });
      if (!found) Differ(id, "reports: the report of network " + r.network + " is missing");
    }
  }

  std::string state_path() const { return o_.state.empty() ? o_.to + ".migrate-state" : o_.state; }

  const MigrateStoreOptions& o_;
  Side& source_;
  Side& target_;
  const std::string from_key_;
  SystemClock& clock_ = SystemClock::Instance();
  admission::TokenBucket bucket_;
  int64_t now_ = 0;
  uint64_t total_ = 0, done_before_ = 0;
  uint64_t moved_ = 0, already_ = 0, expired_ = 0, deleted_ = 0, bytes_ = 0;
  uint64_t verified_ = 0, differences_ = 0, blocked_contents_ = 0;
  migrate::NoticeCopy notices_;
  // The window's pass: live rows alike on both sides, dead ones (expired, deleted) with nothing
  // to do, and rows copied again.
  uint64_t unchanged_ = 0, dead_unchanged_ = 0, changed_ = 0;
  TimePoint started_{}, last_progress_{};
};

}  // namespace

CLI::App* AddMigrateStoreCommand(CLI::App& admin, MigrateStoreOptions& o) {
  CLI::App* cmd = admin.add_subcommand(
      "migrate-store",
      "Copy every live paste from one set of backends to another, resumably, then verify "
      "(docs/scale-out.md, 'Outgrowing one box'); talks to the stores, not the listener");
  cmd->add_option("--from", o.from, "The source's settings file (TOML, as serve --config reads)")
      ->required();
  cmd->add_option("--to", o.to, "The target's settings file")->required();
  cmd->add_option("--state", o.state,
                  "Where the cursor is kept between runs (default: the --to file + "
                  ".migrate-state)");
  cmd->add_flag("--dry-run", o.dry_run, "Report what would move; write nothing");
  cmd->add_flag("--verify-only", o.verify_only, "Compare the target with the source; copy nothing");
  cmd->add_option("--rate", o.rate, "Pastes per second read from the source at most; 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--page", o.page, "Rows per page of the source's listing and per saved cursor")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--jobs", o.jobs, "Pastes of a page copied at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--changed", o.changed,
                "The cutover's last pass, in the read-only window: compare each row with the "
                "target's and copy and verify only the pastes that changed (new, deleted, views "
                "spent, moderation, reports)");
  return cmd;
}

int RunMigrateStore(const MigrateStoreOptions& o) {
  constexpr auto kCommand = "sluice admin migrate-store";
  // Before the stores, so they go first: the S3 store's sockets live on `io`, and the SQLite
  // stores' work on the pools.
  asio::io_context io(1);
  // As many threads as pastes in flight, so that the embedded stores' blocking calls (SQLite,
  // fsync'd files) are not the queue the jobs wait in.
  const size_t threads = std::max<size_t>(2, o.jobs);
  asio::thread_pool read_pool(threads), cleanup_pool(threads), moderation_pool(1);
  Side source{"source", {}, {}, {}, {}, nullptr, {}};
  Side target{"target", {}, {}, {}, {}, nullptr, {}};
  try {
    source.settings = ReadSettingsFile(o.from);
    target.settings = ReadSettingsFile(o.to);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kCommand, e.what());
    return 2;
  }
  source.data_dir = source.settings.String("data_dir");
  target.data_dir = target.settings.String("data_dir");
  std::error_code ec;
  const auto same_dir = std::filesystem::exists(source.data_dir, ec) &&
                        std::filesystem::exists(target.data_dir, ec) &&
                        std::filesystem::equivalent(source.data_dir, target.data_dir, ec);
  const bool same_meta = same_dir && Embedded(source.settings) && Embedded(target.settings);
  if (same_meta && source.settings.String("blob") == target.settings.String("blob")) {
    std::fprintf(stderr, "%s: --from and --to name the same stores\n", kCommand);
    return 2;
  }
  if (!Embedded(source.settings) &&
      source.settings.String("meta") == target.settings.String("meta") &&
      source.settings.String("blob") == target.settings.String("blob")) {
    std::fprintf(stderr, "%s: --from and --to name the same stores\n", kCommand);
    return 2;
  }

  const store::BlockingPools pools{&read_pool, &cleanup_pool, &moderation_pool};
  service::CallTimeouts timeouts;
  timeouts.meta_insert = timeouts.meta_get = timeouts.meta_delete = timeouts.meta_background =
      timeouts.meta_moderation = kCallTimeout;
  int code = 1;
  try {
    // The source is only read, so a server may keep serving it: SQLite in WAL mode lets this
    // process read beside the server's writer, each read a consistent snapshot, and files and
    // buckets are read by id. Its data dir lock is left to the server. An embedded target is
    // written, so it must be nobody else's: its lock is taken (and a running server refuses).
    if (Embedded(target.settings) && !o.dry_run && !o.verify_only) {
      std::filesystem::create_directories(target.data_dir);
      target.lock.emplace(target.data_dir);
    }
    source.own_meta = MakeMetaStore(source.settings, timeouts, pools, source.data_dir);
    source.meta = source.own_meta.get();
    source.blobs =
        MakeBlobBackend(source.settings, source.data_dir, pools, io.get_executor(), *source.meta);
    if (same_meta) {
      // Bodies moving out of one data dir (files to S3): one metadata store, opened once.
      target.meta = source.meta;
    } else {
      target.own_meta = MakeMetaStore(target.settings, timeouts, pools, target.data_dir);
      target.meta = target.own_meta.get();
    }
    target.blobs =
        MakeBlobBackend(target.settings, target.data_dir, pools, io.get_executor(), *target.meta);
    const std::string from_key = std::filesystem::absolute(o.from).lexically_normal().string();
    Migration migration(o, source, target, from_key);
    std::exception_ptr failed;
    asio::co_spawn(io, migration.Run(), [&](std::exception_ptr e, int result) {
      failed = e;
      code = result;
    });
    io.run();
    if (failed) std::rethrow_exception(failed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kCommand, e.what());
    code = 1;
  }
  return code;
}

}  // namespace sluice::app
