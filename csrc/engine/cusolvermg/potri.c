/* potri on the cuSOLVERMg engine: jaxmg's tiled Cholesky (cuda_potrf.h),
 * then its tiled inverse from the factor (cuda_potri.h) into a second copy
 * of each shard, which A takes at the end in the contiguous layout, then
 * the Hermitian fill of the upper triangle.
 *
 * cuSOLVERMg's potri is not used, nor its potrs against the identity (what
 * ran before session 20, one column slab at a time through the first GPU):
 * on several GPUs both give wrong entries past 2048 rows and columns
 * (docs/gpu-notes.md, "Three defects of cuSOLVERMg 13.0"), and the slabs
 * reached 8% of the GPUs' float64 peak (N = 32768 on 4 H200: 1.41 s). */
#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cuda_hermitian.h"
#include "engine/cusolvermg/cuda_potri.h"
#include "engine/cusolvermg/mg.h"

static cudaStream_t stream_of(const jmg_dist_matrix *a, int d) {
  return (cudaStream_t)((const jmg_cuda_device *)a->device_ctx[d])->stream;
}

static int potri_tiles(const jmg_dist_matrix *a, int *info, jmg_error *err) {
  jmg_mg_call call;
  int rc = jmg_mg_begin(&call, JMG_OP_POTRI, a, err);
  jmg_cuda_call *c = &call.cuda;
  const char *op = c->op;
  const size_t shard_bytes =
      (size_t)a->n * (size_t)a->local_cols * jmg_dtype_size(a->dtype);
  const size_t panel_bytes = jmg_cuda_potri_workspace(a);
  void *x[JMG_MG_MAX_DEVICES] = {0}, *panels[JMG_MG_MAX_DEVICES] = {0};
  for (int d = 0; rc == 0 && d < a->ndev; ++d) {
    rc = jmg_cuda_call_buffer(c, d, shard_bytes, &x[d], err);
    if (rc == 0) rc = jmg_cuda_call_buffer(c, d, panel_bytes, &panels[d], err);
  }
  cudaLibMgMatrixDesc_t desc_a = NULL;
  int h_info = 0;
  if (rc == 0) rc = jmg_mg_factor_for_solve(&call, x, 0, &desc_a, &h_info, err);
  const int factored = rc == 0; /* A holds the factor from here on */
  if (rc == 0 && h_info == 0) {
    const jmg_cuda_potrf_handles h = {c->h->blas, c->h->dn, c->h->dn_params};
    rc = jmg_cuda_potri_from_factor(a, &h, x, panels, op, err);
  }
  /* x holds the inverse in A's block-cyclic layout; A takes it in the
   * contiguous one (device d: columns d*r .. d*r + r - 1), which the ops
   * layer expects of this engine's potri and the fill works on: tile k's
   * columns move whole, from x[k % G] to the device of column k*t. */
  const int64_t t = a->tile, r = a->local_cols, G = a->ndev;
  const size_t tile_bytes = (size_t)t * (size_t)a->n * jmg_dtype_size(a->dtype);
  for (int64_t k = 0; rc == 0 && h_info == 0 && k < a->n / t; ++k) {
    const int to = (int)(k * t / r);
    rc = JMG_CUDA_TRY(
        cudaSetDevice(((const jmg_cuda_device *)a->device_ctx[to])->device),
        op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpyAsync((char *)a->data[to] + (size_t)(k * t % r) / t *
                                                    tile_bytes,
                          (char *)x[k % G] + (size_t)(k / G) * tile_bytes,
                          tile_bytes, cudaMemcpyDefault, stream_of(a, to)),
          op, err);
  }
  if (rc == 0) rc = c->mem->sync(&c->group, err);
  jmg_trace_mark("potri tiles");
  *info = h_info;
  /* Once A holds the factor, a want of memory (a copy's bookkeeping) is not
   * the contract's JMG_ENOMEM: calling potri again would invert the factor. */
  if (factored && rc == -(int)JMG_ENOMEM) {
    err->code = JMG_EINTERNAL;
    rc = -(int)JMG_EINTERNAL;
  }
  /* After a failure copies may still run on x: the end waits for them
   * before x goes back. */
  return jmg_mg_end(&call, rc, err);
}

static int fill_upper(const jmg_dist_matrix *a, jmg_error *err) {
  jmg_mg_call call;
  int rc = jmg_mg_begin(&call, JMG_OP_POTRI, a, err);
  if (rc == 0) rc = jmg_cuda_hermitian_fill(a, call.cuda.h->blas, err);
  return jmg_mg_end(&call, rc, err);
}

/* The inverse's lower triangle is right; the contract wants both. The
 * fill is a call of its own on the device set, after the tiles' call. */
int jmg_mg_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  /* A want of memory before the inverse is written into A is the contract's JMG_ENOMEM
   * (nothing written): the ops layer may free its scratch and call potri
   * again (exec/leader.c, jmg_leader_retry_without_scratch). */
  int rc = potri_tiles(a, info, err);
  if (rc != 0 || *info != 0) return rc;
  rc = fill_upper(a, err);
  /* The fill takes its scratch after A holds the inverse: a lack of memory
   * then is not that JMG_ENOMEM, on which the ops layer would call potri
   * again, on the inverse. */
  if (rc == -(int)JMG_ENOMEM) {
    err->code = JMG_EINTERNAL;
    rc = -(int)JMG_EINTERNAL;
  }
  return rc;
}
