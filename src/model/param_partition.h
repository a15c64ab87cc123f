// Which part of every unit of parameters (params.h) each rank owns under train.shard
// optimizer or full (docs/design.md §6d). Unit u of n elements over the W ranks of its
// group is cut into W blocks of ceil(n / W) elements; rank w of the group owns block w,
// clipped to the unit (the last ranks' parts may be shorter, or empty). The group is the
// world, or for a unit of experts the ranks that hold those experts (world / ep of them).
// The reduce-scatter of a unit's gradients sends W whole blocks (zero padding past the unit) and
// the all-gather of its values only the owned elements. A rank's owned elements, unit after unit,
// make its owned buffer.
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
  // world, rank: of the world; expert_world, expert_rank: of the ranks holding this rank's
  // experts (the world, when ep = 1).
  ParamPartition(const std::vector<ParamUnit>& units, int world, int rank, int expert_world,
                 int expert_rank)
      : world_(world), expert_world_(expert_world), units_(units) {
    std::int64_t at = 0;
    for (const ParamUnit& u : units) {
      OwnedPart p = part_of(u, u.expert ? expert_rank : rank);
      p.at = at;
      at += p.size;
      parts_.push_back(p);
    }
    owned_ = at;
  }
  ParamPartition(const std::vector<ParamUnit>& units, int world, int rank)
      : ParamPartition(units, world, rank, world, rank) {}
  // The ranks unit u is split over.
  int group_size(std::size_t u) const { return units_[u].expert ? expert_world_ : world_; }
  // This rank's part of unit u.
  const OwnedPart& part(std::size_t u) const { return parts_[u]; }
  const std::vector<OwnedPart>& parts() const { return parts_; }
  // The part of unit u of rank w of its group (its `at` is left 0).
  OwnedPart part_of(std::size_t u, int w) const { return part_of(units_[u], w); }
  std::int64_t owned() const { return owned_; }
  std::size_t num_units() const { return units_.size(); }
  const ParamUnit& unit(std::size_t u) const { return units_[u]; }

 private:
  OwnedPart part_of(const ParamUnit& u, int w) const {
    OwnedPart p;
    const int W = u.expert ? expert_world_ : world_;
    p.block = (u.size() + W - 1) / W;
    const std::int64_t lo = std::min(u.size(), std::int64_t(w) * p.block);
    const std::int64_t hi = std::min(u.size(), lo + p.block);
    p.begin = u.begin + lo;
    p.size = hi - lo;
    p.unit_begin = u.begin;
    return p;
  }

  int world_, expert_world_;
  std::vector<ParamUnit> units_;
  std::vector<OwnedPart> parts_;
  std::int64_t owned_ = 0;
};

}  // namespace gdn
