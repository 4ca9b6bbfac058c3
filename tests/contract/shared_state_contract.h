// The SharedState contract, one suite for every backend: instantiate it with a factory (see
// shared_state_contract_test.cc for the in-memory store, tests/backend for Redis). Refill rates are
// tiny so that no test depends on how much time passes between two calls on a busy machine.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../support/run_sync.h"
#include "sluice/store/shared_state.h"

namespace sluice::testing {

using SharedStateFactory = std::function<std::unique_ptr<store::SharedState>()>;

class SharedStateContract : public ::testing::TestWithParam<SharedStateFactory> {
 protected:
  void SetUp() override { state_ = GetParam()(); }

  Result<store::SharedTakeDecision> Take(std::vector<store::BucketTake> takes) {
    return RunSync(state_->TakeAll(std::move(takes), Deadline()));
  }
  Status Refund(std::vector<store::BucketTake> takes) {
    return RunSync(state_->Refund(std::move(takes), Deadline()));
  }
  Result<std::vector<double>> Peek(std::vector<store::BucketTake> buckets) {
    return RunSync(state_->PeekAll(std::move(buckets), Deadline()));
  }
  static admission::Deadline Deadline() {
    return admission::Deadline::After(SystemClock::Instance(), std::chrono::seconds(5));
  }
  static store::PasteId Id(const char* text) { return *store::PasteId::Parse(text); }

  // Refills one token in about three hours: nothing comes back during a test.
  static constexpr admission::TokenBucketPolicy Slow(double burst) { return {0.0001, burst}; }

  std::unique_ptr<store::SharedState> state_;
};

TEST_P(SharedStateContract, TakeSpendsEveryBucketOrNone) {
  auto first = Take({{"a", Slow(5), 2}, {"b", Slow(1), 1}});
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first->allowed);
  auto refused = Take({{"a", Slow(5), 2}, {"b", Slow(1), 1}});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->refused_index, 1);
  // The refused take left a's 3 tokens alone.
  EXPECT_TRUE(Take({{"a", Slow(5), 3}})->allowed);
  EXPECT_FALSE(Take({{"a", Slow(5), 1}})->allowed);
}

TEST_P(SharedStateContract, RefusalSaysWhichBucketAndHowLong) {
  const admission::TokenBucketPolicy hundredth{0.01, 2};
  ASSERT_TRUE(Take({{"c", hundredth, 2}})->allowed);
  auto refused = Take({{"d", Slow(9), 1}, {"c", hundredth, 2}});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->refused_index, 1);
  EXPECT_FALSE(refused->exceeds_burst);
  EXPECT_LT(refused->available, 2);
  EXPECT_GT(refused->retry_after, Duration::zero());
  EXPECT_LE(refused->retry_after, std::chrono::seconds(201));  // 2 tokens at 0.01/s
  // d was checked first and allowed, but nothing was taken from it either.
  EXPECT_TRUE(Take({{"d", Slow(9), 9}})->allowed);
}

TEST_P(SharedStateContract, TakeOverTheBurstCanNeverSucceed) {
  auto refused = Take({{"e", Slow(10), 11}});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed);
  EXPECT_TRUE(refused->exceeds_burst);
  EXPECT_TRUE(Take({{"e", Slow(10), 10}})->allowed);  // and it spent nothing
}

TEST_P(SharedStateContract, PeekReadsEveryBucketInOrderAndSpendsNothing) {
  ASSERT_TRUE(Take({{"p", Slow(5), 2}, {"q", Slow(4), 4}})->allowed);
  auto peeked = Peek({{"never", Slow(7), 1}, {"p", Slow(5), 1}, {"q", Slow(4), 1}});
  ASSERT_TRUE(peeked.ok()) << peeked.error().message;
  ASSERT_EQ(peeked->size(), 3u);
  EXPECT_NEAR((*peeked)[0], 7, 0.01);  // never seen: full
  EXPECT_NEAR((*peeked)[1], 3, 0.01);
  EXPECT_NEAR((*peeked)[2], 0, 0.01);  // drained, and read as 0, never below
  // The peek (whose costs are ignored) took nothing: p still holds its 3.
  EXPECT_TRUE(Take({{"p", Slow(5), 3}})->allowed);
  EXPECT_NEAR((*Peek({{"p", Slow(5), 1}}))[0], 0, 0.01);
}

TEST_P(SharedStateContract, RefundGivesTokensBackButNeverPastTheBurst) {
  ASSERT_TRUE(Take({{"f", Slow(2), 2}})->allowed);
  ASSERT_TRUE(Refund({{"f", Slow(2), 1}}).ok());
  EXPECT_TRUE(Take({{"f", Slow(2), 1}})->allowed);
  EXPECT_FALSE(Take({{"f", Slow(2), 1}})->allowed);
  ASSERT_TRUE(Refund({{"f", Slow(2), 50}}).ok());
  EXPECT_TRUE(Take({{"f", Slow(2), 2}})->allowed);
  EXPECT_FALSE(Take({{"f", Slow(2), 1}})->allowed);
}

TEST_P(SharedStateContract, MetaCacheMissesThenHoldsTheRow) {
  const auto id = Id("AbCdEf012345");
  auto miss = RunSync(state_->GetMeta(id, Deadline()));
  ASSERT_TRUE(miss.ok()) << miss.error().message;
  EXPECT_FALSE(miss->has_value());
  store::PasteMeta row{id, 1'700'000'000, 1'700'604'800, 42, {}, false, {}};
  row.token_hash[0] = 0xab;
  row.token_hash[31] = 0x01;
  ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
  auto hit = RunSync(state_->GetMeta(id, Deadline()));
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->created_at, row.created_at);
  EXPECT_EQ((*hit)->expires_at, row.expires_at);
  EXPECT_EQ((*hit)->size_bytes, 42u);
  EXPECT_EQ((*hit)->token_hash, row.token_hash);
  EXPECT_FALSE((*hit)->deleted);
  EXPECT_FALSE((*hit)->body_sha256.has_value());  // none stays none
}

// A read served from the cached row checks the body against it: the checksum must travel too.
TEST_P(SharedStateContract, MetaCacheCarriesTheBodyChecksum) {
  const auto id = Id("SuM000000001");
  store::PasteMeta row{id, 1'700'000'000, 1'700'604'800, 42, {}, false, store::BodyDigest{}};
  for (size_t i = 0; i < row.body_sha256->size(); ++i) {
    (*row.body_sha256)[i] = static_cast<unsigned char>(0xf0 - i);
  }
  ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
  auto hit = RunSync(state_->GetMeta(id, Deadline()));
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->size_bytes, 42u);
  EXPECT_EQ((*hit)->body_sha256, row.body_sha256);
}

// Moderation puts live rows here (src/service/moderation.cc): a withheld row must still say 451,
// and a burn row read back must still be a burn row, or a plain GET would serve its text.
TEST_P(SharedStateContract, MetaCacheCarriesModerationAndBurn) {
  for (const auto state : {store::Moderation::kWithheld, store::Moderation::kNone}) {
    // PutMeta never replaces an entry: one id per case.
    const auto id = Id(state == store::Moderation::kNone ? "BuRn00000001" : "BuRn00000002");
    store::PasteMeta row{id, 1'700'000'000, 1'700'604'800, 42, {}, false, {}};
    row.burn = true;
    row.moderation = state;
    ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
    auto hit = RunSync(state_->GetMeta(id, Deadline()));
    ASSERT_TRUE(hit.ok());
    ASSERT_TRUE(hit->has_value());
    EXPECT_TRUE((*hit)->burn);
    EXPECT_EQ((*hit)->moderation, state);
  }
}

TEST_P(SharedStateContract, TombstoneReplacesTheRowAndAFillCannotUndoIt) {
  const auto id = Id("ZZZZZZ000000");
  store::PasteMeta row{id, 1'700'000'000, 1'700'604'800, 5, {}, false, {}};
  store::PasteMeta tombstone = row;
  tombstone.deleted = true;
  ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
  ASSERT_TRUE(RunSync(state_->Invalidate(tombstone, std::chrono::seconds(60), Deadline())).ok());
  ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
  auto got = RunSync(state_->GetMeta(id, Deadline()));
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE((*got)->deleted);
}

// Moderation's invalidation carries the row in its new state: withheld, then served again after a
// dismissal. It must stay that row, never a deleted one (a dismissed paste answered 404 from every
// other process for the entry's lifetime), and a racing fill with the older row cannot replace it.
TEST_P(SharedStateContract, AModeratedRowIsKeptAsGivenNotAsATombstone) {
  const auto id = Id("ZZZZZZ000001");
  store::PasteMeta row{id, 1'700'000'000, 1'700'604'800, 5, {}, false, {}};
  store::PasteMeta withheld = row;
  withheld.moderation = store::Moderation::kWithheld;
  ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
  ASSERT_TRUE(RunSync(state_->Invalidate(withheld, std::chrono::seconds(60), Deadline())).ok());
  ASSERT_TRUE(RunSync(state_->PutMeta(row, std::chrono::seconds(60), Deadline())).ok());
  auto got = RunSync(state_->GetMeta(id, Deadline()));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_FALSE((*got)->deleted);
  EXPECT_EQ((*got)->moderation, store::Moderation::kWithheld);
  ASSERT_TRUE(RunSync(state_->Invalidate(row, std::chrono::seconds(60), Deadline())).ok());
  got = RunSync(state_->GetMeta(id, Deadline()));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_FALSE((*got)->deleted);
  EXPECT_EQ((*got)->moderation, store::Moderation::kNone);
}

TEST_P(SharedStateContract, InvalidationReachesSubscribers) {
  std::mutex mu;
  std::vector<std::string> seen;
  state_->SubscribeInvalidations([&](const store::PasteId& id) {
    std::lock_guard lock(mu);
    seen.push_back(id.str());
  });
  const auto id = Id("inval1234567");
  store::PasteMeta row{id, 1, 2'000'000'000, 5, {}, false, {}};
  // A subscription is asynchronous on a real server: announce until it is heard, then check.
  for (int attempt = 0; attempt < 100; ++attempt) {
    ASSERT_TRUE(RunSync(state_->Invalidate(row, std::chrono::seconds(60), Deadline())).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard lock(mu);
    if (!seen.empty()) break;
  }
  std::lock_guard lock(mu);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), "inval1234567");
}

}  // namespace sluice::testing
