/* Host memory operations (mem/host_mem.c): the in-place conjugate
 * transpose that syevd's one-device eigenvectors go through, every dtype,
 * against a naive out-of-place one; orders that are and are not multiples
 * of host_mem.c's tile (64), from 1 up to several tiles. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "mem/mem.h"
#include "test.h"

/* Element k's value: distinct for every k and part, exactly representable
 * in float (k < 2^23 / 4). */
static double part_value(int64_t k, int imag) {
  return (double)(2 * k + imag + 1) * (k % 2 ? -1.0 : 1.0);
}

static void fill(void *a, int64_t count, jmg_dtype t) {
  const int cplx = jmg_dtype_is_complex(t);
  for (int64_t k = 0; k < count; ++k)
    for (int p = 0; p <= cplx; ++p) {
      const double x = part_value(k, p);
      if (jmg_dtype_real_size(t) == 4)
        ((float *)a)[k * (cplx + 1) + p] = (float)x;
      else
        ((double *)a)[k * (cplx + 1) + p] = x;
    }
}

static double part(const void *a, int64_t k, int p, jmg_dtype t) {
  const int w = jmg_dtype_is_complex(t) ? 2 : 1;
  return jmg_dtype_real_size(t) == 4 ? (double)((const float *)a)[k * w + p]
                                     : ((const double *)a)[k * w + p];
}

TEST(host_mem_conj_transpose_matches_a_naive_one_for_every_dtype) {
  const jmg_mem *m = jmg_host_mem();
  const jmg_mem_group g = {.n = 1, .device_ctx = NULL};
  const jmg_dtype dtypes[] = {JMG_F32, JMG_F64, JMG_C64, JMG_C128};
  const int64_t sizes[] = {1, 2, 5, 63, 64, 65, 130, 200};
  for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; ++d)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; ++s) {
      const jmg_dtype t = dtypes[d];
      const int64_t n = sizes[s];
      const int cplx = jmg_dtype_is_complex(t);
      const size_t bytes = (size_t)(n * n) * jmg_dtype_size(t);
      void *a = malloc(bytes), *orig = malloc(bytes);
      if (a == NULL || orig == NULL) {
        free(a);
        free(orig);
        TEST_FAIL_AT("malloc");
        return;
      }
      fill(orig, n * n, t);
      memcpy(a, orig, bytes);
      jmg_error err;
      jmg_error_clear(&err);
      int bad = m->conj_transpose(&g, 0, a, n, t, &err) != 0;
      if (bad) TEST_FAIL_AT("conj_transpose failed: %s", err.msg);
      /* Naive: new (i, j) = conj(old (j, i)), column-major, ld n. */
      for (int64_t j = 0; j < n && !bad; ++j)
        for (int64_t i = 0; i < n && !bad; ++i)
          for (int p = 0; p <= cplx && !bad; ++p) {
            const double want =
                (p ? -1.0 : 1.0) * part(orig, j + i * n, p, t);
            if (part(a, i + j * n, p, t) != want) {
              TEST_FAIL_AT("dtype %d, n %lld: element (%lld, %lld) part %d "
                           "is %g, want %g",
                           (int)t, (long long)n, (long long)i, (long long)j,
                           p, part(a, i + j * n, p, t), want);
              bad = 1;
            }
          }
      /* Twice is the identity. */
      if (!bad && (m->conj_transpose(&g, 0, a, n, t, &err) != 0 ||
                   memcmp(a, orig, bytes) != 0)) {
        TEST_FAIL_AT("dtype %d, n %lld: twice is not the identity", (int)t,
                     (long long)n);
        bad = 1;
      }
      free(a);
      free(orig);
      if (bad) return;
    }
}

/* jmg_dtype_set_one writes a whole 1 of its dtype, the imaginary part of a
 * complex one included, over whatever the buffer held (the CUDA call
 * frame's host buffers are not zeroed: cuSOLVERMg's potri built its complex
 * identity from one and got garbage imaginary parts). */
TEST(dtype_set_one_writes_a_whole_one_over_garbage) {
  for (int t = 0; t < JMG_NUM_DTYPES; ++t) {
    unsigned char buf[24];
    memset(buf, 0xA5, sizeof buf);
    jmg_dtype_set_one((jmg_dtype)t, buf);
    const size_t real = jmg_dtype_real_size((jmg_dtype)t);
    double re = real == 4 ? (double)((float *)buf)[0] : ((double *)buf)[0];
    CHECK(re == 1.0);
    if (jmg_dtype_is_complex((jmg_dtype)t)) {
      double im = real == 4 ? (double)((float *)buf)[1] : ((double *)buf)[1];
      CHECK(im == 0.0);
    }
    CHECK_EQ(buf[jmg_dtype_size((jmg_dtype)t)], 0xA5); /* nothing past it */
  }
}
