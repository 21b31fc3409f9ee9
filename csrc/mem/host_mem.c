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
  jmg_trace_alloc(bytes);
  *out = malloc(bytes ? bytes : 1);
  if (*out == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate %zu bytes for device %d", bytes, dev);
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
    .sync = host_sync,
};

const jmg_mem *jmg_host_mem(void) { return &g_host_mem; }
