#include "sluice/store/blob_store.h"

namespace sluice::store {

boost::asio::awaitable<Status> BlobStore::DeleteMany(std::vector<PasteId> ids,
                                                     admission::Deadline deadline) {
  for (const PasteId& id : ids) {
    if (Status s = co_await Delete(id, deadline); !s.ok()) co_return s;
  }
  co_return Ok();
}

}  // namespace sluice::store
