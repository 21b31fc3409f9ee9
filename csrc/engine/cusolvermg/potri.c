/* potri with cuSOLVERMg: the inverse by solves against the identity, slab
 * by slab, then the Hermitian fill of its upper triangle (mg.h). */
#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cuda_hermitian.h"
#include "engine/cusolvermg/mg.h"

static cudaStream_t stream_of(const jmg_dist_matrix *a, int d) {
  return (cudaStream_t)((const jmg_cuda_device *)a->device_ctx[d])->stream;
}

/* The inverse, column slab by column slab: slab d of A^-1 solves A X = I_d,
 * where I_d holds columns d*r .. (d+1)*r - 1 of the identity. Each slab is
 * solved in one right-hand-side tile on the grid's first GPU (the layout of B
 * that cuSOLVERMg's potrs takes) and copied to GPU d; slab 0 is solved last,
 * in place. A keeps its factor until every slab is done, then takes the
 * result: the inverse in the contiguous layout.
 *
 * cuSOLVERMg's potri is not used, nor potrs with B spread over the GPUs:
 * on several GPUs both give wrong entries in rows and columns past 2048
 * (docs/gpu-notes.md, "Three defects of cuSOLVERMg 13.0"; the same defect
 * as potrs past 2048 right-hand sides, see JMG_MG_MAX_RHS_CHUNK). This
 * costs a second copy of the shard on every GPU. */
static int potri_slabs(const jmg_dist_matrix *a, int *info, jmg_error *err) {
  jmg_mg_call call;
  int rc = jmg_mg_begin(&call, JMG_OP_POTRI, a, err);
  jmg_cuda_call *c = &call.cuda;
  const char *op = c->op;
  const int n = (int)a->n, r = (int)a->local_cols;
  const size_t es = jmg_dtype_size(a->dtype);
  const size_t shard_bytes = (size_t)a->n * (size_t)a->local_cols * es;
  void *x[JMG_MG_MAX_DEVICES] = {0};
  cudaLibMgMatrixDesc_t desc_a = NULL;
  char *ones = NULL;
  if (rc == 0)
    rc = jmg_cuda_call_buffer(c, JMG_HOST, (size_t)r * es, (void **)&ones, err);
  for (int i = 0; rc == 0 && i < r; ++i)
    jmg_dtype_set_one(a->dtype, ones + (size_t)i * es);
  for (int d = 0; rc == 0 && d < a->ndev; ++d)
    rc = jmg_cuda_call_buffer(c, d, shard_bytes, &x[d], err);
  int h_info = 0;
  if (rc == 0) rc = jmg_mg_factor_for_solve(&call, x, r, &desc_a, &h_info, err);
  const int factored = rc == 0; /* A holds the factor from here on */
  const cudaStream_t s0 = rc == 0 ? stream_of(a, 0) : NULL;
  for (int k = 1; rc == 0 && h_info == 0 && k <= a->ndev; ++k) {
    const int d = k % a->ndev; /* slabs 1, 2, ..., ndev - 1, then 0 */
    char *first_one = (char *)x[0] + (size_t)d * (size_t)r * es;
    rc = JMG_CUDA_TRY(cudaMemsetAsync(x[0], 0, shard_bytes, s0), op, err);
    if (rc == 0)
      rc = JMG_CUDA_TRY(
          cudaMemcpy2DAsync(first_one, ((size_t)n + 1) * es, ones, es, es,
                            (size_t)r, cudaMemcpyHostToDevice, s0),
          op, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s0), op, err);
    if (rc == 0)
      rc = jmg_mg_solve_chunked(&call, desc_a, x[0], r, x, &h_info, err);
    if (rc == 0 && d != 0)
      rc = c->mem->copy(&c->group, x[d], d, x[0], 0, shard_bytes, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaStreamSynchronize(s0), op, err);
  }
  for (int d = 0; rc == 0 && h_info == 0 && d < a->ndev; ++d)
    rc =
        JMG_CUDA_TRY(cudaMemcpyAsync(a->data[d], x[d], shard_bytes,
                                     cudaMemcpyDeviceToDevice, stream_of(a, d)),
                     op, err);
  if (rc == 0) rc = c->mem->sync(&c->group, err);
  jmg_trace_mark("potri slabs");
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

/* The solves give the lower triangle right; the contract wants both. The
 * fill is a call of its own on the device set, after the slabs' call. */
int jmg_mg_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                 jmg_error *err) {
  (void)e;
  /* A want of memory before the slabs write A is the contract's JMG_ENOMEM
   * (nothing written): the ops layer may free its scratch and call potri
   * again (exec/leader.c, jmg_leader_retry_without_scratch). */
  int rc = potri_slabs(a, info, err);
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
