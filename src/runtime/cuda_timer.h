// GPU time of a piece of host code that launches kernels, by CUDA events on the default
// stream: what the kernels took, without the host's launch overhead or a sync's wait
// (gdn_bench's per-pass rows). CUDA builds only.
#pragma once

#include <functional>

namespace gdn {

// Records an event, runs `launch` (which must not synchronise the device), records a
// second event and waits for it: the milliseconds between the two.
double cuda_event_ms(const std::function<void()>& launch);

}  // namespace gdn
