#include "train/mesh.h"

#include "core/error.h"

namespace gdn {

Mesh make_mesh(Communicator& world, int dp, int cp, int ep) {
  GDN_CHECK(ep >= 1 && world.size() % ep == 0, "mesh: ep ", ep, " does not divide the ",
            world.size(), " ranks");
  GDN_CHECK(dp >= 1 && cp >= 1 && dp * cp == world.size(), "mesh dp=", dp, " x cp=", cp,
            " does not match the ", world.size(), " ranks launched: run mpirun -np ", dp * cp);
  Mesh m;
  m.world = &world;
  m.dp = dp;
  m.cp = cp;
  m.dp_rank = world.rank() / cp;
  m.cp_rank = world.rank() % cp;
  m.cp_comm = world.split(/*color=*/m.dp_rank, /*key=*/m.cp_rank);
  GDN_CHECK(m.cp_comm->rank() == m.cp_rank && m.cp_comm->size() == cp,
            "mesh: cp communicator has rank ", m.cp_comm->rank(), " of ", m.cp_comm->size(),
            ", expected ", m.cp_rank, " of ", cp);
  m.ep = ep;
  m.ep_rank = world.rank() % ep;
  if (ep > 1) {
    m.ep_comm = world.split(/*color=*/world.rank() / ep, /*key=*/m.ep_rank);
    m.expert_comm = world.split(/*color=*/m.ep_rank, /*key=*/world.rank() / ep);
  }
  return m;
}

}  // namespace gdn
