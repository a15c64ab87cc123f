#include "train/trainer_impl.h"

namespace gdn {

template class Trainer<float>;
template class Trainer<double>;

}  // namespace gdn
