// The conv halo chain of conv_halo.h, written once over the device policy's memory moves.
#include "cp/conv_halo.h"

#include "comm/call_sites.h"
#include "ops/elementwise/elementwise.h"
#include "runtime/devices.h"

namespace gdn {

namespace conv_halo_detail {
constexpr int kHaloTag = 7001;

// Row i (0 .. W - 2) of the outgoing halo of batch row b is row Tl - (W - 1) + i of the
// sequence [halo_in; local]: from local when that index is >= 0, else from halo_in.
template <typename P>
P source_row(P halo_in, P local, int b, std::int64_t Tl, int C, int W, int i) {
  const std::int64_t j = Tl - (W - 1) + i;
  return j >= 0 ? local + (std::int64_t(b) * Tl + j) * C
                : halo_in + (std::int64_t(b) * (W - 1) + (W - 1) + j) * C;
}
}  // namespace conv_halo_detail

template <typename T, typename Dev>
void conv_halo_forward(Communicator& comm, const T* local, int B, std::int64_t Tl, int C, int W,
                       T* halo) {
  using conv_halo_detail::kHaloTag;
  const int r = comm.rank(), P = comm.size();
  const std::size_t n = std::size_t(B) * (W - 1) * C;
  if (n == 0) return;
  Dev::fill(halo, n, T(0));
  if (r > 0) comm.recv(halo, n * sizeof(T), r - 1, kHaloTag, cp_sites::kConvHaloForward);
  if (r + 1 < P) {
    Buffer<Dev, T> out(n);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < W - 1; ++i)
        Dev::copy(out.data() + (std::size_t(b) * (W - 1) + i) * C,
                  conv_halo_detail::source_row<const T*>(halo, local, b, Tl, C, W, i), C);
    comm.send(out.data(), n * sizeof(T), r + 1, kHaloTag, cp_sites::kConvHaloForward);
  }
}

template <typename T, typename Dev>
void conv_halo_backward(Communicator& comm, int B, std::int64_t Tl, int C, int W, T* dhalo,
                        T* dlocal) {
  using conv_halo_detail::kHaloTag;
  const int r = comm.rank(), P = comm.size();
  const std::size_t n = std::size_t(B) * (W - 1) * C;
  if (n == 0) return;
  // Reverse chain: first take the gradient of what this rank sent forward...
  if (r + 1 < P) {
    Buffer<Dev, T> dout(n);
    comm.recv(dout.data(), n * sizeof(T), r + 1, kHaloTag, cp_sites::kConvHaloBackward);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < W - 1; ++i) {
        T* row = conv_halo_detail::source_row<T*>(dhalo, dlocal, b, Tl, C, W, i);
        ops::add(Dev{}, row, row, dout.data() + (std::size_t(b) * (W - 1) + i) * C, C);
      }
  }
  // ...then pass the gradient of the received halo back to where it came from.
  if (r > 0) comm.send(dhalo, n * sizeof(T), r - 1, kHaloTag, cp_sites::kConvHaloBackward);
}

#define GDN_CONV_HALO_INSTANTIATE(T, Dev)                                                       \
  template void conv_halo_forward<T, Dev>(Communicator&, const T*, int, std::int64_t, int, int, \
                                          T*);                                                  \
  template void conv_halo_backward<T, Dev>(Communicator&, int, std::int64_t, int, int, T*, T*);
GDN_FOR_EACH_DEVICE(GDN_CONV_HALO_INSTANTIATE)
#undef GDN_CONV_HALO_INSTANTIATE

}  // namespace gdn
