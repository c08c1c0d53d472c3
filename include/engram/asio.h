// Boost.Asio adapter for engram::Store: a gather as an Asio asynchronous
// operation. The only public header that includes Boost; include it only
// where the application uses Asio.
//
//   std::future<engram::GatherResult> f =
//       engram::AsyncGather(*store, table, row_ids, dst, stride, boost::asio::use_future);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "engram/store.h"

namespace engram {

// Starts a gather on `store` and completes `token` (a callback,
// asio::use_future, asio::use_awaitable, ...) with its GatherResult. The
// handler runs on its associated executor (bind one with
// asio::bind_executor; a handler with none runs on Asio's system executor, a
// thread of Asio's own pool), never on a store thread, and is destroyed there
// too. The gather counts as outstanding work on that executor until the
// handler has run, so io_context::run() does not return while a gather is in
// flight. The executor's execution context (e.g. the io_context) must outlive
// the Store: the store's thread may still be returning from post() after the
// handler has already run, so destroy the Store first. row_ids and dst must
// stay valid until the handler runs.
template <typename CompletionToken>
auto AsyncGather(Store& store, size_t table, std::span<const uint64_t> row_ids, std::byte* dst, size_t stride,
                 CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(GatherResult)>(
      [&store, table, row_ids, dst, stride](auto handler) {
        using Handler = decltype(handler);
        auto executor = boost::asio::get_associated_executor(handler);
        struct Pending {
          Handler handler;
          boost::asio::executor_work_guard<decltype(executor)> work;
        };
        auto pending = std::make_shared<Pending>(Pending{std::move(handler), boost::asio::make_work_guard(executor)});
        store.StartGather(table, row_ids, dst, stride, [pending](GatherResult result) {
          auto ex = pending->work.get_executor();
          boost::asio::post(ex, [pending, result = std::move(result)]() mutable {
            // Moved out so the handler (and what it owns) dies here, on its
            // executor, not on whichever thread drops `pending` last.
            Handler h = std::move(pending->handler);
            auto work = std::move(pending->work);
            h(std::move(result));
          });
        });
      },
      token);
}

}  // namespace engram
