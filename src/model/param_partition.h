// Which part of every unit of parameters (params.h) each rank owns under train.shard
// optimizer or full (docs/design.md §6d). Unit u of n elements over W ranks is cut into W
// blocks of ceil(n / W) elements; rank w owns block w, clipped to the unit (the last
// ranks' parts may be shorter, or empty). The reduce-scatter of a unit's gradients sends
// W whole blocks (zero padding past the unit) and the all-gather of its values only the
// owned elements. A rank's owned elements, unit after unit, make its owned buffer.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "model/params.h"

namespace gdn {

// train.shard: the training state (parameters, gradients, AdamW moments) over every rank
// of the mesh: replicated; the moments and the update sharded (gradients reduce-scattered,
// updated values all-gathered); or the parameters too, gathered one unit at a time for its
// forward and again for its backward.
enum class Sharding { none, optimizer, full };
constexpr std::array<const char*, 3> enum_names(Sharding) {
  return {"none", "optimizer", "full"};
}

struct OwnedPart {
  std::int64_t block = 0;       // ceil(n / W): the reduce-scatter's block
  std::int64_t begin = 0;       // first owned element, in the flat order
  std::int64_t size = 0;        // owned elements (0 <= size <= block)
  std::int64_t at = 0;          // where they start in the owned buffer
  std::int64_t unit_begin = 0;  // the unit's first element, in the flat order
};

class ParamPartition {
 public:
  ParamPartition(const std::vector<ParamUnit>& units, int world, int rank)
      : world_(world), rank_(rank), units_(units) {
    std::int64_t at = 0;
    for (const ParamUnit& u : units) {
      OwnedPart p = part_of(u, rank);
      p.at = at;
      at += p.size;
      parts_.push_back(p);
    }
    owned_ = at;
  }
  int world() const { return world_; }
  int rank() const { return rank_; }
  // This rank's part of unit u.
  const OwnedPart& part(std::size_t u) const { return parts_[u]; }
  const std::vector<OwnedPart>& parts() const { return parts_; }
  // Rank w's part of unit u (its `at` is left 0).
  OwnedPart part_of(std::size_t u, int w) const { return part_of(units_[u], w); }
  std::int64_t owned() const { return owned_; }
  std::size_t num_units() const { return units_.size(); }
  const ParamUnit& unit(std::size_t u) const { return units_[u]; }

 private:
  OwnedPart part_of(const ParamUnit& u, int w) const {
    OwnedPart p;
    p.block = (u.size() + world_ - 1) / world_;
    const std::int64_t lo = std::min(u.size(), std::int64_t(w) * p.block);
    const std::int64_t hi = std::min(u.size(), lo + p.block);
    p.begin = u.begin + lo;
    p.size = hi - lo;
    p.unit_begin = u.begin;
    return p;
  }

  int world_, rank_;
  std::vector<ParamUnit> units_;
  std::vector<OwnedPart> parts_;
  std::int64_t owned_ = 0;
};

}  // namespace gdn
