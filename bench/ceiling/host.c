/* Host vectors for the checks: doubles (complex as re, im pairs), converted
 * to and from the matrix's element type at the device boundary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ceiling.h"

void host_random(double *v, size_t count, uint64_t *state) {
  for (size_t i = 0; i < count; ++i) {
    /* xorshift64*: plenty for right-hand sides and probe vectors. */
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    const uint64_t r = x * 0x2545F4914F6CDD1DULL;
    v[i] = (double)(r >> 11) * 0x1p-52 - 1.0;
  }
}

double host_norm(const double *v, size_t count) {
  double s = 0.0;
  for (size_t i = 0; i < count; ++i) s += v[i] * v[i];
  return sqrt(s);
}

double host_diff_norm(const double *a, const double *b, size_t count) {
  double s = 0.0;
  for (size_t i = 0; i < count; ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return sqrt(s);
}

int host_to_device(dtype_t dt, const double *h, size_t count, void *dev) {
  const dtype_info *ti = dtype_of(dt);
  const size_t nreal = count * (ti->complex ? 2 : 1);
  void *buf = malloc(nreal * (ti->real_type == CUDA_R_32F ? 4 : 8));
  if (buf == NULL) {
    fprintf(stderr, "ceiling: out of host memory\n");
    return -1;
  }
  if (ti->real_type == CUDA_R_32F)
    for (size_t i = 0; i < nreal; ++i) ((float *)buf)[i] = (float)h[i];
  else
    for (size_t i = 0; i < nreal; ++i) ((double *)buf)[i] = h[i];
  int rc = CUDA(cudaMemcpy(dev, buf, count * ti->size, cudaMemcpyDefault));
  free(buf);
  return rc;
}

int device_to_host(dtype_t dt, const void *dev, size_t count, double *h) {
  const dtype_info *ti = dtype_of(dt);
  const size_t nreal = count * (ti->complex ? 2 : 1);
  void *buf = malloc(nreal * (ti->real_type == CUDA_R_32F ? 4 : 8));
  if (buf == NULL) {
    fprintf(stderr, "ceiling: out of host memory\n");
    return -1;
  }
  int rc = CUDA(cudaMemcpy(buf, dev, count * ti->size, cudaMemcpyDefault));
  if (rc == 0 && ti->real_type == CUDA_R_32F)
    for (size_t i = 0; i < nreal; ++i) h[i] = ((float *)buf)[i];
  else if (rc == 0)
    for (size_t i = 0; i < nreal; ++i) h[i] = ((double *)buf)[i];
  free(buf);
  return rc;
}
