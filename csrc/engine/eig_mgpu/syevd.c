/* syevd on the GPUs one process drives, by jaxmg's own eigensolver
 * (eig_mgpu.h):
 *
 * 1. A = Q T Q^T in place on every GPU's columns (trd.h jmg_trd_reduce);
 * 2. T's eigenvalues and eigenvectors by cuSOLVERMp's divide and conquer
 *    on participant 0's GPU (stedc.c), the vectors copied into Z, laid out
 *    as A; where cuSOLVERMp is not installed (or fails), on the host:
 *    eigenvalues by dsterf, or eigenvectors by dstemr in chunks on the
 *    host's cores (engine/lapack/tridiagonal.h), each chunk copied into Z
 *    as it comes;
 * 3. Z = Q Z on every GPU's columns of Z (jmg_trd_ormtr), then Z into A's
 *    buffers: the eigenvectors in the block-cyclic layout the contract
 *    wants.
 *
 * Scratch per GPU: the reduction's (about 4 panels of N rows), then Z
 * (the GPU's columns) and the back-transformation's, from XLA's allocator
 * (cuda/call.h); on participant 0 also Stedc's Q (N x N) and workspace
 * (3 to 5 times Q, session 13), which jmg_eig_mgpu_syevd_bytes does not
 * count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/trace.h"
#include "cuda/call.h"
#include "cuda/check.h"
#include "engine/eig_mgpu/eig_mgpu.h"
#include "engine/eig_mgpu/trd.h"
#include "engine/lapack/tridiagonal.h"

size_t jmg_eig_mgpu_syevd_bytes(int64_t n, int64_t tile, int ndev, int dev,
                                int want_vectors) {
  const size_t red = jmg_trd_reduce_bytes(n, tile, ndev, dev, JMG_EIG_MGPU_NB);
  if (!want_vectors) return red;
  const int64_t cnt = jmg_bc_count(n, tile, ndev, dev);
  const size_t z = jmg_cuda_align((size_t)(cnt > 0 ? cnt : 1) * (size_t)n *
                                  sizeof(double));
  const size_t back = z + jmg_trd_ormtr_bytes(n, tile, ndev, dev);
  return red > back ? red : back;
}

/* Where the host's eigenvectors go: Z's columns on their GPUs. */
typedef struct z_sink {
  const jmg_trd_gpus *g;
  const jmg_trd_matrix *z;
  const char *op;
} z_sink;

static int to_z(void *ctx, int64_t first, int64_t count, const void *chunk,
                jmg_error *err) {
  const z_sink *k = ctx;
  const int64_t n = k->z->n, tile = k->z->tile;
  const int ndev = k->g->ndev;
  int rc = 0;
  /* Runs of columns within one tile: contiguous on their GPU. */
  for (int64_t c = first; rc == 0 && c < first + count;) {
    int64_t run = (c / tile + 1) * tile - c;
    if (run > first + count - c) run = first + count - c;
    const int q = jmg_bc_owner(c, tile, ndev);
    rc = JMG_CUDA_TRY(cudaSetDevice(k->g->device[q]), k->op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpyAsync(k->z->a[q] + jmg_bc_local(c, tile, ndev) * n,
                          (const double *)chunk + (c - first) * n,
                          (size_t)(run * n) * sizeof(double),
                          cudaMemcpyHostToDevice, k->g->stream[q]),
          k->op, err);
    c += run;
  }
  /* The chunk's buffer is reused when this returns. */
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    rc = JMG_CUDA_TRY(cudaSetDevice(k->g->device[q]), k->op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaStreamSynchronize(k->g->stream[q]), k->op, err);
  }
  return rc;
}

static int sync_all(const jmg_trd_gpus *g, const char *op, jmg_error *err) {
  int rc = 0;
  for (int q = 0; rc == 0 && q < g->ndev; ++q) {
    rc = JMG_CUDA_TRY(cudaSetDevice(g->device[q]), op, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(g->stream[q]), op, err);
  }
  return rc;
}

/* The reduction's path that JAXMG_SYEVD_MGPU_PATH names (the replicated
 * one where unset). A malformed value is JMG_EINVAL naming the variable. */
static int path_of_config(const char *op, jmg_trd_path *path, jmg_error *err) {
  jmg_config c;
  jmg_config_read(&c);
  if (c.syevd_mgpu_path[0] == '\0' ||
      strcmp(c.syevd_mgpu_path, "replicated") == 0)
    *path = JMG_TRD_REPLICATED;
  else if (strcmp(c.syevd_mgpu_path, "owner") == 0)
    *path = JMG_TRD_OWNER;
  else
    return jmg_error_set(err, JMG_EINVAL, op, "JAXMG_SYEVD_MGPU_PATH",
                         "\"%s\" is not a path of the multi-GPU reduction: "
                         "use \"replicated\" (the default) or \"owner\"",
                         c.syevd_mgpu_path);
  return 0;
}

/* The reduction's profile as a trace note: where its time went on GPU 0. */
static void trace_profile(jmg_trd_path path, int ndev,
                          const jmg_trd_profile *p) {
  jmg_trace_note(
      "sytrd [%s, %d GPUs, panels of %d: columns %.1f ms, trailing updates "
      "%.1f ms; us a column by eighths of the columns: %.0f %.0f %.0f %.0f "
      "%.0f %.0f %.0f %.0f]",
      path == JMG_TRD_REPLICATED ? "replicated" : "owner", ndev,
      JMG_EIG_MGPU_NB, p->columns_ms, p->trailing_ms, p->us_per_column[0],
      p->us_per_column[1], p->us_per_column[2], p->us_per_column[3],
      p->us_per_column[4], p->us_per_column[5], p->us_per_column[6],
      p->us_per_column[7]);
}

/* With JAXMG_TRACE, where T stops being finite (a non-finite T from a
 * finite A is a fault of the reduction; T's solver then does not converge,
 * and the op's outputs are NaN with status > 0), so that a trace line says
 * which step made a NaN. */
static void trace_t(const double *d, const double *e, int64_t n) {
  for (int64_t c = 0; c < n; ++c)
    if (!isfinite(d[c]) || (c + 1 < n && !isfinite(e[c]))) {
      jmg_trace_note("sytrd: T not finite from column %lld (d %g, e %g)",
                     (long long)c, d[c], c + 1 < n ? e[c] : 0.0);
      return;
    }
}

int jmg_eig_mgpu_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                       int want_vectors, int *info, jmg_error *err) {
  (void)e;
  const char *op = jmg_op_name(JMG_OP_SYEVD);
  const int64_t n = a->n, tile = a->tile;
  const int ndev = a->ndev;
  *info = 0;
  if (a->dtype != JMG_F64 || ndev < 1 || ndev > JMG_TRD_MAX_DEV || tile < 1)
    return jmg_error_set(err, JMG_EUNSUPPORTED, op, "eig-mgpu",
                         "float64 on 1 .. %d GPUs only, not %s on %d",
                         JMG_TRD_MAX_DEV, jmg_dtype_name(a->dtype), ndev);
  jmg_trd_path path = JMG_TRD_REPLICATED;
  int rc = path_of_config(op, &path, err);
  if (rc != 0) return rc;
  jmg_cuda_call c;
  rc = jmg_cuda_call_begin(&c, op, "eig-mgpu", ndev, a->device_ctx,
                           JMG_CUDA_CALL_HANDLES, err);
  jmg_trd_gpus g;
  jmg_trd_matrix am, zm;
  memset(&g, 0, sizeof g);
  memset(&am, 0, sizeof am);
  memset(&zm, 0, sizeof zm);
  g.ndev = ndev;
  am.n = zm.n = n;
  am.tile = zm.tile = tile;
  void *work[JMG_TRD_MAX_DEV] = {NULL};
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    const jmg_cuda_device *dev = a->device_ctx[q];
    g.device[q] = dev->device;
    g.stream[q] = (cudaStream_t)dev->stream;
    g.blas[q] = c.h->blas[q];
    am.a[q] = a->data[q];
    rc = jmg_cuda_call_buffer(
        &c, q, jmg_eig_mgpu_syevd_bytes(n, tile, ndev, q, want_vectors),
        &work[q], err);
    if (rc == 0 && want_vectors) {
      zm.a[q] = work[q];
    }
  }
  /* Inputs were written on XLA's streams, which each participant
   * synchronized before it joined; the ops layer's copies are on the
   * leader's stream. */
  if (rc == 0) rc = c.mem->sync(&c.group, err);
  jmg_trace_mark("engine start");
  const size_t nn = (size_t)(n > 0 ? n : 1);
  double *d = malloc(nn * sizeof(double)), *ev = calloc(nn, sizeof(double)),
         *tau = calloc(nn, sizeof(double)), *wd = malloc(nn * sizeof(double));
  if (rc == 0 && (d == NULL || ev == NULL || tau == NULL || wd == NULL))
    rc = jmg_error_set(err, JMG_ENOMEM, op, "malloc",
                       "cannot allocate T on the host (N=%lld)", (long long)n);
  jmg_trd_profile prof;
  const int traced = jmg_trace_on();
  if (rc == 0)
    rc = jmg_trd_reduce(&g, &am, JMG_EIG_MGPU_NB, path, work, d, ev, tau,
                        traced ? &prof : NULL, op, err);
  jmg_trace_mark("sytrd");
  if (rc == 0 && traced) {
    trace_profile(path, ndev, &prof);
    trace_t(d, ev, n);
  }
  /* Z after the reduction's scratch: the same buffers, now free (the
   * reduction waited for its streams). The back-transformation's scratch
   * follows Z. */
  void *orm[JMG_TRD_MAX_DEV] = {NULL};
  for (int q = 0; q < ndev && want_vectors; ++q) {
    const int64_t cnt = jmg_bc_count(n, tile, ndev, q);
    orm[q] = (char *)work[q] +
             jmg_cuda_align((size_t)(cnt > 0 ? cnt : 1) * nn * sizeof(double));
  }
  /* T on the GPU by cuSOLVERMp's Stedc where the library is there; where
   * it is not, or fails, on the host (the one-GPU tridiagonal path's
   * solvers), which writes every output again. */
  int ran = 0;
  if (rc == 0) {
    jmg_error gpu_err;
    jmg_error_clear(&gpu_err);
    const int r = jmg_eig_mgpu_stedc(&c, &g, n, d, ev, wd,
                                     want_vectors ? &zm : NULL, info, &ran,
                                     &gpu_err);
    if (r != 0) {
      jmg_trace_note("cusolverMpStedc failed (%s: %s): T on the host",
                     gpu_err.call, gpu_err.msg);
      ran = 0;
      *info = 0;
    }
    if (ran) jmg_trace_mark("stedc");
  }
  if (rc == 0 && !ran && !want_vectors)
    rc = jmg_tridiagonal_eigenvalues(op, n, d, ev, wd, info, err);
  z_sink sink = {&g, &zm, op};
  if (rc == 0 && !ran && want_vectors)
    rc = jmg_tridiagonal_eigenvectors(op, n, d, ev, wd, JMG_F64, 0, to_z, &sink,
                                      info, err);
  if (!ran) jmg_trace_mark(want_vectors ? "stemr" : "sterf");
  if (rc == 0 && *info != 0)
    jmg_trace_note("T's eigenproblem did not converge (info %d)", *info);
  if (rc == 0 && *info == 0 && want_vectors) {
    rc = jmg_trd_ormtr(&g, &am, tau, &zm, orm, op, err);
    /* Every GPU read the others' reflectors: all done before A is
     * overwritten. */
    if (rc == 0) rc = sync_all(&g, op, err);
    for (int q = 0; rc == 0 && q < ndev; ++q) {
      const int64_t cnt = jmg_bc_count(n, tile, ndev, q);
      rc = JMG_CUDA_TRY(cudaSetDevice(g.device[q]), op, err);
      if (rc == 0 && cnt > 0)
        rc = JMG_CUDA_TRY(cudaMemcpyAsync(am.a[q], zm.a[q],
                                          (size_t)cnt * nn * sizeof(double),
                                          cudaMemcpyDeviceToDevice, g.stream[q]),
                          op, err);
    }
    jmg_trace_mark("ormtr");
  }
  if (rc == 0 && *info == 0) {
    rc = JMG_CUDA_TRY(cudaSetDevice(g.device[0]), op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(cudaMemcpyAsync(w, wd, (size_t)n * sizeof(double),
                                        cudaMemcpyHostToDevice, g.stream[0]),
                        op, err);
  }
  /* Everything done before the scratch goes back and wd is freed. */
  if (c.begun) {
    const int r = sync_all(&g, op, err);
    if (rc == 0) rc = r;
  }
  free(d);
  free(ev);
  free(tau);
  free(wd);
  return jmg_cuda_call_end(&c, rc, err);
}
