#include "model/model_impl.h"

namespace gdn {

template class GdnModel<float>;
template class GdnModel<double>;

}  // namespace gdn
