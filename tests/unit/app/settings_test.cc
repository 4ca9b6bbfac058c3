// The settings of `sluice serve` (src/app/settings.cc): durations keep their precision, every
// declared range is enforced at start with a message naming the key, the value and what is allowed.
#include "../../../src/app/settings.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "sluice/common/duration.h"

namespace sluice::app {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Parses `args` as `sluice serve ARGS` would and resolves them.
Settings FromFlags(std::vector<std::string> args) {
  CLI::App app;
  SettingsLoader loader(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them backwards
  app.parse(reversed);
  return loader.Resolve();
}

// The message a refused setting stops the start with, or "" when it was accepted.
template <typename Make>
std::string Refusal(Make make) {
  try {
    make();
  } catch (const SettingsError& e) {
    return e.what();
  }
  return "";
}

TEST(SettingsTest, DurationsKeepTheirPrecision) {
  const Settings s = FromFlags(
      {"--header-timeout", "500ms", "--create-budget", "1.5s", "--cache-timeout", "500us"});
  EXPECT_EQ(s.Duration("header_timeout"), milliseconds(500));
  EXPECT_EQ(s.Duration("create_budget"), milliseconds(1500));
  EXPECT_EQ(s.Duration("cache_timeout"), microseconds(500));
}

TEST(SettingsTest, DurationsFromAConfigFileKeepTheirPrecisionToo) {
  const Settings s = SettingsLoader::FromToml(
      "header_timeout = \"500ms\"\nput_timeout = \"1.5s\"\ncache_timeout = \"500us\"\n");
  EXPECT_EQ(s.Duration("header_timeout"), milliseconds(500));
  EXPECT_EQ(s.Duration("put_timeout"), milliseconds(1500));
  EXPECT_EQ(s.Duration("cache_timeout"), microseconds(500));
}

TEST(SettingsTest, OutOfRangeDurationNamesKeyValueAndRange) {
  EXPECT_EQ(Refusal([] {
              FromFlags({"--header-timeout", "0s"});
            }),
            "header_timeout = '0s': must be between 1ms and 1h (from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--cache-timeout", "11s"});
            }),
            "cache_timeout = '11s': must be between 1us and 10s (from flag/env)");
  EXPECT_EQ(Refusal([] { SettingsLoader::FromToml("idle_timeout = \"2h\"\n"); }),
            "idle_timeout = '2h': must be between 1ms and 1h (from config file)");
}

TEST(SettingsTest, UnparsableDurationNamesKeyValueUnitsAndRange) {
  for (const char* bad : {"10", "ten seconds", "-5s", "5d", "1e3ms"}) {
    const std::string message = Refusal([&] { FromFlags({"--put-timeout", bad}); });
    EXPECT_EQ(message, std::string("put_timeout = '") + bad +
                           "': must be a number and a unit (ns, us, ms, s, m, h) between 1ms and "
                           "10m (from flag/env)");
  }
  // A TOML number has no unit, so it is refused rather than read as seconds or milliseconds.
  EXPECT_NE(Refusal([] {
              SettingsLoader::FromToml("put_timeout = 5\n");
            }).find("put_timeout = '5': must be a number and a unit"),
            std::string::npos);
}

TEST(SettingsTest, IntegersNumbersChoicesAndBooleansAreChecked) {
  EXPECT_EQ(Refusal([] {
              FromFlags({"--create-slots", "0"});
            }),
            "create_slots = '0': must be a whole number between 1 and 1000000 (from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--create-slots", "4.5"});
            }),
            "create_slots = '4.5': must be a whole number between 1 and 1000000 (from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--ip-create-rate", "0"});
            }),
            "ip_create_rate = '0': must be a number above 0 and at most 1e15 (from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--highlight-utilization", "nan"});
            }),
            "highlight_utilization = 'nan': must be a number above 0 and at most 1 (from "
            "flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--create-cap", "dynamic"});
            }),
            "create_cap = 'dynamic': must be one of static, aimd (from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--log-level", "verbose"});
            }),
            "log_level = 'verbose': must be one of trace, debug, info, warn, error, critical, off "
            "(from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--verify-bodies", "maybe"});
            }),
            "verify_bodies = 'maybe': must be true or false (from flag/env)");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--default-ttl", "2h"});
            }),
            "default_ttl = '2h': must be one of 10m, 1h, 1d, 1w, 30d (from flag/env)");
}

TEST(SettingsTest, TextAndListSettingsAreChecked) {
  EXPECT_NE(Refusal([] {
              FromFlags({"--listen", "8080"});
            }).find("listen = '8080': must be HOST:PORT"),
            std::string::npos);
  EXPECT_NE(Refusal([] {
              FromFlags({"--listen", "127.0.0.1:70000"});
            }).find("listen"),
            std::string::npos);
  EXPECT_NE(Refusal([] {
              FromFlags({"--meta", "mysql://x"});
            }).find("meta = 'mysql://x'"),
            std::string::npos);
  EXPECT_NE(Refusal([] {
              FromFlags({"--trusted-proxy", "10.0.0.0/8, not-an-ip"});
            }).find("trusted_proxy = '10.0.0.0/8, not-an-ip': each entry must be"),
            std::string::npos);
  EXPECT_EQ(Refusal([] { FromFlags({"--trusted-proxy", "10.0.0.0/8, 192.168.1.1"}); }), "");
  EXPECT_EQ(Refusal([] { FromFlags({"--listen", "127.0.0.1:0", "--cache", "redis://h:1"}); }), "");
}

// admin_listen: HOST:PORT or an absolute Unix socket path that fits sun_path (107 bytes).
TEST(SettingsTest, AdminListenTakesAnAbsoluteUnixSocketPath) {
  EXPECT_EQ(Refusal([] { FromFlags({"--admin-listen", "unix:/run/sluice/admin.sock"}); }), "");
  EXPECT_EQ(Refusal([] { FromFlags({"--admin-listen", "/run/sluice/admin.sock"}); }), "");
  EXPECT_EQ(Refusal([] { FromFlags({"--admin-listen", "/" + std::string(106, 'a')}); }), "");
  EXPECT_NE(Refusal([] {
              FromFlags({"--admin-listen", "unix:run/admin.sock"});
            }).find("must be absolute"),
            std::string::npos);
  EXPECT_NE(Refusal([] {
              FromFlags({"--admin-listen", "unix:"});
            }).find("must be absolute"),
            std::string::npos);
  EXPECT_NE(Refusal([] {
              FromFlags({"--admin-listen", "/" + std::string(107, 'a')});
            }).find("at most 107 bytes; this one is 108"),
            std::string::npos);
  EXPECT_NE(Refusal([] {
              FromFlags({"--admin-listen", "admin.sock"});
            }).find("HOST:PORT"),
            std::string::npos);
}

TEST(SettingsTest, RulesBetweenSettingsNameBothKeys) {
  EXPECT_EQ(Refusal([] {
              FromFlags({"--default-ttl", "30d", "--max-ttl", "1d"});
            }),
            "default_ttl = '30d' is longer than max_ttl = '1d'");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--retry-after-min", "20"});
            }),
            "retry_after_min = '20' is above retry_after_max = '15'");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--render-delay", "100ms"});
            }),
            "render_delay = '100ms' needs fault_injection = 'true'");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--render-delay", "100ms", "--fault-injection", "true"});
            }),
            "");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--faults", "meta.get:refuse"});
            }),
            "faults = 'meta.get:refuse' needs fault_injection = 'true'");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--s3-endpoint", "http://127.0.0.1:9000"});
            }),
            "s3_endpoint = 'http://127.0.0.1:9000' is set but blob = 'files' is not s3://BUCKET");
  EXPECT_EQ(Refusal([] {
              FromFlags({"--pressure-start", "0.95"});
            }),
            "pressure_start = '0.95' is above pressure_full = '0.9'");
}

TEST(SettingsTest, BoundsAreAccepted) {
  const Settings s =
      FromFlags({"--header-timeout", "1ms", "--idle-timeout", "1h", "--cache-timeout", "1us",
                 "--highlight-utilization", "1", "--retry-budget-ratio", "0", "--threads", "0"});
  EXPECT_EQ(s.Duration("header_timeout"), milliseconds(1));
  EXPECT_EQ(s.Duration("cache_timeout"), microseconds(1));
  EXPECT_EQ(s.Number("highlight_utilization"), 1);
}

TEST(SettingsTest, EveryDeclarationIsCoherentAndItsDefaultWithinItsOwnRange) {
  ASSERT_FALSE(ServeSettings().empty());
  for (const SettingSpec& spec : ServeSettings()) {
    SCOPED_TRACE(spec.key);
    EXPECT_EQ(CheckValue(spec, spec.default_value), std::nullopt);
    switch (spec.type) {
      case SettingType::kInteger:
      case SettingType::kNumber:
        ASSERT_NE(spec.min, nullptr);
        ASSERT_NE(spec.max, nullptr);
        EXPECT_LE(std::stod(spec.min), std::stod(spec.max));
        // Each bound is itself allowed (unless the declaration excludes the lower one).
        if (!spec.min_exclusive) {
          EXPECT_EQ(CheckValue(spec, spec.min), std::nullopt);
        }
        EXPECT_EQ(CheckValue(spec, spec.max), std::nullopt);
        break;
      case SettingType::kDuration:
        ASSERT_NE(spec.min, nullptr);
        ASSERT_NE(spec.max, nullptr);
        ASSERT_TRUE(ParseDuration(spec.min).ok());
        ASSERT_TRUE(ParseDuration(spec.max).ok());
        EXPECT_LE(*ParseDuration(spec.min), *ParseDuration(spec.max));
        EXPECT_EQ(CheckValue(spec, spec.min), std::nullopt);
        EXPECT_EQ(CheckValue(spec, spec.max), std::nullopt);
        break;
      case SettingType::kChoice:
        ASSERT_NE(spec.choices, nullptr);
        break;
      default:
        break;
    }
  }
  // And the defaults together pass the rules between settings.
  EXPECT_EQ(Refusal([] { FromFlags({}); }), "");
  EXPECT_EQ(Refusal([] { SettingsLoader::FromToml(""); }), "");
}

TEST(SettingsTest, HelpShowsEachRangeAndEveryDefault) {
  CLI::App app;
  SettingsLoader loader(app);
  const std::string help = app.help();
  EXPECT_NE(help.find("--header-timeout TEXT=10s"), std::string::npos) << help;
  EXPECT_NE(help.find("(between 1ms and 1h)"), std::string::npos) << help;
  for (const SettingSpec& spec : ServeSettings()) {
    std::string flag = std::string("--") + spec.key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    EXPECT_NE(help.find(flag + " "), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace sluice::app
