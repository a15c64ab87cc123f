// Wall time of a training step by component (--profile, train key `profile`): GEMMs by
// layer kind, the GDN and attention cores, MoE routing, the rest of each layer
// ("elementwise"), the optimizer and each communication call site.
//
// Time is exclusive: a Scope stops its parent's clock while it runs, so the components
// add up to the time spent under scopes, and nothing is counted twice. A Region names the
// layer kind (gdn, attention, mlp, moe, head, ...) and is itself charged as
// "elementwise.<kind>": whatever of a layer's time no inner scope claims is its norms,
// gates, convolutions and copies. Inner scopes of kind `by_region` (GEMMs) are charged as
// "<what>.<kind>". Only the thread that drives the step records (OpenMP work inside an op
// is inside its scope's wall time); disabled, every call is one branch.
//
// On a CUDA device kernels run asynchronously, so the host's clock alone would charge a
// scope its launches and charge the queued work to whichever later scope waits for it
// (the first H200 run put 350 of 572 ms on the embedding's backward, whose token copy
// waits). set_wait makes every clock read wait for the device first: the components are
// then the device's time, at one synchronisation per scope boundary.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace gdn::profile {

struct Entry {
  double seconds = 0;
  long calls = 0;
};

// Turns recording on (or off) for the calling thread: the one that drives the steps.
void enable(bool on);
// Whether the calling thread records.
bool enabled();
// A function that waits for the device's queued work (Dev::synchronize), called before
// every clock read while recording; nullptr (the default): none.
void set_wait(void (*wait)());

// The components recorded since the last take(), and a fresh start.
std::map<std::string, Entry> take();

// How a scope names the component it is charged to.
enum class Charge {
  own,        // prefix + what
  by_region,  // prefix + what + "." + the region in force (just what, outside regions)
  region,     // a Region: "elementwise." + what, and what is the region inside it
};

namespace detail {
void push(std::string_view prefix, std::string_view what, Charge charge);
void pop();
}  // namespace detail

// Charges its lifetime, less inner scopes, to a component; the name is put together only
// when recording (a Communicator call names "comm." + its site on every call).
class Scope {
 public:
  explicit Scope(std::string_view what, Charge charge = Charge::own) : Scope({}, what, charge) {}
  Scope(std::string_view prefix, std::string_view what, Charge charge = Charge::own)
      : on_(enabled()) {
    if (on_) detail::push(prefix, what, charge);
  }
  ~Scope() {
    if (on_) detail::pop();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
};

// A layer kind: inner by_region scopes are charged to it, the rest to "elementwise.<kind>".
// kind must be a string literal (it is kept, not copied).
class Region : public Scope {
 public:
  explicit Region(const char* kind) : Scope(kind, Charge::region) {}
};

// The GEMM component of the current region ("gemm.<kind>").
inline constexpr const char* kGemm = "gemm";

}  // namespace gdn::profile
