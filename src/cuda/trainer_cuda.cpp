// The Trainer with the model on the GPU: train/trainer_impl.h instantiated for CudaBackend.
#include "cuda/cuda_backend.h"
#include "train/trainer_impl.h"

namespace gdn {

template class Trainer<float, CudaBackend<float>>;
template class Trainer<double, CudaBackend<double>>;

}  // namespace gdn
