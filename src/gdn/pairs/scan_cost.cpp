#include "gdn/pairs/scan_cost.h"

#include <algorithm>
#include <cstdio>

namespace gdn {

int scan_rounds(int P) {
  int rounds = 0;
  for (std::int64_t reach = 1; reach < P; reach *= 2) ++rounds;
  return rounds;
}

ScanStep scan_step(int P, int pos, std::int64_t dist) {
  ScanStep s;
  s.sends = pos + dist < P;
  s.receives = pos - dist >= 0;
  s.sends_on = s.receives && pos + 2 * dist < P;
  // A later round receives (and composes with the prefix's map) if it exists and reaches back.
  s.map_read = s.receives && (s.sends_on || (2 * dist < P && pos - 2 * dist >= 0));
  return s;
}

double scan_compose_flops(int P, int K, int V) {
  const double whole = 2.0 * K * K * K + 2.0 * K * K * V, offset = 2.0 * K * K * V;
  double most = 0;
  for (int pos = 0; pos < P; ++pos) {
    double f = 0;
    for (std::int64_t dist = 1; dist < P; dist *= 2) {
      const ScanStep s = scan_step(P, pos, dist);
      if (s.receives) f += (s.map_read ? whole : offset) + (s.sends_on ? whole : 0);
    }
    most = std::max(most, f);
  }
  return most;
}

double ScanCost::seconds(const ScanLink& link, double flops_per_s) const {
  return double(messages) * link.latency_s + bytes / link.bytes_per_s +
         (flops_per_s > 0 ? flops / flops_per_s : 0.0);
}

ScanCost scan_cost(PairScan scan, int P, const PairDims& d, int elem_bytes) {
  ScanCost c;
  if (P <= 1) return c;
  const double e = elem_bytes, K = d.K, V = d.V, BH = d.BH;
  const std::int64_t pair = d.pair_elems(), adjoint = d.b_elems();
  if (scan == PairScan::log_depth) {
    // Each way: one send_recv of a pair per round, and the busiest rank's compositions.
    const int R = scan_rounds(P);
    c.messages = 2 * R;
    c.bytes = 2.0 * R * double(pair) * e;
    c.flops = 2.0 * BH * scan_compose_flops(P, d.K, d.V);
    // This rank's M; the scan's own, prefix, sent, received and scratch pairs, and the
    // forward's pair or the backward's D and lambda beside them.
    c.kept = d.a_elems();
    c.transient = 6 * pair;
    return c;
  }
  // A ring all-gather of the pairs, then of the adjoints; the last rank folds P - 1 maps
  // into its entry state, the first P - 1 into its exit adjoint (gdn/pairs/pair_scan.h).
  c.messages = 2 * std::int64_t(P - 1);
  c.bytes = double(P - 1) * double(pair + adjoint) * e;
  c.flops = 2.0 * (P - 1) * BH * 2 * K * K * V;
  c.kept = std::int64_t(P) * pair;
  // The forward's own pair; the backward's gathered adjoints, its D and lambda.
  c.transient = std::max(pair, std::int64_t(P + 2) * adjoint);
  return c;
}

namespace {

std::string describe(const char* name, const ScanCost& c, double seconds, int elem_bytes) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s %lld messages, %.3g MiB, %.3g GFLOP, %.3g us, holds %.3g MiB",
                name, static_cast<long long>(c.messages), c.bytes / 1048576.0, c.flops * 1e-9,
                seconds * 1e6, double(c.kept) * elem_bytes / 1048576.0);
  return buf;
}

}  // namespace

PairScanChoice faster_scan(int P, const PairDims& d, int elem_bytes, const ScanLink& link,
                           double flops_per_s) {
  if (P <= 1) return {PairScan::allgather, "one rank: nothing to scan"};
  const ScanCost ag = scan_cost(PairScan::allgather, P, d, elem_bytes),
                 ld = scan_cost(PairScan::log_depth, P, d, elem_bytes);
  const double t_ag = ag.seconds(link, flops_per_s), t_ld = ld.seconds(link, flops_per_s);
  const PairScan pick = t_ld <= t_ag ? PairScan::log_depth : PairScan::allgather;
  return {pick, std::string(pick == PairScan::log_depth ? "no slower" : "faster") +
                    " per GDN layer and step: " + describe("log_depth", ld, t_ld, elem_bytes) +
                    "; " + describe("allgather", ag, t_ag, elem_bytes)};
}

}  // namespace gdn
