// The one-rank backend: rank 0 of 1. Lets serial tools and tests drive CP code without MPI;
// its byte counts (the front's, comm/communicator.h) are what MpiCommunicator counts with
// one rank, so payload assertions written against it carry over.
#pragma once

#include "comm/communicator.h"

namespace gdn {

class SingleCommunicator : public Communicator {
 protected:
  int do_rank() const override { return 0; }
  int do_size() const override { return 1; }
  const char* backend_name() const override { return "SingleCommunicator"; }

  GDN_COMMUNICATOR_OPERATIONS;
};

}  // namespace gdn
