#include "train/mesh.h"

#include "core/error.h"

namespace gdn {

Mesh make_mesh(Communicator& world, int dp, int cp) {
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
  return m;
}

}  // namespace gdn
