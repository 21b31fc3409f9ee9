/* A scalar of any of the four element types, for the alpha and beta that
 * cuBLAS takes by pointer in the matrix's own type. */
#ifndef JMG_ENGINE_CUDA_SCALAR_H
#define JMG_ENGINE_CUDA_SCALAR_H

#include <cuComplex.h>
#include <string.h>

#include "common/dtype.h"

typedef union jmg_cuda_scalar {
  float s;
  double d;
  cuComplex c;
  cuDoubleComplex z;
} jmg_cuda_scalar;

/* v (real) in type t. */
static inline jmg_cuda_scalar jmg_cuda_scalar_of(jmg_dtype t, double v) {
  jmg_cuda_scalar x;
  memset(&x, 0, sizeof x);
  switch (t) {
    case JMG_F32:
      x.s = (float)v;
      break;
    case JMG_F64:
      x.d = v;
      break;
    case JMG_C64:
      x.c = make_cuComplex((float)v, 0.0f);
      break;
    case JMG_C128:
      x.z = make_cuDoubleComplex(v, 0.0);
      break;
  }
  return x;
}

#endif
