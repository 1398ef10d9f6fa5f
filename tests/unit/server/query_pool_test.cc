// QueryPool: queries run on threads of the configured nice value, several at once, inline when
// nested or with nice 0.
#include "server/domain/query_pool.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace medprof::server {
namespace {

int MyNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, 0);  // Linux: the calling thread's
}

TEST(QueryPool, RunsOnThreadsOfTheGivenNiceValue) {
  QueryPool pool(10, 4);
  const int caller = MyNice();
  int inside = -100;
  std::thread::id where;
  pool.Run([&] {
    inside = MyNice();
    where = std::this_thread::get_id();
  });
  EXPECT_EQ(inside, std::max(caller, 10));
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_EQ(MyNice(), caller);  // the caller keeps its priority
  EXPECT_EQ(pool.Call([] { return 42; }), 42);
}

TEST(QueryPool, NiceZeroRunsOnTheCaller) {
  QueryPool pool(0, 4);
  std::thread::id where;
  pool.Run([&] { where = std::this_thread::get_id(); });
  EXPECT_EQ(where, std::this_thread::get_id());
  EXPECT_EQ(pool.threads_started(), 0);
}

TEST(QueryPool, RunsQueriesAtOnceUpToItsThreadsAndNestedOnesInline) {
  QueryPool pool(5, 3);
  std::atomic<int> running{0}, most{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      pool.Run([&] {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        pool.Run([] {});  // nested: inline, no deadlock even with every thread busy
        --running;
      });
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(most.load(), 3);
  EXPECT_EQ(pool.threads_started(), 3);
}

}  // namespace
}  // namespace medprof::server
