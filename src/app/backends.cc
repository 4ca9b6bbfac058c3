#include "backends.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "sluice/store/postgres.h"
#include "sluice/store/s3.h"

namespace sluice::app {

namespace asio = boost::asio;

// --- metadata store choice: embedded SQLite, or PostgreSQL when `meta` is a postgres:// URL ------
// Serve migrates a PostgreSQL schema itself (idempotent, and safe with many processes starting at
// once), so one process or a fleet starts with no separate step; `sluice migrate` exists for
// deployments that migrate before rolling out.
std::unique_ptr<store::MetaStore> MakeMetaStore(const Settings& s,
                                                const service::CallTimeouts& timeouts,
                                                store::BlockingPools pools,
                                                const std::filesystem::path& data_dir,
                                                MetricsRegistry* metrics) {
  const std::string url = s.String("meta");
  if (url.empty()) {
    const size_t colocated =
        s.String("blob") == "files" ? static_cast<size_t>(s.Integer("inline_body_bytes")) : 0;
    return store::MakeSqliteMetaStore(data_dir / "meta.db", pools, colocated, metrics);
  }
  if (!store::IsPostgresUrl(url)) {
    throw std::invalid_argument(
        "meta: leave empty for SQLite, or give postgres://USER@HOST:PORT/DB");
  }
  if (Status migrated = store::MigratePostgres(url); !migrated.ok()) {
    throw std::runtime_error("meta: " + migrated.error().message);
  }
  store::PostgresOptions options;
  options.url = url;
  auto connections = [&s](const char* key) {
    return static_cast<size_t>(std::max<int64_t>(1, s.Integer(key)));
  };
  // A few connections open at start: a connect rarely fits in a 20 ms read or a 50 ms insert.
  constexpr size_t kWarm = 4;
  options.read = {connections("meta_read_connections"), timeouts.meta_get,
                  std::min(kWarm, connections("meta_read_connections"))};
  // Creates and deletes share the write pool; its statement timeout follows the longer of the two.
  options.write = {connections("meta_write_connections"),
                   std::max(timeouts.meta_insert, timeouts.meta_delete),
                   std::min(kWarm, connections("meta_write_connections"))};
  options.cleanup = {connections("meta_cleanup_connections"), timeouts.meta_background, 1};
  options.moderation = {connections("meta_moderation_connections"), timeouts.meta_moderation, 0};
  auto meta = store::MakePostgresMetaStore(options);
  // Not ready until the warm connections are: a request that arrives first would connect inside
  // its own 20 ms or 50 ms timeout and fail. Bounded, since a slow primary must not stop a start.
  const auto ready_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto warmed = [&] {
    return meta->Stats(store::PostgresPurpose::kRead).idle >= options.read.warm &&
           meta->Stats(store::PostgresPurpose::kWrite).idle >= options.write.warm;
  };
  while (!warmed() && std::chrono::steady_clock::now() < ready_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!warmed()) spdlog::warn("PostgreSQL connections not all open after 5 s; serving anyway");
  spdlog::info("metadata in PostgreSQL (schema version {})", store::PostgresSchemaVersion());
  return meta;
}

void AddMetaPoolGauges(store::MetaStore& meta, GaugeCallbacks& gauges) {
  auto* pg = dynamic_cast<store::PostgresMetaStore*>(&meta);
  if (pg == nullptr) return;
  const std::pair<const char*, store::PostgresPurpose> pools_by_name[] = {
      {"read", store::PostgresPurpose::kRead},
      {"write", store::PostgresPurpose::kWrite},
      {"cleanup", store::PostgresPurpose::kCleanup},
      {"moderation", store::PostgresPurpose::kModeration}};
  for (const auto& [name, purpose] : pools_by_name) {
    const store::PostgresPurpose p = purpose;
    gauges.Add("sluice_meta_pool_connections", "PostgreSQL connections open, by pool",
               {{"pool", name}}, [pg, p] { return double(pg->Stats(p).open); });
    gauges.Add("sluice_meta_pool_in_use", "PostgreSQL connections lent, by pool", {{"pool", name}},
               [pg, p] {
                 const auto st = pg->Stats(p);
                 return double(st.open - std::min(st.open, st.idle));
               });
    gauges.Add("sluice_meta_pool_waiting", "Calls waiting for a connection, by pool",
               {{"pool", name}}, [pg, p] { return double(pg->Stats(p).waiting); });
  }
}

int Migrate(const std::string& url) {
  if (!store::IsPostgresUrl(url)) {
    std::fprintf(stderr, "--meta: give postgres://USER@HOST:PORT/DB (SQLite migrates on open)\n");
    return 2;
  }
  int applied = 0;
  if (Status s = store::MigratePostgres(url, &applied); !s.ok()) {
    std::fprintf(stderr, "migrate: %s\n", s.error().message.c_str());
    return 1;
  }
  std::printf("metadata schema at version %d (%d migration%s applied now)\n",
              store::PostgresSchemaVersion(), applied, applied == 1 ? "" : "s");
  return 0;
}

// The bucket: files under the data folder, or an S3-compatible store when `blob` is s3://BUCKET.
// The S3 pools are sized to the slots that feed them (docs/overload.md, "Read"): GET to the read
// slots, PUT to the create slots, cleanup to the cleanup threads. Its sockets run on one event
// loop; the signing and body hashing run on the callers' loops.
std::unique_ptr<store::BlobStore> MakeBlobBackend(
    const Settings& s, const std::filesystem::path& data_dir, store::BlockingPools pools,
    const asio::any_io_executor& executor, store::MetaStore& meta, MetricsRegistry* metrics) {
  const std::string blob = s.String("blob");
  if (blob == "files") {
    if (!s.String("s3_endpoint").empty()) {
      throw std::invalid_argument("s3_endpoint is set but blob is files, not s3://BUCKET");
    }
    // Always both tiers, even at 0: bodies written under an earlier limit stay readable.
    const auto inline_max = static_cast<size_t>(s.Integer("inline_body_bytes"));
    auto files = store::MakeFsBlobStore(data_dir / "blobs", pools, metrics);
    if (!s.String("meta").empty()) {
      // Rows in PostgreSQL: the small bodies have a SQLite file of their own.
      return store::MakeTieredBlobStore(
          store::MakeSqliteBlobStore(data_dir / "bodies.db", pools, metrics), std::move(files),
          inline_max);
    }
    // Rows in meta.db, and the small bodies with them. A bodies.db from before is still read (and
    // emptied by deletes and expiry), never written: a limit of 0 sends it no body.
    const std::filesystem::path before = data_dir / "bodies.db";
    if (std::filesystem::exists(before)) {
      files = store::MakeTieredBlobStore(store::MakeSqliteBlobStore(before, pools, metrics),
                                         std::move(files), 0);
    }
    return store::MakeTieredBlobStore(store::MakeSqliteMetaBodies(meta), std::move(files),
                                      inline_max);
  }
  auto bucket = store::ParseS3BlobUrl(blob);
  if (!bucket) throw std::invalid_argument("blob: '" + blob + "' is neither files nor s3://BUCKET");
  auto options = store::S3Options::FromEnvironment(*bucket, s.String("s3_endpoint"),
                                                   s.String("s3_path_style"));
  if (!options.ok()) throw std::invalid_argument(options.error().message);
  options->get_connections = static_cast<size_t>(s.Integer("read_slots"));
  options->put_connections = static_cast<size_t>(s.Integer("create_slots"));
  options->cleanup_connections =
      static_cast<size_t>(std::max<int64_t>(1, s.Integer("cleanup_threads")));
  spdlog::info("paste bodies in S3 bucket {} at {} ({} style, region {})", *bucket,
               options->endpoint.empty() ? "AWS" : options->endpoint,
               options->path_style ? "path" : "virtual-host", options->region);
  return store::MakeS3BlobStore(std::move(*options), executor);
}

// The tier's shared limiter and metadata cache: none (everything in-process) or Redis.
std::unique_ptr<store::SharedState> MakeSharedState(const Settings& s, const Clock& clock,
                                                    MetricsRegistry& metrics) {
  const std::string url = s.String("cache");
  if (url.empty()) return nullptr;
  auto options = store::ParseRedisUrl(url);
  if (!options.ok()) throw std::invalid_argument("cache: " + options.error().message);
  // Kept out of the URL (and so out of ps and shell history) where the environment allows it.
  if (const char* password = std::getenv("REDIS_PASSWORD");
      options->password.empty() && password != nullptr) {
    options->password = password;
  }
  options->ca_file = s.String("redis_ca_file");
  spdlog::info("shared limiter and cache: {} (budget {} ms, {} processes)",
               store::RedactedRedisUrl(*options),
               std::chrono::duration<double, std::milli>(s.Duration("cache_timeout")).count(),
               s.Integer("processes"));
  return store::MakeRedisSharedState(*options, clock, metrics);
}

}  // namespace sluice::app
