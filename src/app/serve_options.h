// `sluice serve`'s settings read into the option structs of each part of the server. Every
// conversion from a setting and every check that spans several keys lives here, so the composition
// root (server_process.h) only builds parts.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "settings.h"
#include "sluice/admission/circuit_breaker.h"
#include "sluice/admission/reputation_feed.h"
#include "sluice/admission/retry_budget.h"
#include "sluice/http/server.h"
#include "sluice/notify/push.h"
#include "sluice/render/view_renderer.h"
#include "sluice/service/admission_control.h"
#include "sluice/service/creator_tokens.h"
#include "sluice/service/guarded_stores.h"
#include "sluice/service/moderation.h"
#include "sluice/service/paste_service.h"
#include "sluice/service/proof_of_work.h"
#include "sluice/service/reputation_feeds.h"
#include "sluice/worker/janitor.h"

namespace sluice::app {

struct ServeOptions {
  std::filesystem::path data_dir;
  /// Event loops (one per thread) and the blocking pools of the embedded stores.
  int threads = 1;
  /// The time slice each loop thread asks for (src/app/thread_slice.h); zero: the kernel's.
  std::chrono::nanoseconds loop_slice{};
  size_t read_threads = 1;
  size_t cleanup_threads = 1;
  /// The embedded store's moderation and admin reads (store::BlockingPools::moderation).
  size_t moderation_threads = 1;
  service::ServiceOptions service;
  service::CallTimeouts timeouts;
  service::AdmissionOptions admission;
  admission::RetryBudgetOptions retry_budget;
  admission::CircuitBreakerOptions breaker;
  size_t cache_bytes = 0;
  /// How long a local cache entry is trusted; zero (for ever) without a shared cache.
  Duration local_cache_ttl{};
  std::vector<std::string> edge_purge;
  worker::JanitorOptions janitor;
  render::ViewRendererOptions render;
  http::ServerOptions server;
  service::ModerationOptions moderation;
  service::CreatorTokensOptions creator_tokens;
  /// The admin listener's HOST:PORT (empty: none) and the file of its token (empty: no token, every
  /// admin request refused).
  std::string admin_listen;
  std::string admin_token_file;
  /// The operator's push sinks (docs/moderation.md, "Push"); the webhook's key is read from
  /// push_webhook_secret_file at start.
  /// The reputation feeds (their files are read by LoadFeeds, not here), their classes' rates and
  /// the refusal's text.
  std::vector<admission::FeedSpec> feeds;
  service::FeedClassRates feed_rates;
  std::string feed_refuse_text;
  notify::PushOptions push;
  std::string push_webhook_secret_file;
  /// The proof-of-work rung (docs/overload.md, "Proof of work"); its key is read from
  /// proof_of_work_key_file at start, else made at random.
  bool proof_of_work = false;
  service::ProofOfWorkOptions proof_of_work_options;
  std::string proof_of_work_key_file;
};

/// Throws std::invalid_argument naming the setting when a value or a combination is refused.
ServeOptions ReadServeOptions(const Settings& s);

/// "a, b ,c" -> {"a", "b", "c"}; empty entries dropped.
std::vector<std::string> CommaList(const std::string& list);

}  // namespace sluice::app
