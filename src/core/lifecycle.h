// The call order of a layer's forward, backward and release, in one place
// (docs/design.md §6c has the table). Every layer object (Mixer, Mlp, the GDN CP core)
// holds a Lifecycle and asks it on each call, so an illegal order fails with a message
// naming the layer and where it stood instead of reading freed or stale buffers.
#pragma once

#include <string>

#include "core/error.h"

namespace gdn {

// What a layer keeps when it frees what its forward kept for the backward.
enum class Keep {
  nothing,  // everything goes: the next forward is a fresh one
  replay,   // the next forward recomputes the last one (same shard, same inputs): keep
            // what makes that cheap (what came from other ranks, the GDN core's chunk
            // entry states), drop the rest
};

class Lifecycle {
 public:
  enum class Stage {
    empty,       // nothing kept
    forwarded,   // the last forward's activations are held: backward may run
    replayable,  // released with Keep::replay: the next forward is a recomputation
  };

  explicit Lifecycle(std::string owner) : owner_(std::move(owner)) {}

  // A forward starts; true when it recomputes the last one (after release(Keep::replay)).
  bool forward() {
    const bool replay = stage_ == Stage::replayable;
    stage_ = Stage::forwarded;
    return replay;
  }
  // A backward starts: only on the activations of a forward.
  void backward() const {
    GDN_CHECK(stage_ == Stage::forwarded, owner_, ": backward called when ",
              stage_ == Stage::empty ? "nothing is kept (no forward since the last release)"
                                     : "the activations were released (Keep::replay): run "
                                       "the recomputing forward first");
  }
  // Keep::replay keeps a forward's results only when there was one.
  void release(Keep keep) {
    stage_ = keep == Keep::replay && stage_ != Stage::empty ? Stage::replayable : Stage::empty;
  }
  Stage stage() const { return stage_; }

 private:
  std::string owner_;
  Stage stage_ = Stage::empty;
};

}  // namespace gdn
