#include "sluice/service/abuse_watch.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

#include "sluice/admission/client_key.h"

namespace sluice::service {

namespace {

constexpr const char* kBudgetHelp =
    "Client keys that created in the last minute, by the share of their create budget they used "
    "(a snapshot: read the buckets as they are, not through rate()). Many keys low: growth; a few "
    "at 1: abuse";

// A prefix is shown as it is only when it is a network (the host part zeroed by ClientPrefix); a
// key that is no address (a Unix socket peer) is its own prefix and is named like a key.
bool IsNetwork(std::string_view prefix) {
  const size_t slash = prefix.find('/');
  return slash != std::string_view::npos &&
         admission::IpAddress::Parse(prefix.substr(0, slash)).has_value();
}

}  // namespace

const std::vector<double>& AbuseWatch::BudgetBounds() {
  static const std::vector<double> kBounds = {0.1, 0.25, 0.5, 0.75, 0.9, 1.0};
  return kBounds;
}

AbuseWatch::AbuseWatch(AdmissionControl& admission, const Clock& clock, MetricsRegistry& metrics,
                       admission::HeavyHittersOptions options)
    : admission_(admission), keys_(options, clock), prefixes_(options, clock), gauges_(metrics) {
  size_t done = 0;
  while (done < secret_.size()) {
    const ssize_t got = ::getrandom(secret_.data() + done, secret_.size() - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy: guessable pseudonyms would name the clients they hide
    }
    done += static_cast<size_t>(got);
  }
  gauges_.AddHistogram("sluice_client_budget_use", kBudgetHelp, {}, BudgetBounds(),
                       [this] { return BudgetSnapshot(); });
  gauges_.Add("sluice_global_cap_saturation",
              "Create slots in flight over the create cap, 0 to 1 (docs/overload.md, \"Abuse or "
              "growth\")",
              {}, [this] { return admission_.CreateSlotSaturation(); });
}

void AbuseWatch::Note(std::string_view client_key, admission::HeavyHitters::Event event) {
  keys_.Note(client_key, event);
  prefixes_.Note(admission::ClientPrefix(client_key), event);
}

void AbuseWatch::NoteCreate(std::string_view client_key) {
  Note(client_key, admission::HeavyHitters::Event::kCreate);
}

void AbuseWatch::NoteRefusal(std::string_view client_key) {
  Note(client_key, admission::HeavyHitters::Event::kRefusal);
}

std::string AbuseWatch::Pseudonym(std::string_view client_key) const {
  // One-shot HMAC with no shared context: safe from any thread (OpenSSL 3, openssl-threads(7)).
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(client_key.data()), client_key.size(), digest,
       &length);
  return fmt::format("{:02x}{:02x}{:02x}{:02x}", digest[0], digest[1], digest[2], digest[3]);
}

Histogram::Snapshot AbuseWatch::BudgetSnapshot() const {
  const auto& bounds = BudgetBounds();
  const std::vector<uint64_t> counts = admission_.CreateBudgetUse(bounds);
  Histogram::Snapshot snap;
  uint64_t running = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    running += counts[i];
    if (i < bounds.size()) snap.cumulative.push_back(running);
    // The sum takes each bucket at its upper bound (the +Inf bucket at 1): only a rough mean.
    snap.sum += double(counts[i]) * (i < bounds.size() ? bounds[i] : 1.0);
  }
  snap.count = running;
  return snap;
}

AbuseView AbuseWatch::View(Names names, size_t top) const {
  AbuseView view;
  view.window_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(keys_.options().window).count();
  for (const auto& h : keys_.Top(top)) {
    view.top_keys.push_back(
        {names == Names::kFull ? h.key : Pseudonym(h.key), h.creates, h.refusals});
  }
  for (const auto& h : prefixes_.Top(top)) {
    const bool shown = names == Names::kFull || IsNetwork(h.key);
    view.top_prefixes.push_back({shown ? h.key : Pseudonym(h.key), h.creates, h.refusals});
  }
  view.budget_use = admission_.CreateBudgetUse(BudgetBounds());
  view.global_cap_saturation = admission_.CreateSlotSaturation();
  return view;
}

}  // namespace sluice::service
