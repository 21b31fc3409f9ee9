/* The cuSOLVERDn engine's call frame and its table with its limits (dn.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolverdn/dn.h"

/* The info words sit after the workspace, aligned as XLA aligns blocks. */
#define DN_ALIGN 256

static void name_op(jmg_error *err, const char *op) {
  if (err->op[0] == '\0') snprintf(err->op, sizeof err->op, "%s", op);
}

int jmg_dn_begin_call(jmg_dn_call *call, const char *op,
                      const jmg_dist_matrix *a, jmg_error *err) {
  memset(call, 0, sizeof *call);
  call->op = op;
  call->a = a;
  call->a_data = a->data[0];
  call->group.n = a->ndev;
  call->group.device_ctx = a->device_ctx;
  call->mem = jmg_cuda_mem();
  call->saved_device = -1;
  /* The table's supports refuses other groups; this guards the routines
   * (gesvd's and qr's matrices alone are rectangular, engine.h). */
  const int rectangular = jmg_op_is_rectangular(op);
  if (a->ndev != 1 || (a->local_cols != a->n && !rectangular))
    return jmg_error_set(err, JMG_EINTERNAL, op, "cuSOLVERDn",
                         "called on %d GPUs (%lld of %lld columns here); it "
                         "runs on one",
                         a->ndev, (long long)a->local_cols, (long long)a->n);
  const jmg_cuda_device *dev = a->device_ctx[0];
  call->stream = (cudaStream_t)dev->stream;
  int rc = JMG_CUDA_TRY(cudaGetDevice(&call->saved_device), op, err);
  if (rc == 0)
    rc =
        jmg_cuda_handles_acquire(a->device_ctx, 1, "cuSOLVERDn", &call->h, err);
  if (rc == 0) {
    call->dn = call->h->dn[0];
    call->params = call->h->dn_params;
    /* The handle was made on this GPU; cuSOLVER still wants it current. */
    if (call->saved_device != dev->device)
      rc = JMG_CUDA_TRY(cudaSetDevice(dev->device), op, err);
  }
  /* Inputs were written on XLA's stream, and the ops layer's copies go on
   * it too: on the same stream nothing needs to wait. */
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(call->dn, call->stream), op, err);
  if (rc != 0) name_op(err, op);
  jmg_trace_mark("engine start");
  return rc;
}

size_t jmg_dn_alloc_bytes(size_t device_bytes) {
  return (device_bytes + DN_ALIGN - 1) / DN_ALIGN * DN_ALIGN +
         JMG_DN_MAX_INFO * sizeof(int);
}

int jmg_dn_take_workspace(jmg_dn_call *call, size_t device_bytes,
                          size_t host_bytes, jmg_error *err) {
  const size_t at = (device_bytes + DN_ALIGN - 1) / DN_ALIGN * DN_ALIGN;
  const size_t bytes = jmg_dn_alloc_bytes(device_bytes);
  int rc = call->mem->alloc(&call->group, 0, bytes, &call->work, err);
  if (rc != 0) {
    call->work = NULL;
    name_op(err, call->op);
    /* Which problem asked: the op is named, the size and dtype too. */
    const size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len,
             " (cuSOLVERDn's workspace for %s of N=%lld %s)", call->op,
             (long long)call->a->n, jmg_dtype_name(call->a->dtype));
    return rc;
  }
  call->alloc_bytes = bytes;
  call->work_bytes = device_bytes;
  call->d_info = (int *)((char *)call->work + at);
  if (host_bytes > 0) {
    call->host_work = malloc(host_bytes);
    if (call->host_work == NULL)
      return jmg_error_set(err, JMG_ENOMEM, call->op, "malloc",
                           "cannot allocate %zu bytes of cuSOLVER's host "
                           "workspace",
                           host_bytes);
    call->host_bytes = host_bytes;
  }
  /* From here on the routines issue work. */
  call->pending = 1;
  return 0;
}

int jmg_dn_read_info(jmg_dn_call *call, int *h_info, int count,
                     const char *const *names, jmg_error *err) {
  int rc = JMG_CUDA_TRY(
      cudaMemcpyAsync(h_info, call->d_info, (size_t)count * sizeof(int),
                      cudaMemcpyDeviceToHost, call->stream),
      call->op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(call->stream), call->op, err);
  if (rc != 0) return rc;
  call->pending = 0;
  for (int i = 0; i < count; ++i)
    if (h_info[i] < 0)
      return jmg_error_set(err, JMG_ECUSOLVER, call->op, names[i],
                           "argument %d was rejected", -h_info[i]);
  return 0;
}

void jmg_dn_end_call(jmg_dn_call *call) {
  /* After a failure work may still run on the workspace. */
  if (call->pending) (void)cudaStreamSynchronize(call->stream);
  if (call->work != NULL)
    call->mem->release(&call->group, 0, call->work, call->alloc_bytes);
  free(call->host_work);
  if (call->h != NULL) jmg_cuda_handles_release(call->h);
  if (call->saved_device >= 0) {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != call->saved_device)
      (void)cudaSetDevice(call->saved_device);
  }
}

/* ---- the engine -----------------------------------------------------------*/

/* What cuSOLVERDn cannot do, known before the call. */
static int dn_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t why_len) {
  (void)e;
  if (p->nparts != 1) {
    snprintf(why, why_len,
             "%d GPUs: cuSOLVERDn runs on one (cusolvermg takes several)",
             p->nparts);
    return 0;
  }
  /* qr's orgqr / ungqr has no 64-bit form (qr.c): its m, n, k, lda and
   * lwork are ints (cusolverDn.h), and M * N is kept within one too, as
   * cusolverDn<t>potri failed once N * N passed it (README, Memory). */
  const int64_t rows = jmg_problem_rows(p);
  if (strcmp(p->op, "qr") == 0 && !jmg_dn_qr_fits(rows, p->n)) {
    snprintf(why, why_len,
             "qr of a %lld x %lld A: cusolverDn<t>orgqr takes 32-bit int "
             "sizes (M, N and M * N at most %d)",
             (long long)rows, (long long)p->n, INT_MAX);
    return 0;
  }
  /* gesvd of a tall A decomposes its transpose, made by cuBLAS geam, whose
   * sizes are ints (gesvd.c). */
  if (strcmp(p->op, "gesvd") == 0 && !jmg_dn_gesvd_fits(rows, p->n)) {
    snprintf(why, why_len,
             "gesvd of a %lld x %lld A: a tall A is transposed by cuBLAS "
             "geam, whose sizes are 32-bit ints (M at most %d)",
             (long long)rows, (long long)p->n, INT_MAX);
    return 0;
  }
  if (strcmp(p->op, "sygvd") == 0 && !jmg_dn_sygvd_fits(p->n)) {
    snprintf(why, why_len,
             "N=%lld: N*N exceeds INT_MAX, and cuSOLVERDn's sygvd is its "
             "32-bit API (it has no 64-bit sygvd)",
             (long long)p->n);
    return 0;
  }
  return 1;
}

const jmg_engine jmg_cusolverdn_engine = {
    .name = "cusolverdn",
    .model = JMG_MODEL_LEADER,
    .supports = dn_supports,
    .workspace = jmg_dn_workspace,
    .leader =
        {
            .potrs = jmg_dn_potrs,
            .potri = jmg_dn_potri,
            .syevd = jmg_dn_syevd,
            .lu_solve = jmg_dn_lu_solve,
            .gesvd = jmg_dn_gesvd,
            .qr = jmg_dn_qr,
            .sygvd = jmg_dn_sygvd,
        },
};
