// PgMetaStore (postgres_meta_store.h): its pools and I/O thread, the statements' plumbing, and the
// factory.
#include "postgres_meta_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "pg_rows.h"
#include "sluice/common/thread_name.h"

namespace sluice::store::pg {
namespace {

std::string DurationSetting(Duration d) {
  // statement_timeout takes whole milliseconds; 0 would mean "no limit", so never round to it.
  const auto ms = std::max<int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(d).count());
  return fmt::format("{}ms", ms);
}

}  // namespace

PgMetaStore::PgMetaStore(PostgresOptions options)
    : options_(std::move(options)), guard_(boost::asio::make_work_guard(io_)) {
  auto make_pool = [&](const char* name, const PostgresPoolOptions& pool) {
    // bytea_output pinned because the rows are parsed as text: a server configured for the
    // old escape format must not garble token hashes.
    ConnectSpec spec{options_.url, std::string("sluice-") + name,
                     fmt::format("-c statement_timeout={} -c bytea_output=hex",
                                 DurationSetting(StatementTimeoutFor(pool.call_timeout)))};
    return std::make_unique<Pool>(io_.get_executor(), std::move(spec), pool,
                                  options_.connect_timeout, clock_);
  };
  pools_[0] = make_pool("read", options_.read);
  pools_[1] = make_pool("write", options_.write);
  pools_[2] = make_pool("cleanup", options_.cleanup);
  pools_[3] = make_pool("moderation", options_.moderation);
  const std::pair<Pool*, size_t> warm[] = {{pools_[0].get(), options_.read.warm},
                                           {pools_[1].get(), options_.write.warm},
                                           {pools_[2].get(), options_.cleanup.warm},
                                           {pools_[3].get(), options_.moderation.warm}};
  for (const auto& [pool, count] : warm) {
    for (size_t i = 0; i < count; ++i)
      boost::asio::co_spawn(io_, pool->Warm(), asio_glue::LogIfThrown("postgres: warm"));
  }
  thread_ = std::thread([this] {
    NameThisThread("postgres-io");
    io_.run();
  });
}

PgMetaStore::~PgMetaStore() {
  guard_.reset();
  io_.stop();
  thread_.join();
  // Idle connections close now, while their io_context exists; lent ones close as the
  // operations holding them are destroyed with the io_context.
  for (auto& pool : pools_) pool->Close();
  io_holder_.reset();
}

PostgresMetaStore::PoolStats PgMetaStore::Stats(PostgresPurpose purpose) const {
  return pools_[static_cast<size_t>(purpose)]->Stats();
}

awaitable<Result<std::string>> PgMetaStore::ShowForTest(PostgresPurpose purpose,
                                                        std::string setting) {
  const bool valid = !setting.empty() && std::all_of(setting.begin(), setting.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
  if (!valid) throw std::invalid_argument("not a setting name: " + setting);
  auto sql = std::make_shared<std::string>("SHOW " + setting);
  return Query<std::string>(
      purpose, admission::Deadline::Never(), sql->c_str(), {},
      [sql](const PGresult* r) -> Result<std::string> { return std::string(Text(r, 0, 0)); });
}

awaitable<Status> PgMetaStore::AsStatus(awaitable<Result<std::monostate>> call) {
  Result<std::monostate> r = co_await std::move(call);
  if (!r.ok()) co_return r.error();
  co_return Ok();
}

}  // namespace sluice::store::pg

namespace sluice::store {

Duration StatementTimeoutFor(Duration call_timeout) {
  return call_timeout + std::max<Duration>(std::chrono::milliseconds(5), call_timeout / 4);
}

bool IsPostgresUrl(std::string_view url) {
  return url.starts_with("postgres://") || url.starts_with("postgresql://");
}

std::unique_ptr<PostgresMetaStore> MakePostgresMetaStore(PostgresOptions options) {
  if (!IsPostgresUrl(options.url)) {
    throw std::invalid_argument("not a postgres:// or postgresql:// URL: " + options.url);
  }
  return std::make_unique<pg::PgMetaStore>(std::move(options));
}

}  // namespace sluice::store
