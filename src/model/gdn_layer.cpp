#include "model/gdn_layer_impl.h"

namespace gdn {

template class GdnLayer<float>;
template class GdnLayer<double>;

}  // namespace gdn
