#include "sluice/store/meta_store.h"

#include <fmt/format.h>

namespace sluice::store {

boost::asio::awaitable<Status> MetaStore::InsertWithBody(PasteMeta meta,
                                                         std::shared_ptr<const std::string> body,
                                                         admission::Deadline) {
  co_return MakeError(ErrorCode::kInternal,
                      fmt::format("paste {}: this store keeps no body of {} bytes beside its row",
                                  meta.id.view(), body ? body->size() : 0),
                      "no_colocated_bodies");
}

}  // namespace sluice::store
