/* Memory operations for CPU devices: every participant's memory is host
 * memory, so copies are synchronous memmoves and there is nothing to wait
 * for. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "mem/mem.h"

static int host_copy(const jmg_mem_group *g, void *dst, int dst_dev,
                     const void *src, int src_dev, size_t bytes,
                     jmg_error *err) {
  (void)g, (void)dst_dev, (void)src_dev, (void)err;
  if (bytes != 0 && dst != src) memmove(dst, src, bytes);
  return 0;
}

static int host_copy2d(const jmg_mem_group *g, int dev, void *dst,
                       size_t dst_pitch, const void *src, size_t src_pitch,
                       size_t width, size_t height, jmg_error *err) {
  (void)g, (void)dev, (void)err;
  if (width == 0 || dst == src) return 0;
  for (size_t r = 0; r < height; ++r)
    memmove((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch,
            width);
  return 0;
}

/* Lanes need no state, and running their copies one after the other is a
 * valid order. */
static int host_lanes_open(const jmg_mem_group *g, int nlanes, void **lanes,
                           jmg_error *err) {
  (void)g, (void)nlanes, (void)err;
  *lanes = NULL;
  return 0;
}

static int host_lane_copy(const jmg_mem_group *g, void *lanes, int lane,
                          void *dst, int dst_dev, const void *src, int src_dev,
                          size_t bytes, jmg_error *err) {
  (void)lanes, (void)lane;
  return host_copy(g, dst, dst_dev, src, src_dev, bytes, err);
}

static int host_lanes_close(const jmg_mem_group *g, void *lanes,
                            jmg_error *err) {
  (void)g, (void)lanes, (void)err;
  return 0;
}

static int host_alloc(const jmg_mem_group *g, int dev, size_t bytes, void **out,
                      jmg_error *err) {
  (void)g;
  *out = malloc(bytes ? bytes : 1);
  if (*out == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate %zu bytes for device %d", bytes, dev);
  jmg_trace_alloc(bytes); /* what was taken, not what was refused */
  return 0;
}

static void host_release(const jmg_mem_group *g, int dev, void *ptr,
                         size_t bytes) {
  (void)g, (void)dev, (void)bytes;
  free(ptr);
}

static int host_fill_nan(const jmg_mem_group *g, int dev, void *ptr,
                         size_t count, jmg_dtype dtype, jmg_error *err) {
  (void)g, (void)dev, (void)err;
  size_t reals = count * (jmg_dtype_is_complex(dtype) ? 2 : 1);
  if (jmg_dtype_real_size(dtype) == 4) {
    float *p = ptr;
    for (size_t i = 0; i < reals; ++i) p[i] = NAN;
  } else {
    double *p = ptr;
    for (size_t i = 0; i < reals; ++i) p[i] = (double)NAN;
  }
  return 0;
}

static int host_all_finite(const jmg_mem_group *g, int dev, const void *ptr,
                           int64_t rows, int64_t cols, int64_t ld,
                           jmg_dtype dtype, int *finite, jmg_error *err) {
  (void)g, (void)dev, (void)err;
  const int64_t w = jmg_dtype_is_complex(dtype) ? 2 : 1; /* reals a value */
  *finite = 1;
  for (int64_t j = 0; j < cols && *finite; ++j)
    for (int64_t i = 0; i < rows * w; ++i) {
      const int64_t k = j * ld * w + i;
      const double x = jmg_dtype_real_size(dtype) == 4
                           ? (double)((const float *)ptr)[k]
                           : ((const double *)ptr)[k];
      if (!isfinite(x)) {
        *finite = 0;
        break;
      }
    }
  return 0;
}

/* The in-place conjugate transpose, in square tiles of HOST_CT_TILE (the
 * last ones short where n is not a multiple): for each tile pair (I, J),
 * I <= J, every element of tile (I, J) is swapped with its mirror in tile
 * (J, I), both conjugated (a diagonal tile swaps within itself, its
 * diagonal conjugated in place). A tile pair stays in cache while it is
 * swapped; the strided half of it would not over whole columns. */
enum { HOST_CT_TILE = 64 };

#define HOST_CONJ_TRANSPOSE(name, real)                                       \
  static void name(real *a, int64_t n, int complex_) {                        \
    const int64_t w = complex_ ? 2 : 1; /* reals an element */                \
    for (int64_t jb = 0; jb < n; jb += HOST_CT_TILE)                          \
      for (int64_t ib = 0; ib <= jb; ib += HOST_CT_TILE) {                    \
        const int64_t je = jb + HOST_CT_TILE < n ? jb + HOST_CT_TILE : n;     \
        const int64_t ie = ib + HOST_CT_TILE < n ? ib + HOST_CT_TILE : n;     \
        for (int64_t j = jb; j < je; ++j) {                                   \
          const int64_t iend = ib == jb ? j + 1 : ie; /* i <= j: once each */ \
          for (int64_t i = ib; i < iend; ++i) {                               \
            real *x = a + (i + j * n) * w, *y = a + (j + i * n) * w;          \
            const real re = x[0];                                             \
            x[0] = y[0];                                                      \
            y[0] = re;                                                        \
            if (complex_) { /* x == y on the diagonal: conjugated once */     \
              const real im = x[1];                                           \
              x[1] = -y[1];                                                   \
              y[1] = -im;                                                     \
            }                                                                 \
          }                                                                   \
        }                                                                     \
      }                                                                       \
  }

HOST_CONJ_TRANSPOSE(conj_transpose_f, float)
HOST_CONJ_TRANSPOSE(conj_transpose_d, double)
#undef HOST_CONJ_TRANSPOSE

static int host_conj_transpose(const jmg_mem_group *g, int dev, void *ptr,
                               int64_t n, jmg_dtype dtype, jmg_error *err) {
  (void)g, (void)dev, (void)err;
  const int complex_ = jmg_dtype_is_complex(dtype);
  if (jmg_dtype_real_size(dtype) == 4)
    conj_transpose_f(ptr, n, complex_);
  else
    conj_transpose_d(ptr, n, complex_);
  return 0;
}

static int host_sync(const jmg_mem_group *g, jmg_error *err) {
  (void)g, (void)err;
  return 0;
}

static const jmg_mem g_host_mem = {
    .name = "host",
    .copy = host_copy,
    .copy2d = host_copy2d,
    .lanes_open = host_lanes_open,
    .lane_copy = host_lane_copy,
    .lanes_close = host_lanes_close,
    .alloc = host_alloc,
    .release = host_release,
    .fill_nan = host_fill_nan,
    .all_finite = host_all_finite,
    .conj_transpose = host_conj_transpose,
    .sync = host_sync,
};

const jmg_mem *jmg_host_mem(void) { return &g_host_mem; }
