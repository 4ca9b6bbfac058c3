// libFuzzer target: the configuration file. Any TOML document must either resolve to settings or
// fail with the documented exceptions (std::runtime_error for the file, SettingsError, also a
// runtime_error, for a value its declaration refuses); once resolved, the read of each key's
// declared type must succeed, and every other typed read of every key must succeed or throw
// std::invalid_argument, never crash or throw anything else.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../src/app/settings.h"
#include "sluice/admission/client_key.h"
#include "sluice/service/text.h"

namespace {

template <typename Read>
void Tolerate(Read read) {
  try {
    read();
  } catch (const std::invalid_argument&) {
    // a value of the wrong shape: the documented refusal
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sluice::app::Settings settings;
  try {
    settings = sluice::app::SettingsLoader::FromToml(text);
  } catch (const std::runtime_error&) {
    return 0;  // not TOML, an unknown key, a value of the wrong type, or one out of range
  }
  for (const sluice::app::SettingSpec& spec : sluice::app::ServeSettings()) {
    // Accepted at start means readable as declared: a throw here escapes and fails the run.
    switch (spec.type) {
      case sluice::app::SettingType::kInteger:
        (void)settings.Integer(spec.key);
        break;
      case sluice::app::SettingType::kNumber:
        (void)settings.Number(spec.key);
        break;
      case sluice::app::SettingType::kBoolean:
        (void)settings.Boolean(spec.key);
        break;
      case sluice::app::SettingType::kDuration:
        (void)settings.Duration(spec.key);
        break;
      default:
        break;
    }
  }
  for (const std::string& key : sluice::app::SettingsLoader::Keys()) {
    Tolerate([&] { (void)settings.Integer(key); });
    Tolerate([&] { (void)settings.Number(key); });
    Tolerate([&] { (void)settings.Boolean(key); });
    Tolerate([&] { (void)settings.Duration(key); });
    (void)sluice::service::ParseTtl(settings.String(key));
  }
  const std::vector<std::string> proxies{settings.String("trusted_proxy")};
  (void)sluice::admission::TrustedProxies::Parse(proxies);
  (void)settings.Describe();
  return 0;
}
