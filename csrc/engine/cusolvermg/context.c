/* The cuSOLVERMg engine's per-device-set state (handle, grid, descriptor
 * cache), one call's frame, and the engine's table with its limits. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "engine/cusolvermg/mg.h"

#define MG_MAX_DESCRIPTORS 32

typedef struct mg_desc {
  struct mg_desc *next;
  int64_t rows, cols, col_block;
  cudaDataType type;
  cudaLibMgMatrixDesc_t desc;
} mg_desc;

/* A device set's cuSOLVERMg state, found by its handles (one per device set,
 * cuda/handles.h) and used only under the device set's lock. */
typedef struct mg_set {
  jmg_mg_context ctx; /* first: the call's ctx points here */
  struct mg_set *next;
  const jmg_cuda_handles *h;
  mg_desc *descs;
  int ndescs;
} mg_set;

static pthread_mutex_t g_sets_mu = PTHREAD_MUTEX_INITIALIZER;
static mg_set *g_sets;

static void destroy_set(mg_set *s) {
  if (s->ctx.grid) cusolverMgDestroyGrid(s->ctx.grid);
  if (s->ctx.handle) cusolverMgDestroy(s->ctx.handle);
  free(s);
}

static int create_set(jmg_cuda_handles *h, mg_set **out, jmg_error *err) {
  mg_set *s = calloc(1, sizeof *s);
  if (s == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate the cuSOLVERMg context");
  s->h = h;
  int rc = JMG_CUSOLVER_TRY(cusolverMgCreate(&s->ctx.handle), NULL, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverMgDeviceSelect(s->ctx.handle, h->ndev, h->devices), NULL, err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(
        cusolverMgCreateDeviceGrid(&s->ctx.grid, 1, h->ndev, h->devices,
                                   CUDALIBMG_GRID_MAPPING_COL_MAJOR),
        NULL, err);
  if (rc != 0) {
    destroy_set(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* The cuSOLVERMg state of the locked device set h, made on first use. */
static int context_of(jmg_cuda_handles *h, jmg_mg_context **out,
                      jmg_error *err) {
  pthread_mutex_lock(&g_sets_mu);
  mg_set *s = g_sets;
  while (s != NULL && s->h != h) s = s->next;
  pthread_mutex_unlock(&g_sets_mu);
  if (s == NULL) {
    /* Only this call can make it: the device set is locked. */
    int rc = create_set(h, &s, err);
    if (rc != 0) return rc;
    pthread_mutex_lock(&g_sets_mu);
    s->next = g_sets;
    g_sets = s;
    pthread_mutex_unlock(&g_sets_mu);
  }
  *out = &s->ctx;
  return 0;
}

int jmg_mg_descriptor(jmg_mg_call *call, int64_t rows, int64_t cols,
                      int64_t col_block, cudaDataType type,
                      cudaLibMgMatrixDesc_t *out, jmg_error *err) {
  mg_set *c = (mg_set *)call->ctx;
  for (mg_desc *d = c->descs; d != NULL; d = d->next)
    if (d->rows == rows && d->cols == cols && d->col_block == col_block &&
        d->type == type) {
      *out = d->desc;
      return 0;
    }
  if (c->ndescs >= MG_MAX_DESCRIPTORS) {
    /* Drop the oldest (the list's tail): a program rarely uses many shapes. */
    mg_desc **p = &c->descs;
    while ((*p)->next != NULL) p = &(*p)->next;
    cusolverMgDestroyMatrixDesc((*p)->desc);
    free(*p);
    *p = NULL;
    c->ndescs--;
  }
  mg_desc *d = calloc(1, sizeof *d);
  if (d == NULL)
    return jmg_error_set(err, JMG_ENOMEM, NULL, "malloc",
                         "cannot allocate a matrix descriptor");
  int rc =
      JMG_CUSOLVER_TRY(cusolverMgCreateMatrixDesc(&d->desc, rows, cols, rows,
                                                  col_block, type, c->ctx.grid),
                       NULL, err);
  if (rc != 0) {
    free(d);
    return rc;
  }
  d->rows = rows;
  d->cols = cols;
  d->col_block = col_block;
  d->type = type;
  d->next = c->descs;
  c->descs = d;
  c->ndescs++;
  *out = d->desc;
  return 0;
}

/* ---- one call's frame -----------------------------------------------------*/

int jmg_mg_begin(jmg_mg_call *call, jmg_op op, const jmg_dist_matrix *a,
                 jmg_error *err) {
  memset(call, 0, sizeof *call);
  call->a = a;
  if (a->n > INT_MAX)
    return jmg_error_set(err, JMG_EINVAL, jmg_op_name(op), "cuSOLVERMg",
                         "N=%lld exceeds cuSOLVERMg's 32-bit int",
                         (long long)a->n);
  jmg_cuda_call *c = &call->cuda;
  int rc = jmg_cuda_call_begin(c, jmg_op_name(op), "cuSOLVERMg", a->ndev,
                               a->device_ctx, JMG_CUDA_CALL_HANDLES, err);
  if (rc == 0) rc = context_of(c->h, &call->ctx, err);
  if (rc != 0) return rc;
  for (int d = 0; d < a->ndev; ++d) call->a_ptrs[d] = a->data[d];
  /* Inputs were written on XLA's streams, which each participant synchronized
   * before it joined; the ops layer's copies are on the leader's stream. */
  rc = c->mem->sync(&c->group, err);
  if (rc == 0) rc = jmg_cuda_call_device(c, err);
  jmg_trace_mark("engine start");
  return rc;
}

int jmg_mg_take_workspace(jmg_mg_call *call, int64_t lwork, jmg_error *err) {
  size_t esize = jmg_dtype_size(call->a->dtype);
  call->work_bytes = (size_t)(lwork > 0 ? lwork : 1) * esize;
  int rc = 0;
  for (int d = 0; rc == 0 && d < call->a->ndev; ++d)
    rc = jmg_cuda_call_buffer(&call->cuda, d, call->work_bytes, &call->work[d],
                              err);
  jmg_trace_mark("workspace");
  return rc;
}

int jmg_mg_end(jmg_mg_call *call, int rc, jmg_error *err) {
  return jmg_cuda_call_end(&call->cuda, rc, err);
}

int jmg_mg_sync_devices(const jmg_dist_matrix *m, const char *op,
                        jmg_error *err) {
  for (int d = m->ndev - 1; d >= 0; --d) {
    const jmg_cuda_device *dev = m->device_ctx[d];
    int rc = JMG_CUDA_TRY(cudaSetDevice(dev->device), op, err);
    if (rc == 0) rc = JMG_CUDA_TRY(cudaDeviceSynchronize(), op, err);
    if (rc != 0) return rc;
  }
  return 0;
}

/* ---- the engine -----------------------------------------------------------*/

/* What cuSOLVERMg cannot do, known before the call. */
static int mg_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t why_len) {
  (void)e;
  if (p->nparts > JMG_MG_MAX_DEVICES) {
    snprintf(why, why_len, "%d GPUs: cuSOLVERMg drives at most %d", p->nparts,
             JMG_MG_MAX_DEVICES);
    return 0;
  }
  if (p->n > INT_MAX) {
    snprintf(why, why_len, "N=%lld exceeds cuSOLVERMg's 32-bit int",
             (long long)p->n);
    return 0;
  }
  /* cusolverMgSyevd returns CUSOLVER_STATUS_INVALID_VALUE whenever T_A >
   * 1024, and is right below (docs/gpu-notes.md, "cuSOLVERMg's syevd and
   * T_A"). */
  if (p->op == JMG_OP_SYEVD && p->tile > 1024) {
    snprintf(why, why_len,
             "T_A=%lld > 1024: cusolverMgSyevd rejects wider tiles (choose "
             "T_A <= 1024)",
             (long long)p->tile);
    return 0;
  }
  return 1;
}

const jmg_engine jmg_cusolvermg_engine = {
    .name = "cusolvermg",
    .model = JMG_MODEL_LEADER,
    .supports = mg_supports,
    .leader =
        {
            .potrs = jmg_mg_potrs,
            .potri = jmg_mg_potri,
            .syevd = jmg_mg_syevd,
            .lu_solve = jmg_mg_lu_solve,
        },
};
