/* The cuda backend's op families: each file fills its vtable entries for one
 * real type (explicitly instantiated for float and double in that file). */
#ifndef ECN_CUDA_OPS_CUH
#define ECN_CUDA_OPS_CUH

#include "ecenet/ops.h"

namespace ecn_cu {
template <typename T> void fill_geometry(ecenet_backend &b); /* cuda_geometry.cu */
template <typename T> void fill_wigner(ecenet_backend &b);   /* cuda_wigner.cu */
template <typename T> void fill_frame(ecenet_backend &b);    /* cuda_frame.cu */
template <typename T> void fill_layers(ecenet_backend &b);   /* cuda_layers.cu */
template <typename T> void fill_readout(ecenet_backend &b);  /* cuda_readout.cu */
} // namespace ecn_cu

#endif
