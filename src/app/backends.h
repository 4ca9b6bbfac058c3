// The one place that names the concrete backends: `sluice serve` picks them from its settings here,
// behind the store interfaces (include/sluice/store/), and `sluice migrate` runs PostgreSQL's
// schema migrations.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "settings.h"
#include "sluice/common/metrics.h"
#include "sluice/service/guarded_stores.h"
#include "sluice/store/backends.h"
#include "sluice/store/blob_store.h"
#include "sluice/store/meta_store.h"
#include "sluice/store/shared_state.h"

namespace sluice::app {

/// SQLite under `data_dir`, or PostgreSQL when `meta` is a postgres:// URL (migrated, its warm
/// connections open). With the bodies in files too, the SQLite store keeps those up to
/// inline_body_bytes beside their rows (MakeBlobBackend serves them).
std::unique_ptr<store::MetaStore> MakeMetaStore(const Settings& s,
                                                const service::CallTimeouts& timeouts,
                                                store::BlockingPools pools,
                                                const std::filesystem::path& data_dir,
                                                MetricsRegistry* metrics = nullptr);

/// PostgreSQL's pool gauges (open, lent, waiting per pool); nothing for SQLite. `gauges` must go
/// before `meta` does.
void AddMetaPoolGauges(store::MetaStore& meta, GaugeCallbacks& gauges);

/// Files under `data_dir`, or an S3-compatible bucket when `blob` is s3://BUCKET. `meta` is
/// MakeMetaStore's (which must outlive the result): with SQLite, the small bodies are its.
std::unique_ptr<store::BlobStore> MakeBlobBackend(const Settings& s,
                                                  const std::filesystem::path& data_dir,
                                                  store::BlockingPools pools,
                                                  const boost::asio::any_io_executor& executor,
                                                  store::MetaStore& meta,
                                                  MetricsRegistry* metrics = nullptr);

/// None (everything in-process), or Redis when `cache` is a redis:// URL.
std::unique_ptr<store::SharedState> MakeSharedState(const Settings& s, const Clock& clock,
                                                    MetricsRegistry& metrics);

/// `sluice migrate`: applies the PostgreSQL schema migrations; the process exit code.
int Migrate(const std::string& url);

}  // namespace sluice::app
