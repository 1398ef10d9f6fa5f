#include "server/monitor/prometheus_exporter.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace medprof::server::monitor {
namespace {

const Logger kLog("metrics");

// Latency buckets (seconds): compare is expected in milliseconds; a slow store shows in the tail.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1,   0.25,   0.5,   1,    2.5,   5};
  return b;
}

prometheus::ClientMetric GaugeMetric(const std::string& label, const std::string& value, double v) {
  prometheus::ClientMetric m;
  m.label.push_back({label, value});
  m.gauge.value = v;
  return m;
}

}  // namespace

// Gauges read from the domain at scrape time.
class PrometheusExporter::Gauges : public prometheus::Collectable {
 public:
  explicit Gauges(Domain& domain) : domain_(domain) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    absl::StatusOr<std::map<std::string, int64_t>> jobs = domain_.queries().JobsByState();
    if (jobs.ok()) {
      prometheus::MetricFamily f;
      f.name = "medprof_jobs";
      f.help = "Jobs of every study by state";
      f.type = prometheus::MetricType::Gauge;
      for (const auto& [state, n] : *jobs) f.metric.push_back(GaugeMetric("state", state, static_cast<double>(n)));
      out.push_back(std::move(f));
    } else {
      kLog.Warn("/metrics: counting jobs: {}", jobs.status().ToString());
    }
    absl::StatusOr<std::vector<AgentView>> agents = domain_.agents().ListAgents(CallContext::Background());
    if (agents.ok()) {
      int online = 0;
      for (const AgentView& a : *agents) online += a.online ? 1 : 0;
      prometheus::MetricFamily f;
      f.name = "medprof_agents";
      f.help = "Registered agents, online (contact within 3 heartbeat intervals) or offline";
      f.type = prometheus::MetricType::Gauge;
      f.metric.push_back(GaugeMetric("status", "online", online));
      f.metric.push_back(GaugeMetric("status", "offline", static_cast<double>(agents->size()) - online));
      out.push_back(std::move(f));
    } else {
      kLog.Warn("/metrics: listing agents: {}", agents.status().ToString());
    }
    return out;
  }

 private:
  Domain& domain_;
};

PrometheusExporter::PrometheusExporter(Domain& domain) : domain_(domain) {}

PrometheusExporter::~PrometheusExporter() {
  domain_.set_metrics_sink(nullptr);
  exposer_.reset();  // stops serving before the collectables go
}

absl::StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(const std::string& listen,
                                                                              Domain& domain) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", listen, "' is not HOST:PORT (e.g. 127.0.0.1:9464; port 0 = any free port)"));
  }
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter(domain));
  e->registry_ = std::make_shared<prometheus::Registry>();
  e->rows_ = &prometheus::BuildCounter()
                  .Name("medprof_ingested_rows_total")
                  .Help("Result rows (steps, ops, kernels, metric values, findings, timeline parts) committed")
                  .Register(*e->registry_)
                  .Add({});
  e->latency_ = &prometheus::BuildHistogram()
                     .Name("medprof_query_duration_seconds")
                     .Help("Wall time of queries (compare, kernels, diff, timeline)")
                     .Register(*e->registry_);
  e->gauges_ = std::make_shared<Gauges>(domain);
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& ex) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen ", listen, ": cannot listen: ", ex.what()));
  }
  e->exposer_->RegisterCollectable(e->registry_);
  e->exposer_->RegisterCollectable(e->gauges_);
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  e->address_ = absl::StrCat(listen.substr(0, colon), ":", ports.empty() ? port : ports.front());
  domain.set_metrics_sink(e.get());
  return e;
}

void PrometheusExporter::RowsIngested(int64_t rows) { rows_->Increment(static_cast<double>(rows)); }

void PrometheusExporter::QueryServed(std::string_view query, double seconds) {
  latency_->Add({{"query", std::string(query)}}, LatencyBuckets()).Observe(seconds);
}

}  // namespace medprof::server::monitor
