// The two ways a cp group scans its GDN pairs (docs/design.md §3-4, §3c), and what each
// costs one rank per GDN layer and step, so that `auto` can choose between them:
//   allgather: every rank's (M, U) gathered and kept for the backward, which gathers every
//              D and folds locally: P pairs held per layer, 2 (P - 1) ring messages.
//   log_depth: Hillis-Steele over point-to-point messages (cp/log_depth_scan.h), forward
//              over (M, U), backward over (M^T, D) with the maps composed again from this
//              rank's M, the only thing kept: ceil(log2 P) rounds each way.
// Pure arithmetic on the pair sizes; the exchanges themselves live in src/cp.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "gdn/pairs/pair_scan.h"

namespace gdn {

enum class PairScan { allgather, log_depth, automatic };
constexpr std::array<const char*, 3> enum_names(PairScan) {
  return {"allgather", "log_depth", "auto"};
}

// Rounds of the log-depth scan over P ranks: ceil(log2 P).
int scan_rounds(int P);

// What the rank at position pos (of P, in scan order) does in the round of distance dist
// of the log-depth scan: the one rule cp/log_depth_scan.cpp runs and the cost model and
// gdn_plan count.
struct ScanStep {
  bool sends = false;     // a pair to the rank dist on
  bool receives = false;  // a pair from the rank dist back, composed into the prefix
  bool sends_on = false;  // receives, and its own map after the prefix goes out next round
  bool map_read = false;  // receives, and the prefix's map is composed with again
};
ScanStep scan_step(int P, int pos, std::int64_t dist);

// The most FLOPs one rank of the log-depth scan composes per (b, h) in one direction:
// each received block into its prefix, 2 K^3 + 2 K^2 V, or 2 K^2 V for the offset alone
// when the prefix's map is not read again; its own map after the prefix when it sends on.
double scan_compose_flops(int P, int K, int V);

// A link on paper: per-message latency and bandwidth. The default is one node's GPUs
// (cluster.h's nvlink_us; 100 GB/s), what gdn_train assumes when it resolves auto.
struct ScanLink {
  double latency_s = 2e-6, bytes_per_s = 100e9;
};

// One GDN layer of one step (forward and backward) on the busiest rank of a cp group of P.
struct ScanCost {
  std::int64_t messages = 0;  // alpha terms on the critical path: ring steps or rounds
  double bytes = 0;           // beta terms: the bytes one rank receives along that path
  double flops = 0;           // the local folding or composing
  // Elements of T: held from the layer's forward to its backward (kept, also under
  // recomputation), and while a scan runs (transient).
  std::int64_t kept = 0, transient = 0;
  double seconds(const ScanLink& link, double flops_per_s) const;
};

ScanCost scan_cost(PairScan scan, int P, const PairDims& d, int elem_bytes);

// A scan chosen, never automatic, and why (one line, for the log and gdn_plan).
struct PairScanChoice {
  PairScan scan = PairScan::allgather;
  std::string why;
};

// The faster of the two on `link` (flops_per_s 0: the folding is free), log_depth on a
// tie (it holds less); why: both costs.
PairScanChoice faster_scan(int P, const PairDims& d, int elem_bytes, const ScanLink& link,
                           double flops_per_s = 0);

}  // namespace gdn
