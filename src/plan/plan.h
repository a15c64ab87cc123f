// Everything gdn_plan reports for one layout (flops.h, exchange.h, crossover.h,
// memory_fit.h, step_time.h), and its two renderings: a table and one JSON document.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "plan/crossover.h"
#include "plan/exchange.h"
#include "plan/flops.h"
#include "plan/memory_fit.h"
#include "plan/step_time.h"

namespace gdn::plan {

struct PlanOptions {
  std::optional<double> memory_budget;  // bytes per rank (--memory-gb)
  std::optional<ClusterSpec> cluster;
  double rank_flops_per_s = 0;  // needed with a cluster
};

struct Plan {
  PlanInput in;  // pair_scan as asked
  // The scan this layout runs (auto resolved with the budget and the cluster's cp link),
  // and what each would cost per GDN layer and step; the predictions below use `scan`.
  PairScanChoice scan;
  ScanCost allgather_cost, log_depth_cost;
  FlopReport flops;
  std::vector<RankExchange> exchange;
  std::vector<SiteTraffic> traffic;
  Crossover crossover;
  MemoryEstimate memory, memory_none, memory_layer;  // the run's setting; both settings
  std::optional<double> memory_budget;
  std::vector<Fit> fits;
  std::optional<LayoutFit> smallest;  // with a budget: the fewest ranks that fit (memory_fit.h)
  std::optional<ClusterSpec> cluster;
  double rank_flops_per_s = 0;
  std::optional<StepTime> step;
  std::vector<StepTime> scaling;
};

// The largest world the smallest-fit search tries.
inline constexpr int kMaxWorld = 1 << 14;

Plan make_plan(const PlanInput& in, const PlanOptions& opt);

nlohmann::json to_json(const Plan& p);               // report_json.cpp
void print_table(const Plan& p, std::ostream& out);  // report_table.cpp

}  // namespace gdn::plan
