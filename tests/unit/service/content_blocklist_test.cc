// Takedowns that stick (docs/moderation.md): the in-memory list, a takedown that fills it, the
// create that is refused before anything is stored, and a second "process" on the same store that
// learns of a change only when the store's version moved.
#include "sluice/service/content_blocklist.h"

#include <gtest/gtest.h>

#include <cctype>

#include "../../support/run_sync.h"
#include "sluice/service/body_check.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_service.h"
#include "sluice/store/backends.h"

namespace sluice::service {
namespace {

using testing::RunSync;

TEST(ContentBlocklistTest, HexRoundTripsAndRefusesAnythingButSixtyFourDigits) {
  const store::BodyDigest d = DigestBody("abc");
  const std::string hex = ContentBlocklist::Hex(d);
  EXPECT_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ContentBlocklist::ParseHex(hex), d);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(ContentBlocklist::ParseHex(upper), d);
  EXPECT_FALSE(ContentBlocklist::ParseHex(hex.substr(1)));
  EXPECT_FALSE(ContentBlocklist::ParseHex(hex + "0"));
  EXPECT_FALSE(ContentBlocklist::ParseHex(std::string(63, 'a') + "g"));
  EXPECT_FALSE(ContentBlocklist::ParseHex(""));
}

TEST(ContentBlocklistTest, AddRemoveAndReplace) {
  ContentBlocklist list;
  const store::BodyDigest a = DigestBody("a"), b = DigestBody("b"), c = DigestBody("c");
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.version(), -1);
  list.Add(b);
  list.Add(a);
  list.Add(a);
  EXPECT_EQ(list.size(), 2u);
  EXPECT_TRUE(list.Contains(a));
  EXPECT_TRUE(list.Contains(b));
  EXPECT_FALSE(list.Contains(c));
  list.Remove(a);
  list.Remove(c);  // absent: nothing
  EXPECT_FALSE(list.Contains(a));
  EXPECT_EQ(list.size(), 1u);
  list.Replace({c, a, c}, 7);
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.version(), 7);
  EXPECT_FALSE(list.Contains(b));
  EXPECT_TRUE(list.Contains(c));
}

class BlockedContentTest : public ::testing::Test {
 protected:
  static AdmissionOptions Limits() {
    AdmissionOptions o;
    o.ip_create_count = o.global_create_count = {1e6, 1e6};
    o.ip_create_bytes = o.global_create_bytes = {1e12, 1e12};
    return o;
  }

  // One process: its own caches, lists and services on the shared stores.
  struct Process {
    Process(store::MetaStore& meta, store::BlobStore& blobs, ManualClock& manual)
        : clock(manual),
          admission(Limits(), clock, metrics),
          service(meta, blobs, cache, admission, clock, metrics, ServiceOptions{}, nullptr, &blocks,
                  nullptr, &contents),
          moderation(meta, blobs, cache, admission, blocks, clock, ModerationOptions{}, nullptr,
                     &service, &metrics, &contents) {}

    Result<CreatedPaste> Create(std::string body) {
      auto ticket = RunSync(service.AdmitCreate("192.0.2.1", {body.size(), false}));
      EXPECT_TRUE(ticket.ok());
      return RunSync(service.Create(std::move(*ticket), std::move(body), ""), clock);
    }
    uint64_t Refused() {
      return metrics.GetCounter("sluice_creates_refused_total", "", {{"reason", "blocked_content"}})
          .value();
    }

    ManualClock& clock;
    MetricsRegistry metrics;
    PasteCache cache{1 << 20};
    AdmissionControl admission;
    Blocklist blocks;
    ContentBlocklist contents;
    PasteService service;
    ModerationService moderation;
  };

  ManualClock clock_;
  std::unique_ptr<store::MetaStore> meta_ = store::MakeMemoryMetaStore();
  std::unique_ptr<store::BlobStore> blobs_ = store::MakeMemoryBlobStore(&clock_);
  Process a_{*meta_, *blobs_, clock_};
  Process b_{*meta_, *blobs_, clock_};
};

TEST_F(BlockedContentTest, ATakedownRefusesItsBytesAtOnceAndNothingIsStored) {
  auto first = a_.Create("the text");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(RunSync(a_.moderation.Takedown(first->id.view(), "illegal")).ok());
  auto again = a_.Create("the text");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kWithheld);
  EXPECT_EQ(again.error().reason, "blocked_content");
  EXPECT_EQ(a_.Refused(), 1u);
  EXPECT_EQ(RunSync(meta_->LiveBytes(admission::Deadline::Never())).value(), 0u)
      << "the refused create stored nothing";
  EXPECT_TRUE(a_.Create("the text ").ok()) << "other bytes are another text";
}

TEST_F(BlockedContentTest, AnotherProcessLearnsOfAChangeWhenItReadsTheListAgain) {
  auto created = a_.Create("shared text");
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(RunSync(b_.moderation.LoadBlockedContents()).ok());
  ASSERT_TRUE(RunSync(a_.moderation.Takedown(created->id.view(), "")).ok());
  EXPECT_TRUE(b_.Create("shared text").ok()) << "b has not read the list since";
  ASSERT_TRUE(RunSync(b_.moderation.LoadBlockedContents()).ok());
  EXPECT_FALSE(b_.Create("shared text").ok());
  const std::string hex = ContentBlocklist::Hex(DigestBody("shared text"));
  auto removed = RunSync(b_.moderation.UnblockContent(hex));
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  EXPECT_TRUE(b_.Create("shared text").ok());
  EXPECT_FALSE(a_.Create("shared text").ok()) << "a has not read the list since";
  ASSERT_TRUE(RunSync(a_.moderation.LoadBlockedContents()).ok());
  EXPECT_TRUE(a_.Create("shared text").ok());
}

TEST_F(BlockedContentTest, TheOperatorsBlocksAreCheckedAndListed) {
  EXPECT_EQ(RunSync(a_.moderation.BlockContent("xyz", "")).error().reason, "bad_sha256");
  EXPECT_EQ(RunSync(a_.moderation.UnblockContent(std::string(64, 'g'))).error().reason,
            "bad_sha256");
  const std::string hex = ContentBlocklist::Hex(DigestBody("named"));
  auto added = RunSync(a_.moderation.BlockContent(hex, "known"));
  ASSERT_TRUE(added.ok());
  EXPECT_TRUE(added->added);
  EXPECT_FALSE(RunSync(a_.moderation.BlockContent(hex, "again"))->added);
  EXPECT_FALSE(a_.Create("named").ok());
  auto page = RunSync(a_.moderation.BlockedContents(std::nullopt, 10));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].reason, "known");
  EXPECT_EQ(page->entries[0].source, "admin");
}

}  // namespace
}  // namespace sluice::service
