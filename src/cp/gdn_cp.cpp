#include "cp/gdn_cp_impl.h"

namespace gdn {

template class GdnContextParallel<float>;
template class GdnContextParallel<double>;

}  // namespace gdn
