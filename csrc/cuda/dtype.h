/* jaxmg's element types as the CUDA libraries name them, and a scalar of any
 * of them (the alpha and beta that cuBLAS takes by pointer in the matrix's
 * own type). */
#ifndef JMG_CUDA_DTYPE_H
#define JMG_CUDA_DTYPE_H

#include <cuComplex.h>
#include <library_types.h>
#include <string.h>

#include "common/dtype.h"

static inline cudaDataType jmg_cuda_data_type(jmg_dtype t) {
  static const cudaDataType types[JMG_NUM_DTYPES] = {CUDA_R_32F, CUDA_R_64F,
                                                     CUDA_C_32F, CUDA_C_64F};
  return types[t];
}

/* The real type of t (the type of a Hermitian matrix's eigenvalues). */
static inline cudaDataType jmg_cuda_real_data_type(jmg_dtype t) {
  return jmg_dtype_real_size(t) == 4 ? CUDA_R_32F : CUDA_R_64F;
}

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

/* re + i im in type t (im dropped for the real types). */
static inline jmg_cuda_scalar jmg_cuda_scalar_of_complex(jmg_dtype t, double re,
                                                         double im) {
  jmg_cuda_scalar x = jmg_cuda_scalar_of(t, re);
  if (t == JMG_C64) x.c = make_cuComplex((float)re, (float)im);
  if (t == JMG_C128) x.z = make_cuDoubleComplex(re, im);
  return x;
}

#endif
