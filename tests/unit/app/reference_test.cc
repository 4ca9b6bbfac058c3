// The man page and the example configuration (src/app/reference.cc) come from the settings'
// declarations: every setting is in both, and the example, uncommented, is exactly the defaults.
// docs/configuration.md comes from them too.
#include "../../../src/app/reference.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <sstream>
#include <string>

#include "../../../src/app/reload.h"
#include "../../../src/app/settings.h"

namespace sluice::app {
namespace {

// The example with every `#key = value` line made a setting.
std::string Uncommented(const std::string& example) {
  std::istringstream in(example);
  std::string line, out;
  int keys = 0;
  while (std::getline(in, line)) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' &&
        line.find(" = ") != std::string::npos) {
      out += line.substr(1) + "\n";
      ++keys;
    } else {
      out += line + "\n";
    }
  }
  EXPECT_EQ(keys, static_cast<int>(ServeSettings().size()));
  return out;
}

TEST(ExampleConfig, EveryKeyIsCommentedOutAtItsDefault) {
  const std::string example = ExampleConfig("test");
  // Commented out, the file changes nothing.
  const Settings as_is = SettingsLoader::FromToml(example);
  for (const SettingSpec& spec : ServeSettings()) {
    EXPECT_EQ(as_is.Source(spec.key), "default") << spec.key;
  }
  // Uncommented, every key is set, to the value it had.
  const Settings uncommented = SettingsLoader::FromToml(Uncommented(example));
  for (const SettingSpec& spec : ServeSettings()) {
    EXPECT_EQ(uncommented.Source(spec.key), "config file") << spec.key;
    EXPECT_EQ(uncommented.String(spec.key), spec.default_value) << spec.key;
  }
}

TEST(ExampleConfig, EachKeyHasItsHelpFlagAndVariable) {
  const std::string example = ExampleConfig("test");
  for (const SettingSpec& spec : ServeSettings()) {
    const size_t at = example.find("\n#" + std::string(spec.key) + " = ");
    ASSERT_NE(at, std::string::npos) << spec.key;
    // The comment block above the key names its flag and variable.
    const size_t block = example.rfind("\n\n", at);
    const std::string comment = example.substr(block, at - block);
    EXPECT_NE(comment.find(FlagName(spec) + ","), std::string::npos) << comment;
    EXPECT_NE(comment.find(EnvName(spec) + "."), std::string::npos) << comment;
    // The first words of the help (wrapping may split the rest across lines).
    const std::string help = spec.help;
    EXPECT_NE(comment.find(help.substr(0, help.find(' '))), std::string::npos) << comment;
  }
}

// From the one list of live keys (src/app/reload.cc), so README.md can send readers here.
TEST(ExampleConfig, EachKeySaysWhetherAReloadAppliesIt) {
  const std::string example = ExampleConfig("test");
  for (const SettingSpec& spec : ServeSettings()) {
    const size_t at = example.find("\n#" + std::string(spec.key) + " = ");
    ASSERT_NE(at, std::string::npos) << spec.key;
    const size_t block = example.rfind("\n\n", at);
    std::string comment = example.substr(block, at - block);
    // Unwrapped: a note may be split across two comment lines.
    for (size_t nl; (nl = comment.find("\n# ")) != std::string::npos;) comment.replace(nl, 3, " ");
    const bool live = comment.find("SIGHUP applies it to new requests.") != std::string::npos;
    const bool restart = comment.find("Takes a restart to change.") != std::string::npos;
    EXPECT_NE(live, restart) << spec.key;
    EXPECT_EQ(live, IsLiveSetting(spec.key)) << spec.key;
  }
}

TEST(ManPage, ListsEveryCommandAndSetting) {
  CLI::App app{"sluice: test"};
  CLI::App* serve = app.add_subcommand("serve", "Serve the pastebin over HTTP");
  SettingsLoader loader(*serve);
  CLI::App* plan = app.add_subcommand("plan", "What the caps let through");
  int slots = 50;
  plan->add_option("--slots", slots, "In-flight slots per process")->capture_default_str();
  const std::string page = ManPage(app, "9.9.9");
  EXPECT_EQ(page.rfind(".TH SLUICE 1 \"\" \"sluice 9.9.9\"", 0), 0u) << page.substr(0, 80);
  EXPECT_NE(page.find(".SS \"sluice serve\""), std::string::npos);
  EXPECT_NE(page.find(".SS \"sluice plan\""), std::string::npos);
  EXPECT_NE(page.find(".BI \\-\\-slots \" \" VALUE\nIn-flight slots per process (default: 50)"),
            std::string::npos);
  EXPECT_NE(page.find(".BI \\-\\-config \" \" VALUE"), std::string::npos);
  for (const SettingSpec& spec : ServeSettings()) {
    std::string flag;
    for (char c : FlagName(spec)) flag += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_NE(page.find(".BI " + flag + " \" \" VALUE\n"), std::string::npos) << spec.key;
    std::string env;
    for (char c : EnvName(spec)) env += c == '-' ? std::string("\\-") : std::string(1, c);
    EXPECT_NE(page.find("variable \\fB" + env + "\\fR"), std::string::npos) << spec.key;
  }
  // Settings are described once, under SETTINGS, not again among serve's options.
  const std::string listen = ".BI \\-\\-listen \" \" VALUE";
  EXPECT_EQ(page.find(listen), page.rfind(listen));
  // No line may start with a control character the text did not mean.
  std::istringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with("'")) ADD_FAILURE() << line;
  }
}

// docs/configuration.md (`sluice config --markdown`): one heading per setting, in declaration
// order, each with its flag, variable and reload note, and help text that Markdown cannot misread.
TEST(ConfigurationMarkdown, EachSettingHasItsHeadingFlagVariableAndReloadNote) {
  const std::string doc = ConfigurationMarkdown();
  size_t at = 0;
  for (const SettingSpec& spec : ServeSettings()) {
    const size_t heading = doc.find("\n### " + std::string(spec.key) + "\n", at);
    ASSERT_NE(heading, std::string::npos) << spec.key << " missing or out of order";
    const size_t next = doc.find("\n### ", heading + 1);
    const std::string section = doc.substr(heading, next - heading);
    EXPECT_NE(section.find("Flag `" + FlagName(spec) + "`, variable `" + EnvName(spec) + "`"),
              std::string::npos)
        << section;
    EXPECT_NE(section.find(IsLiveSetting(spec.key) ? "*SIGHUP applies it* to new requests."
                                                   : "Takes a restart to change."),
              std::string::npos)
        << section;
    at = heading + 1;
  }
  EXPECT_EQ(doc.rfind("# Configuration reference\n", 0), 0u);
}

}  // namespace
}  // namespace sluice::app
