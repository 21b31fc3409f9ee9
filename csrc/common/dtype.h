/* The four element types jaxmg solves in. Layers below ffi see only this
 * enum, never XLA's or CUDA's type codes. */
#ifndef JMG_COMMON_DTYPE_H
#define JMG_COMMON_DTYPE_H

#include <stddef.h>
#include <string.h>

typedef enum {
  JMG_F32 = 0,
  JMG_F64 = 1,
  JMG_C64 = 2,
  JMG_C128 = 3,
} jmg_dtype;

#define JMG_NUM_DTYPES 4

/* Bytes per element. */
static inline size_t jmg_dtype_size(jmg_dtype t) {
  static const size_t sizes[JMG_NUM_DTYPES] = {4, 8, 8, 16};
  return sizes[t];
}

/* Bytes per element of the real type underneath (eigenvalues, norms). */
static inline size_t jmg_dtype_real_size(jmg_dtype t) {
  return (t == JMG_F32 || t == JMG_C64) ? 4 : 8;
}

static inline int jmg_dtype_is_complex(jmg_dtype t) {
  return t == JMG_C64 || t == JMG_C128;
}

/* Writes 1 in the element type at dst, a complex 1 with its imaginary part
 * zero: the buffer need not have been zeroed (a host buffer of the CUDA
 * call frame is not). */
static inline void jmg_dtype_set_one(jmg_dtype t, void *dst) {
  const size_t real = jmg_dtype_real_size(t);
  if (jmg_dtype_is_complex(t)) memset((char *)dst + real, 0, real);
  if (real == 4) {
    const float one = 1.0f;
    memcpy(dst, &one, sizeof one);
  } else {
    const double one = 1.0;
    memcpy(dst, &one, sizeof one);
  }
}

/* "float32", "float64", "complex64", "complex128". */
static inline const char *jmg_dtype_name(jmg_dtype t) {
  static const char *names[JMG_NUM_DTYPES] = {"float32", "float64", "complex64",
                                              "complex128"};
  return names[t];
}

#endif
