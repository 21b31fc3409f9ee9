/* The tiled factorizations' shared pieces (tiles.h). */
#include "engine/cusolvermg/tiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"

int jmg_tiles_check(const jmg_dist_matrix *a, const char *who, const char *op,
                    jmg_error *err) {
  if (a->ndev < 1 || a->ndev > JMG_CUDA_MAX_DEVICES)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, who,
                         "%d GPUs; between 1 and %d are supported", a->ndev,
                         JMG_CUDA_MAX_DEVICES);
  /* The tile's own 32-bit check is potrf's; with n >= 1 (the ops layer
   * checks it) and n a multiple of the tile it follows from n's. */
  if (a->tile < 1 || a->n % (a->tile * a->ndev) != 0 || a->tile > INT32_MAX ||
      a->n > INT32_MAX)
    return jmg_error_set(err, JMG_EINVAL, op, who,
                         "N=%lld is not a multiple of T_A=%lld times %d GPUs "
                         "(or exceeds cuBLAS's 32-bit sizes)",
                         (long long)a->n, (long long)a->tile, a->ndev);
  return 0;
}

void jmg_tiles_init(jmg_tiles *g, const jmg_dist_matrix *a, const char *op) {
  g->a = a;
  g->op = op;
  g->G = a->ndev;
  g->t = (int)a->tile;
  g->n = a->n;
  g->nt = a->n / a->tile;
  g->es = jmg_dtype_size(a->dtype);
}

int jmg_tiles_device(const jmg_tiles *g, int d) {
  return ((const jmg_cuda_device *)g->a->device_ctx[d])->device;
}

char *jmg_tiles_elem(const jmg_tiles *g, int d, int64_t col, int64_t row) {
  return (char *)g->a->data[d] +
         ((size_t)col * (size_t)g->n + (size_t)row) * g->es;
}

char *jmg_tiles_at(const jmg_tiles *g, int64_t k, int64_t row) {
  return jmg_tiles_elem(g, (int)(k % g->G), (k / g->G) * g->t, row);
}

int jmg_tiles_start_device(jmg_tiles *g, int d, cublasHandle_t blas,
                           cusolverDnHandle_t dn, cudaEvent_t *event,
                           jmg_error *err) {
  g->stream[d] =
      (cudaStream_t)((const jmg_cuda_device *)g->a->device_ctx[d])->stream;
  int rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaEventCreateWithFlags(event, cudaEventDisableTiming),
                      g->op, err);
  if (rc == 0)
    rc = JMG_CUBLAS_TRY(cublasSetStream(blas, g->stream[d]), g->op, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(dn, g->stream[d]), g->op, err);
  return rc;
}

int jmg_tiles_host_work(const jmg_tiles *g, size_t bytes, const char *who,
                        void **out, jmg_error *err) {
  *out = NULL;
  if (bytes == 0) return 0;
  *out = malloc(bytes);
  if (*out == NULL)
    return jmg_error_set(err, JMG_ENOMEM, g->op, "malloc",
                         "cannot allocate %zu bytes of %s host workspace",
                         bytes, who);
  return 0;
}

int jmg_tiles_copy_panel(const jmg_tiles *g, int d, void *dst, const void *src,
                         int64_t m, jmg_error *err) {
  return JMG_CUDA_TRY(
      cudaMemcpy2DAsync(dst, (size_t)m * g->es, src, (size_t)g->n * g->es,
                        (size_t)m * g->es, (size_t)g->t, cudaMemcpyDefault,
                        g->stream[d]),
      g->op, err);
}

int jmg_tiles_sync_device(const jmg_tiles *g, int d, jmg_error *err) {
  int rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(g->stream[d]), g->op, err);
  return rc;
}

int jmg_tiles_lane_start(const jmg_tiles *g, int d, jmg_tiles_lane *lane,
                         jmg_error *err) {
  int rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaStreamCreateWithFlags(&lane->copy, cudaStreamNonBlocking), g->op,
        err);
  for (int b = 0; rc == 0 && b < 2; ++b) {
    rc = JMG_CUDA_TRY(
        cudaEventCreateWithFlags(&lane->ready[b], cudaEventDisableTiming),
        g->op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaEventCreateWithFlags(&lane->freed[b], cudaEventDisableTiming),
          g->op, err);
  }
  return rc;
}

int jmg_tiles_lane_fetch(const jmg_tiles *g, int d, jmg_tiles_lane *lane,
                         int b, cudaEvent_t after, const void *src, int64_t m,
                         jmg_error *err) {
  int rc = 0;
  if (after != NULL)
    rc = JMG_CUDA_TRY(cudaStreamWaitEvent(lane->copy, after, 0), g->op, err);
  /* Not yet recorded (the buffer's first use): no wait. */
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamWaitEvent(lane->copy, lane->freed[b], 0),
                      g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(lane->buf[b], (size_t)m * g->es, src,
                          (size_t)g->n * g->es, (size_t)m * g->es,
                          (size_t)g->t, cudaMemcpyDefault, lane->copy),
        g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaEventRecord(lane->ready[b], lane->copy), g->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamWaitEvent(g->stream[d], lane->ready[b], 0),
                      g->op, err);
  return rc;
}

int jmg_tiles_lane_release(const jmg_tiles *g, int d, jmg_tiles_lane *lane,
                           int b, jmg_error *err) {
  return JMG_CUDA_TRY(cudaEventRecord(lane->freed[b], g->stream[d]), g->op,
                      err);
}

int jmg_tiles_lane_end(const jmg_tiles *g, int d, jmg_tiles_lane *lane, int rc,
                       jmg_error *err) {
  jmg_error ignored;
  jmg_error *e = rc == 0 ? err : &ignored;
  int s = 0;
  if (lane->copy != NULL) {
    s = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, e);
    if (s == 0) s = JMG_CUDA_TRY(cudaStreamSynchronize(lane->copy), g->op, e);
    cudaStreamDestroy(lane->copy);
  }
  for (int b = 0; b < 2; ++b) {
    if (lane->ready[b] != NULL) cudaEventDestroy(lane->ready[b]);
    if (lane->freed[b] != NULL) cudaEventDestroy(lane->freed[b]);
  }
  return rc != 0 ? rc : s;
}

int jmg_tiles_timer_start(jmg_tiles_timer *tm, const jmg_tiles *g,
                          int64_t marks_per_device, jmg_error *err) {
  memset(tm, 0, sizeof *tm);
  if (!jmg_trace_on() || marks_per_device < 1) return 0;
  tm->cap = marks_per_device;
  int rc = 0;
  for (int d = 0; rc == 0 && d < g->G; ++d) {
    tm->ev[d] = calloc((size_t)tm->cap, sizeof *tm->ev[d]);
    tm->kind[d] = calloc((size_t)tm->cap, sizeof *tm->kind[d]);
    if (tm->ev[d] == NULL || tm->kind[d] == NULL) {
      rc = jmg_error_set(err, JMG_ENOMEM, g->op, "malloc",
                         "cannot allocate %lld trace events",
                         (long long)tm->cap);
      break;
    }
    rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
    for (int64_t i = 0; rc == 0 && i < tm->cap; ++i)
      rc = JMG_CUDA_TRY(cudaEventCreate(&tm->ev[d][i]), g->op, err);
  }
  tm->on = 1; /* from here, jmg_tiles_timer_end frees what was made */
  for (int d = 0; rc == 0 && d < g->G; ++d) {
    rc = JMG_CUDA_TRY(cudaSetDevice(jmg_tiles_device(g, d)), g->op, err);
    if (rc == 0) rc = jmg_tiles_timer_mark(tm, g, d, JMG_TILES_IDLE, err);
  }
  return rc;
}

int jmg_tiles_timer_mark(jmg_tiles_timer *tm, const jmg_tiles *g, int d,
                         jmg_tiles_kind kind, jmg_error *err) {
  if (!tm->on) return 0;
  if (tm->count[d] >= tm->cap) {
    tm->dropped += 1;
    return 0;
  }
  const int64_t i = tm->count[d];
  int rc = JMG_CUDA_TRY(cudaEventRecord(tm->ev[d][i], g->stream[d]), g->op,
                        err);
  if (rc == 0) {
    tm->kind[d][i] = (unsigned char)kind;
    tm->count[d] = i + 1;
  }
  return rc;
}

static const char *const kind_names[JMG_TILES_KINDS] = {
    "idle", "wait", "factor", "swap", "copy", "update"};

/* Device d's sums by kind into ms; 0, or -1 where an interval cannot be
 * read (an event not completed). */
static int sum_device(const jmg_tiles_timer *tm, int d, double *ms) {
  for (int k = 0; k < JMG_TILES_KINDS; ++k) ms[k] = 0.0;
  for (int64_t i = 1; i < tm->count[d]; ++i) {
    float part = 0.0f;
    if (cudaEventElapsedTime(&part, tm->ev[d][i - 1], tm->ev[d][i]) !=
        cudaSuccess) {
      (void)cudaGetLastError(); /* not sticky: clear it */
      return -1;
    }
    ms[tm->kind[d][i]] += (double)part;
  }
  return 0;
}

void jmg_tiles_timer_end(jmg_tiles_timer *tm, const jmg_tiles *g,
                         const char *what) {
  if (!tm->on) return;
  char text[1024];
  size_t used = 0;
  text[0] = '\0';
  for (int d = 0; d < g->G && used < sizeof text; ++d) {
    double ms[JMG_TILES_KINDS];
    int w = snprintf(text + used, sizeof text - used, "%sGPU %d:",
                     d ? "; " : "", d);
    if (w > 0) used += (size_t)w;
    if (sum_device(tm, d, ms) != 0) {
      w = snprintf(text + used, used < sizeof text ? sizeof text - used : 0,
                   " not measured");
      if (w > 0) used += (size_t)w;
      continue;
    }
    for (int k = 0; k < JMG_TILES_KINDS && used < sizeof text; ++k) {
      if (ms[k] <= 0.0) continue;
      w = snprintf(text + used, sizeof text - used, " %s %.2f ms",
                   kind_names[k], ms[k]);
      if (w > 0) used += (size_t)w;
    }
  }
  if (tm->dropped > 0)
    jmg_trace_note("%s [%s; %lld marks dropped]", what, text,
                   (long long)tm->dropped);
  else
    jmg_trace_note("%s [%s]", what, text);
  for (int d = 0; d < g->G; ++d) {
    for (int64_t i = 0; tm->ev[d] != NULL && i < tm->cap; ++i)
      if (tm->ev[d][i] != NULL) (void)cudaEventDestroy(tm->ev[d][i]);
    free(tm->ev[d]);
    free(tm->kind[d]);
  }
  memset(tm, 0, sizeof *tm);
}
