// The webhook sink over libcurl: a well-kept client that speaks HTTPS, proxies (HTTPS_PROXY from
// the environment) and IPv6, where the server's own Beast code would need a TLS client built for
// one purpose. libcurl's rules for threads (man libcurl-thread): an easy handle is
// used by one thread at a time (each sink owns one, used only on its thread), no signals
// (CURLOPT_NOSIGNAL, since the server's threads must not see SIGALRM from a resolver timeout), and
// curl_global_init once before any handle (std::call_once below).
#include <curl/curl.h>
#include <fmt/format.h>

#include <mutex>
#include <stdexcept>

#include "sluice/notify/push.h"

namespace sluice::notify {
namespace {

// A receiver's answer is not read: a chat bridge may answer with a page, and none of it matters
// past the status. Discarding keeps a huge answer from costing memory.
size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

// Called by libcurl while it waits: a nonzero answer aborts the transfer, so a stop does not wait
// out a receiver's timeout.
int StopRequested(void* stop, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(stop)->load() ? 1 : 0;
}

class Webhook final : public Transport {
 public:
  Webhook(std::string url, std::string secret, Duration timeout, const Clock& clock)
      : url_(std::move(url)), secret_(std::move(secret)), timeout_(timeout), clock_(clock) {
    static std::once_flag initialized;
    std::call_once(initialized, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    easy_ = curl_easy_init();
    if (easy_ == nullptr) throw std::runtime_error("push_webhook: libcurl could not start");
  }
  ~Webhook() override { curl_easy_cleanup(easy_); }

  std::string_view name() const override { return "webhook"; }

  Status Deliver(const std::string& body, std::string_view kind,
                 const std::atomic<bool>& stop) override {
    curl_slist* headers = nullptr;
    auto add = [&](const std::string& line) { headers = curl_slist_append(headers, line.c_str()); };
    add("Content-Type: application/json");
    add(fmt::format("X-Sluice-Event: {}", kind));
    if (!secret_.empty()) {
      add("X-Sluice-Signature: " + Signature(secret_, clock_.UnixSeconds(), body));
    }
    // A receiver behind a proxy that waits for "100 Continue" would cost a second per delivery.
    add("Expect:");
    const long timeout_ms =
        static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count());
    curl_easy_reset(easy_);
    curl_easy_setopt(easy_, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(easy_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy_, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, std::max(1L, timeout_ms));
    curl_easy_setopt(easy_, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, timeout_ms));
    curl_easy_setopt(easy_, CURLOPT_USERAGENT, "sluice-push/1");
    curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, Discard);
    curl_easy_setopt(easy_, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy_, CURLOPT_XFERINFOFUNCTION, StopRequested);
    curl_easy_setopt(easy_, CURLOPT_XFERINFODATA, &stop);
    const CURLcode done = curl_easy_perform(easy_);
    long status = 0;
    curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    if (done != CURLE_OK) {
      return MakeError(ErrorCode::kUnavailable,
                       fmt::format("webhook {}: {}", url_, curl_easy_strerror(done)),
                       "push_webhook");
    }
    if (status < 200 || status > 299) {
      return MakeError(ErrorCode::kUnavailable, fmt::format("webhook {} answered {}", url_, status),
                       "push_webhook");
    }
    return Ok();
  }

 private:
  const std::string url_;
  const std::string secret_;
  const Duration timeout_;
  const Clock& clock_;
  CURL* easy_ = nullptr;  // kept across deliveries: its connection is reused
};

}  // namespace

std::unique_ptr<Transport> MakeWebhook(std::string url, std::string secret, Duration timeout,
                                       const Clock& clock) {
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    throw std::invalid_argument("push_webhook: '" + url + "' is not an http:// or https:// URL");
  }
  return std::make_unique<Webhook>(std::move(url), std::move(secret), timeout, clock);
}

}  // namespace sluice::notify
