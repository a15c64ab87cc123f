// Every device policy this build has (core/device.h: Host; runtime/cuda_device.h: Cuda in
// CUDA builds), for the source files that instantiate a template on each:
// GDN_FOR_EACH_DEVICE(X) expands X(T, Dev) for T = float, double and every such Dev.
#pragma once

#include "core/device.h"
#if GDN_HAVE_CUDA
#include "runtime/cuda_device.h"
#define GDN_FOR_EACH_DEVICE(X) X(float, Host) X(double, Host) X(float, Cuda) X(double, Cuda)
#else
#define GDN_FOR_EACH_DEVICE(X) X(float, Host) X(double, Host)
#endif
