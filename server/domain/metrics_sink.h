// MetricsSink: what the domain reports for monitoring (the server's Prometheus /metrics), kept
// free of any monitoring library so the domain stays testable and the exporter replaceable.
//
// The domain calls it after the fact: RowsIngested after an upload window's transaction
// committed (rows = steps, ops, kernels, metric values, findings and timeline parts stored);
// QueryServed after a query returned (name "compare", "kernels", "diff", "timeline"; seconds
// of wall time, errors included). Implementations must be thread-safe and cheap: they run on
// the request threads. Gauges that read the store (jobs by state, agents online) are pulled by
// the exporter itself, not pushed through here.
#pragma once

#include <cstdint>
#include <string_view>

namespace medprof::server {

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void RowsIngested(int64_t rows) = 0;
  virtual void QueryServed(std::string_view query, double seconds) = 0;
};

}  // namespace medprof::server
