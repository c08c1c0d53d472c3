// Store::Open: a client of the node service when StoreOptions::node names
// one, else a store of this process's own.
#include "engram/store.h"
#include "src/node/node_client.h"
#include "src/store/store_impl.h"

namespace engram {

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  if (!options.node.empty()) return node::NodeClient::Open(options);
  ENGRAM_ASSIGN_OR_RETURN(auto impl, StoreImpl::Open(options));
  return std::unique_ptr<Store>(std::move(impl));
}

}  // namespace engram
