// What a reload (src/app/reload.cc) applies live and what it says needs a restart: every declared
// key is one or the other, the live ones are compared with the last reload and the others with the
// start, so a restart-only change is named again at every reload until the process restarts.
#include "../../../src/app/reload.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../../src/app/settings.h"

namespace sluice::app {
namespace {

using Keys = std::vector<std::string>;

TEST(ReloadTest, TheLiveKeysAreDeclaredSettings) {
  const Keys keys = SettingsLoader::Keys();
  int live = 0;
  for (const std::string& key : keys) live += IsLiveSetting(key) ? 1 : 0;
  // Every key of the live list exists (a rename in settings.cc would otherwise silently make a
  // key restart-only): the list in reload.cc has 97.
  EXPECT_EQ(live, 97);
  EXPECT_TRUE(IsLiveSetting("ip_create_rate"));
  EXPECT_TRUE(IsLiveSetting("trusted_proxy"));
  EXPECT_TRUE(IsLiveSetting("log_level"));
  // The cutover's window opens without a restart (docs/scale-out.md).
  EXPECT_TRUE(IsLiveSetting("read_only"));
  EXPECT_TRUE(IsLiveSetting("read_only_retry_after"));
  for (const char* key :
       {"create_access", "create_access_text", "create_networks", "create_networks_file",
        "forward_auth_header", "feeds", "feed_refuse_text", "feed_class_ip_create_rate",
        "feed_class_global_create_burst", "max_creator_tokens", "creator_tokens_refresh",
        "token_reserved_share", "proof_of_work_share", "proof_of_work_difficulty"}) {
    EXPECT_TRUE(IsLiveSetting(key)) << key;
  }
  EXPECT_FALSE(IsLiveSetting("listen"));
  EXPECT_FALSE(IsLiveSetting("data_dir"));
  EXPECT_FALSE(IsLiveSetting("meta"));
  EXPECT_FALSE(IsLiveSetting("create_cap"));
}

TEST(ReloadTest, TheLadderTheStoreTimeoutsTheBreakersAndTheBudgetAreLive) {
  for (const char* key :
       {"highlight_slots", "render_timeout", "render_delay", "large_paste_bytes",
        "highlight_utilization", "shed_release_rate", "put_timeout", "insert_timeout",
        "meta_get_timeout", "blob_get_timeout", "cache_timeout", "breaker_refusals",
        "breaker_open_for", "breaker_open_for_failover", "retry_budget_ratio",
        "report_hide_threshold", "put_bytes_per_day_plan", "verify_bodies", "local_cache_ttl"}) {
    EXPECT_TRUE(IsLiveSetting(key)) << key;
  }
  // Each with its reason in reload.cc.
  for (const char* key : {"highlight_cache_bytes", "cache_bytes", "sweep_interval", "reap_interval",
                          "background_share", "orphan_age_floor", "edge_purge", "fault_injection",
                          "faults", "inline_body_bytes", "metrics_on_public", "admin_token_file"}) {
    EXPECT_FALSE(IsLiveSetting(key)) << key;
  }
}

TEST(ReloadTest, ABreakerAndALadderChangeAreLiveAndACapKindIsNot) {
  const Settings start = SettingsLoader::FromToml("");
  const Settings next = SettingsLoader::FromToml(
      "breaker_refusals = 9\nrender_timeout = \"50ms\"\ncreate_cap = \"aimd\"\n");
  const ReloadChanges changes = CompareForReload(start, start, next);
  EXPECT_EQ(changes.live, (Keys{"breaker_refusals", "render_timeout"}));
  EXPECT_EQ(changes.restart, Keys{"create_cap"});
}

TEST(ReloadTest, SplitsChangesIntoLiveAndRestart) {
  const Settings start = SettingsLoader::FromToml("ip_create_rate = 1\n");
  const Settings next =
      SettingsLoader::FromToml("ip_create_rate = 5\nlisten = \"127.0.0.1:9\"\nthreads = 3\n");
  const ReloadChanges changes = CompareForReload(start, start, next);
  EXPECT_EQ(changes.live, Keys{"ip_create_rate"});
  EXPECT_EQ(changes.restart, (Keys{"listen", "threads"}));
}

TEST(ReloadTest, ARestartOnlyChangeIsNamedAgainUntilRestartedAndALiveOneOnlyOnce) {
  const Settings start = SettingsLoader::FromToml("");
  const Settings first = SettingsLoader::FromToml("ip_create_rate = 5\nthreads = 3\n");
  const Settings second = SettingsLoader::FromToml("ip_create_rate = 5\nthreads = 3\n");
  const ReloadChanges changes = CompareForReload(start, first, second);
  EXPECT_TRUE(changes.live.empty());
  EXPECT_EQ(changes.restart, Keys{"threads"});
  // Back to the start's value: nothing to restart for any more.
  const ReloadChanges back =
      CompareForReload(start, second, SettingsLoader::FromToml("ip_create_rate = 5\n"));
  EXPECT_TRUE(back.restart.empty());
}

TEST(ReloadTest, NothingChangedIsNothing) {
  const Settings s = SettingsLoader::FromToml("report_rate = 2\n");
  const ReloadChanges changes =
      CompareForReload(s, s, SettingsLoader::FromToml("report_rate = 2\n"));
  EXPECT_TRUE(changes.live.empty());
  EXPECT_TRUE(changes.restart.empty());
}

}  // namespace
}  // namespace sluice::app
