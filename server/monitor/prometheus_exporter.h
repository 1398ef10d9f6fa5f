// PrometheusExporter: medprof-server's /metrics endpoint (Prometheus text format, prometheus-cpp).
//
// Exposes
//   medprof_jobs{state="queued|running|succeeded|failed|cancelled"}   gauge, read from the store
//   medprof_agents{status="online|offline"}                           gauge, AgentRegistry's rule
//   medprof_ingested_rows_total                                       counter (result rows committed)
//   medprof_query_duration_seconds{query="compare|kernels|diff|timeline"}  histogram
// The gauges are read at scrape time (one read transaction per scrape); the counter and the
// histogram are fed by the Domain through the MetricsSink interface (Start registers itself).
// Listens on loopback by default (127.0.0.1:9464); serve it elsewhere only behind a proxy that
// does TLS (the endpoint itself is plain HTTP without authentication).
//
// Thread-safe. The Domain must outlive the exporter; destroying the exporter stops the HTTP
// server and unregisters the sink.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/domain/domain.h"
#include "server/domain/metrics_sink.h"

namespace prometheus {
class Exposer;
class Registry;
class Counter;
template <typename T>
class Family;
class Histogram;
}  // namespace prometheus

namespace medprof::server::monitor {

inline constexpr char kDefaultMetricsListen[] = "127.0.0.1:9464";

class PrometheusExporter : public MetricsSink {
 public:
  // Listens on `listen` (HOST:PORT; port 0 = any free port) and registers as `domain`'s sink.
  // INVALID_ARGUMENT for a malformed address; UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<PrometheusExporter>> Start(const std::string& listen, Domain& domain);
  ~PrometheusExporter() override;

  // "127.0.0.1:9464" with the bound port.
  const std::string& address() const { return address_; }

  void RowsIngested(int64_t rows) override;
  void QueryServed(std::string_view query, double seconds) override;

 private:
  class Gauges;
  PrometheusExporter(Domain& domain);

  Domain& domain_;
  std::string address_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Gauges> gauges_;
  prometheus::Counter* rows_ = nullptr;
  prometheus::Family<prometheus::Histogram>* latency_ = nullptr;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace medprof::server::monitor
