#include "plan/cluster.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "core/json_reader.h"

namespace gdn::plan {

ClusterSpec parse_cluster(const std::string& text) {
  ClusterSpec c;
  std::stringstream ss(text);
  std::string item;
  bool have_nvlink = false, have_net = false;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    GDN_CHECK(eq != std::string::npos, "--cluster: '", item, "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const std::optional<double> parsed = parse_decimal(value);
    GDN_CHECK(parsed && *parsed > 0, "--cluster: ", key, "=", value,
              ": expected a decimal number > 0");
    const double v = *parsed;
    if (key == "nodes" || key == "gpus") {
      GDN_CHECK(v == double(int(v)), "--cluster: ", key, "=", value, ": expected an integer");
      (key == "nodes" ? c.nodes : c.gpus) = int(v);
    } else if (key == "nvlink_GBps") {
      c.nvlink_GBps = v, have_nvlink = true;
    } else if (key == "net_GBps") {
      c.net_GBps = v, have_net = true;
    } else if (key == "nvlink_us") {
      c.nvlink_us = v;
    } else if (key == "net_us") {
      c.net_us = v;
    } else {
      throw_error("--cluster: unknown key '", key,
                  "': expected nodes, gpus, nvlink_GBps, net_GBps, nvlink_us, net_us");
    }
  }
  GDN_CHECK(have_nvlink, "--cluster '", text,
            "': nvlink_GBps (the bandwidth inside a node) is "
            "required");
  GDN_CHECK(have_net || c.nodes == 1, "--cluster '", text, "': nodes=", c.nodes,
            " needs net_GBps (each GPU's network bandwidth)");
  return c;
}

Link group_link(const ClusterSpec& c, int n, int groups) {
  bool spans = false;
  for (int g = 0; g < groups; ++g) {
    const int first = g * n, last = first + n - 1;
    spans = spans || first / c.gpus != last / c.gpus;
  }
  if (spans) return {c.net_GBps * 1e9, c.net_us * 1e-6, true};
  return {c.nvlink_GBps * 1e9, c.nvlink_us * 1e-6, false};
}

ScanLink cp_scan_link(const PlanInput& in, const ClusterSpec& c) {
  const Link l = group_link(c, in.cp, in.dp);
  return {l.latency_s, l.bytes_per_s};
}

double collective_seconds(Collective kind, int n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  const double a = link.latency_s, b = link.bytes_per_s;
  switch (kind) {
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::chain:
      return (n - 1) * (a + bytes / b);
    case Collective::all_reduce:
      return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * bytes / b;
    case Collective::all_to_all:
      return (n - 1) * a + bytes / b;
    case Collective::send_recv:
      return a + bytes / b;
  }
  return 0;
}

}  // namespace gdn::plan
