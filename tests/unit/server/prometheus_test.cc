// The Prometheus endpoint over real HTTP on loopback: job and agent gauges read from the store,
// the ingested-rows counter and the query-latency histogram fed by the domain.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "server/monitor/prometheus_exporter.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

// GET http://address/metrics with a plain socket; the whole response (headers and body).
std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) return "bad address " + address;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\nConnection: close\r\n\r\n";
  (void)::send(fd, req.data(), req.size(), 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

class PrometheusTest : public DomainTest {};

TEST_F(PrometheusTest, ScrapeShowsJobsAgentsRowsAndQueryLatency) {
  auto exporter = monitor::PrometheusExporter::Start("127.0.0.1:0", *domain_);
  ASSERT_THAT(exporter, IsOk());
  EXPECT_THAT((*exporter)->address(), ::testing::StartsWith("127.0.0.1:"));
  EXPECT_NE((*exporter)->address(), "127.0.0.1:0");

  const std::string agent = Register("node-1", {Gpu(0)});
  Register("node-2", {Gpu(0)});
  clock_.AdvanceMs(options_.heartbeat_interval_ms * 3 + 1);  // both offline now
  std::optional<Assignment> a;
  {
    // node-1 comes back: it acquires a job, which touches it.
    const SubmitStudyResult s = Submit({"baseline", "opt1", "opt2"});
    a = Acquire(agent);
    ASSERT_TRUE(a.has_value());
  }
  ASSERT_THAT(Upload(agent, a->run_id, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 1000)}, {3, Step(1, 1000)}}),
              IsOk());

  std::string body = HttpGet((*exporter)->address(), "/metrics");
  EXPECT_THAT(body, HasSubstr("200 OK"));
  EXPECT_THAT(body, HasSubstr("medprof_jobs{state=\"queued\"} 2"));
  EXPECT_THAT(body, HasSubstr("medprof_jobs{state=\"running\"} 1"));
  EXPECT_THAT(body, HasSubstr("medprof_jobs{state=\"succeeded\"} 0"));
  EXPECT_THAT(body, HasSubstr("medprof_agents{status=\"online\"} 1"));
  EXPECT_THAT(body, HasSubstr("medprof_agents{status=\"offline\"} 1"));
  EXPECT_THAT(body, HasSubstr("medprof_ingested_rows_total 2"));  // two step rows

  CompareRequest r;
  r.study_id = "st-nope";
  EXPECT_THAT(domain_->queries().Compare(ctx_, r), StatusIs(absl::StatusCode::kNotFound, "study_id: no study 'st-nope'"));
  body = HttpGet((*exporter)->address(), "/metrics");
  EXPECT_THAT(body, HasSubstr("medprof_query_duration_seconds_count{query=\"compare\"} 1"));
  EXPECT_THAT(body, HasSubstr("medprof_query_duration_seconds_bucket{query=\"compare\",le=\"+Inf\"} 1"));
}

TEST_F(PrometheusTest, RefusesBadAddressesAndBusyPorts) {
  EXPECT_THAT(monitor::PrometheusExporter::Start("localhost", *domain_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not HOST:PORT")));
  auto first = monitor::PrometheusExporter::Start("127.0.0.1:0", *domain_);
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(monitor::PrometheusExporter::Start((*first)->address(), *domain_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot listen")));
}

}  // namespace
}  // namespace medprof::server::testing
