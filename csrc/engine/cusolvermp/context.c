/* The cuSOLVERMp engine (JMG_MODEL_LOCAL): its table, what it supports,
 * and what its routines share (mp.h).
 *
 * State per process and GPU: cuSOLVERMp supports only one handle per
 * process and GPU ("Only one handle per process and per GPU supported",
 * cusolverMpCreate, docs.nvidia.com/cuda/cusolvermp/usage/functions.html),
 * so each GPU's handle is made once, on first use, with the participant's
 * stream, and every call sets its own stream (cusolverMpSetStream). The
 * grids of a GPU (one per communicator and grid shape) are cached beside
 * the handle, by the communicator's address: a communicator that a
 * guarded call aborted (cuda/comm_nccl.c, its watchdog) is never handed out
 * again nor freed, so its grids are never matched again (they are leaked:
 * destroying them would touch the aborted communicator). The handle stays:
 * whether cuSOLVERMp's handle is sound after its communicator was revoked
 * inside a routine is not documented, and not yet run on GPUs. A GPU's
 * state is locked for the whole call: XLA runs one
 * device's calls in program order, so the lock only serializes what XLA
 * would not run at once anyway, and keeps the stream of the shared handle
 * the call's own. Handles and grids live until the process exits and are
 * not destroyed then (like the communicators, cuda/comm_nccl.c: CUDA may be
 * gone by then; their device memory goes with the context).
 *
 * Buffers: device memory from XLA's allocator (the participant's
 * jmg_cuda_device), the library's host workspace from malloc, released at
 * the end of each call after the stream is synchronized. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "cuda/check.h"
#include "cuda/dtype.h"
#include "cuda/handles.h"
#include "engine/cusolvermp/mp.h"
#include "layout/local.h"

#define MP_MAX_GPUS 64
/* The fewest rows of A a rank may hold in a call of cuSOLVERMp's
 * eigensolver on several ranks (mp_supports says why). */
#define MP_EIG_MIN_ROWS 8

typedef struct mp_grid_entry {
  jmg_comm *comm;
  int rows, cols;
  jmg_mp_grid_t grid;
  struct mp_grid_entry *next;
} mp_grid_entry;

typedef struct mp_gpu {
  pthread_mutex_t mu;
  jmg_mp_handle_t handle;
  mp_grid_entry *grids;
} mp_gpu;

static mp_gpu g_gpu[MP_MAX_GPUS];
static pthread_once_t g_gpu_once = PTHREAD_ONCE_INIT;

static void gpu_init(void) {
  for (int i = 0; i < MP_MAX_GPUS; ++i)
    pthread_mutex_init(&g_gpu[i].mu, NULL);
}

int64_t jmg_mp_numroc(int64_t n, int64_t nb, int iproc, int nprocs) {
  int64_t nblocks = n / nb;
  int64_t num = (nblocks / nprocs) * nb;
  int64_t extra = nblocks % nprocs;
  if (iproc < extra)
    num += nb;
  else if (iproc == extra)
    num += n % nb;
  return num;
}

int jmg_mp_check(cusolverStatus_t st, const jmg_mp_call *c, const char *call,
                 jmg_error *err) {
  if (st == CUSOLVER_STATUS_SUCCESS) return 0;
  return jmg_error_set(err, JMG_ECUSOLVER, c->cuda.op, call,
                       "%s (cuSOLVERMp %s, rank %d of %d)",
                       jmg_cusolver_status_name(st), jmg_cusolvermp_series(),
                       c->a->rank, c->a->ranks);
}

/* *v = the maximum of every rank's *v (comm/comm.h's max_int), taken on
 * every rank whatever its rc, so that no rank waits. Returns rc where this
 * rank had failed; else the communicator's failure (its error in err), or 0. */
static int mp_max(jmg_cuda_call *frame, int rc, int *v, jmg_error *err) {
  const jmg_mp_call *c = (const jmg_mp_call *)frame; /* its first member */
  /* One rank: its own value is the maximum, and no collective is needed
   * (a device round trip and a wait each, six or more a call). */
  if (c->a->ranks == 1) return rc;
  jmg_error mine;
  jmg_error_clear(&mine);
  int crc = c->a->comm_ops->max_int(c->a->comm, v, c->a->device_ctx, c->cuda.op,
                                    &mine);
  if (rc != 0) return rc;
  if (crc != 0) jmg_error_copy(err, &mine);
  return crc;
}

int jmg_mp_agree_factor(jmg_mp_call *c, int rc, cusolverStatus_t st,
                        const char *call, int *info, jmg_error *err) {
  /* This rank's info, whatever the status: cuSOLVERMp 0.8's potrf returns
   * CUSOLVER_STATUS_INTERNAL_ERROR for a matrix that is not positive
   * definite, with info > 0 set
   * (tests/gpu/test_gpu_cusolvermp.py::test_failures_are_status_and_nan,
   * docs/gpu-runs/2026-11-24-s8-h200-cusolvermp); on several ranks, whether
   * every rank gets the info, or the failed status, is not documented. */
  int h = 0;
  if (rc == 0) rc = jmg_cuda_call_read_info(&c->cuda, &h, 1, err);
  const int soft = rc == 0 && st != CUSOLVER_STATUS_SUCCESS;
  /* Two agreements, on every rank whatever happened (no rank waits): the
   * largest info > 0, and the worst failure (2: an error that is not the
   * library's status, or info < 0: a bad argument; 1: a failed status). */
  int v_info = rc == 0 && h > 0 ? h : 0;
  int v_fail = rc != 0 || h < 0 ? 2 : soft ? 1 : 0;
  jmg_error ignored;
  int rc_info = mp_max(&c->cuda, rc, &v_info, err);
  int rc_fail = mp_max(&c->cuda, rc, &v_fail, rc_info == 0 ? err : &ignored);
  if (rc_info != 0) return rc_info;
  if (rc_fail != 0) return rc_fail;
  if (v_fail == 2)
    return jmg_error_set(err, JMG_ECUSOLVER, c->cuda.op, call,
                         "failed on another rank, or info < 0 (an invalid "
                         "argument) there; this rank's info %d",
                         h);
  /* Info > 0 on any rank: the numerical failure every engine reports as
   * data, not an error, on every rank (a failed status beside it is its
   * consequence). */
  if (v_info > 0) {
    *info = v_info;
    return 0;
  }
  if (v_fail == 1) {
    if (!soft)
      return jmg_error_set(err, JMG_ECUSOLVER, c->cuda.op, call,
                           "failed on another rank (info 0 on every rank)");
    rc = jmg_mp_check(st, c, call, err);
    size_t used = strlen(err->msg);
    if (used < sizeof err->msg)
      snprintf(err->msg + used, sizeof err->msg - used, "; info %d", h);
    return rc;
  }
  *info = 0;
  return 0;
}

/* a's part of an m x a->n matrix (m = a->n for the square ops). */
static int check_layout(const jmg_mp_call *c, int64_t m, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  if (a->ranks < 1 || a->rank < 0 || a->rank >= a->ranks ||
      a->grid_rows < 1 || a->grid_cols < 1 ||
      a->grid_rows * a->grid_cols != a->ranks)
    return jmg_error_set(err, JMG_EINVAL, c->cuda.op, "cuSOLVERMp",
                         "rank %d of %d on a %d x %d grid", a->rank, a->ranks,
                         a->grid_rows, a->grid_cols);
  if (a->comm_ops == NULL || a->comm == NULL || a->device_ctx == NULL)
    return jmg_error_set(err, JMG_EINVAL, c->cuda.op, "cuSOLVERMp",
                         "no communicator or device for rank %d", a->rank);
  if (a->n < 1 || a->mb < 1 || a->mb != a->nb)
    return jmg_error_set(err, JMG_EUNSUPPORTED, c->cuda.op, "cuSOLVERMp",
                         "N=%lld with %lld x %lld blocks: jaxmg's cuSOLVERMp "
                         "routines take square blocks (MB = NB)",
                         (long long)a->n, (long long)a->mb, (long long)a->nb);
  int64_t rows = jmg_mp_numroc(m, a->mb, c->myrow, a->grid_rows);
  int64_t cols = jmg_mp_numroc(a->n, a->nb, c->mycol, a->grid_cols);
  if (a->rows != rows || a->cols != cols || a->ld < (rows > 1 ? rows : 1))
    return jmg_error_set(err, JMG_EINVAL, c->cuda.op, "cuSOLVERMp",
                         "rank %d holds %lld x %lld (ld %lld); its part of "
                         "%lld x %lld in %lld-blocks on a %d x %d grid is "
                         "%lld x %lld",
                         a->rank, (long long)a->rows, (long long)a->cols,
                         (long long)a->ld, (long long)m, (long long)a->n,
                         (long long)a->mb, a->grid_rows, a->grid_cols,
                         (long long)rows, (long long)cols);
  return 0;
}

static int begin(jmg_mp_call *c, jmg_op op, const jmg_local_matrix *a,
                 int64_t m, jmg_error *err);

int jmg_mp_begin(jmg_mp_call *c, jmg_op op, const jmg_local_matrix *a,
                 jmg_error *err) {
  return begin(c, op, a, a->n, err);
}

int jmg_mp_begin_mn(jmg_mp_call *c, jmg_op op, const jmg_local_matrix *a,
                    int64_t m, jmg_error *err) {
  return begin(c, op, a, m, err);
}

/* This GPU's handle, made on first use with the call's stream (the per-GPU
 * state is locked), and put on the call's stream. */
static int handle_of(jmg_mp_call *c, mp_gpu *g, int device, jmg_error *err) {
  if (g->handle == NULL) {
    jmg_mp_handle_t h = NULL;
    int rc = jmg_mp_check(c->api->create(&h, device, c->cuda.stream), c,
                          "cusolverMpCreate", err);
    if (rc != 0) return rc;
    g->handle = h;
    int version = 0;
    if (c->api->get_version(h, &version) == CUSOLVER_STATUS_SUCCESS)
      jmg_cusolvermp_note_version(version);
  }
  c->handle = g->handle;
  return jmg_mp_check(c->api->set_stream(c->handle, c->cuda.stream), c,
                      "cusolverMpSetStream", err);
}

static int begin(jmg_mp_call *c, jmg_op op, const jmg_local_matrix *a,
                 int64_t m, jmg_error *err) {
  memset(c, 0, sizeof *c);
  c->cuda.op = jmg_op_name(op); /* names the errors before the frame begins */
  c->a = a;
  c->slot = -1;
  c->type = jmg_cuda_data_type(a->dtype);
  c->elem = jmg_dtype_size(a->dtype);
  if (a->grid_rows > 0) {
    c->myrow = a->rank % a->grid_rows;
    c->mycol = a->rank / a->grid_rows;
  }
  const char *name = c->cuda.op;
  int rc = check_layout(c, m, err);
  if (rc != 0) return rc;
  const jmg_cuda_device *dev = a->device_ctx;
  if (dev->stream == NULL) /* "stream cannot be the default stream" */
    return jmg_error_set(err, JMG_EUNSUPPORTED, name, "cusolverMpCreate",
                         "the participant's stream is the default stream, "
                         "which cuSOLVERMp does not take");
  char why[JMG_ERROR_MSG_LEN];
  c->api = jmg_mp_load(why, sizeof why);
  if (c->api == NULL)
    return jmg_error_set(err, JMG_EUNSUPPORTED, name, "cuSOLVERMp", "%s", why);
  if (dev->device < 0 || dev->device >= MP_MAX_GPUS)
    return jmg_error_set(err, JMG_EUNSUPPORTED, name, "cuSOLVERMp",
                         "GPU %d: jaxmg's cuSOLVERMp engine keeps state for "
                         "GPUs 0 .. %d",
                         dev->device, MP_MAX_GPUS - 1);
  rc = jmg_cuda_call_begin(&c->cuda, name, "cuSOLVERMp", 1,
                           (void *const *)&a->device_ctx, 0, err);
  c->cuda.agree = mp_max;
  if (rc != 0) return rc;
  pthread_once(&g_gpu_once, gpu_init);
  pthread_mutex_lock(&g_gpu[dev->device].mu);
  c->slot = dev->device;
  return handle_of(c, &g_gpu[dev->device], dev->device, err);
}

int jmg_mp_end(jmg_mp_call *c, int rc, jmg_error *err) {
  /* Nothing may still use the buffers or the descriptors. */
  if (c->slot >= 0) {
    jmg_error ignored;
    const int s = jmg_cuda_call_sync(&c->cuda, rc == 0 ? err : &ignored);
    if (rc == 0) rc = s;
  }
  for (int i = 0; i < c->ndescs; ++i) c->api->destroy_desc(c->descs[i]);
  c->ndescs = 0;
  rc = jmg_cuda_call_end(&c->cuda, rc, err);
  if (c->slot >= 0) pthread_mutex_unlock(&g_gpu[c->slot].mu);
  c->slot = -1;
  return rc;
}

int jmg_mp_agree(jmg_mp_call *c, int rc, jmg_error *err) {
  if (c->a->comm_ops == NULL || c->a->comm == NULL) /* nobody to agree with */
    return rc != 0 ? rc
                   : jmg_error_set(err, JMG_EINVAL, c->cuda.op, "cuSOLVERMp",
                                   "no communicator");
  int v = rc != 0 ? -rc : 0;
  rc = mp_max(&c->cuda, rc, &v, err);
  if (rc != 0) return rc;
  if (v != 0)
    return jmg_error_set(err, JMG_EPEER, c->cuda.op, "cuSOLVERMp",
                         "another rank of the call failed (%s) before "
                         "cuSOLVERMp was called",
                         jmg_status_name(v));
  return 0;
}

int jmg_mp_handles(jmg_mp_call *c, jmg_error *err) {
  jmg_cuda_call *f = &c->cuda;
  if (f->h != NULL) return 0;
  int rc = jmg_cuda_handles_acquire(f->group.device_ctx, 1, "cuSOLVERMp", &f->h,
                                    err);
  if (rc == 0)
    rc = JMG_CUSOLVER_TRY(cusolverDnSetStream(f->h->dn[0], f->stream), f->op,
                          err);
  return rc;
}

int jmg_mp_take(jmg_mp_call *c, size_t bytes, void **out, jmg_error *err) {
  return jmg_cuda_call_buffer(&c->cuda, 0, bytes, out, err);
}

int jmg_mp_take_work(jmg_mp_call *c, int rc, size_t d1, size_t h1, size_t d2,
                     size_t h2, jmg_error *err) {
  c->d_bytes = d1 > d2 ? d1 : d2;
  c->h_bytes = h1 > h2 ? h1 : h2;
  /* The host workspace is never NULL, as the library had it before. */
  jmg_cuda_work w = {.host_bytes = c->h_bytes > 0 ? c->h_bytes : 1};
  const size_t at = jmg_cuda_work_part(&w, c->d_bytes);
  if (rc == 0) rc = jmg_cuda_call_take(&c->cuda, &w, err);
  c->d_work = jmg_cuda_call_part(&c->cuda, at);
  rc = jmg_mp_agree(c, rc, err);
  jmg_trace_mark("engine start");
  return rc;
}

int jmg_mp_grid(jmg_mp_call *c, jmg_error *err) {
  mp_gpu *g = &g_gpu[c->slot];
  const jmg_local_matrix *a = c->a;
  for (mp_grid_entry *e = g->grids; e != NULL; e = e->next)
    if (e->comm == a->comm && e->rows == a->grid_rows &&
        e->cols == a->grid_cols) {
      c->grid = e->grid;
      return 0;
    }
  mp_grid_entry *e = calloc(1, sizeof *e);
  if (e == NULL)
    return jmg_error_set(err, JMG_ENOMEM, c->cuda.op, "malloc",
                         "cannot allocate a grid entry");
  ncclComm_t nc = (ncclComm_t)a->comm_ops->native(a->comm);
  int rc =
      jmg_mp_check(c->api->create_grid(c->handle, &e->grid, nc, a->grid_rows,
                                       a->grid_cols, JMG_MP_GRID_COL_MAJOR),
                   c, "cusolverMpCreateDeviceGrid", err);
  if (rc != 0) {
    free(e);
    return rc;
  }
  e->comm = a->comm;
  e->rows = a->grid_rows;
  e->cols = a->grid_cols;
  e->next = g->grids;
  g->grids = e;
  c->grid = e->grid;
  return 0;
}

int jmg_mp_desc(jmg_mp_call *c, int64_t m, int64_t n, int64_t mb, int64_t nb,
                int64_t lld, jmg_mp_desc_t *out, jmg_error *err) {
  *out = NULL;
  if (c->ndescs == (int)(sizeof c->descs / sizeof c->descs[0]))
    return jmg_error_set(err, JMG_EINTERNAL, c->cuda.op, "cuSOLVERMp",
                         "too many descriptors in one call");
  if (lld < 1) lld = 1;
  int rc = jmg_mp_check(
      c->api->create_desc(out, c->grid, c->type, m, n, mb, nb, 0, 0, lld), c,
      "cusolverMpCreateMatrixDesc", err);
  if (rc == 0) c->descs[c->ndescs++] = *out;
  return rc;
}

int jmg_mp_desc_a(jmg_mp_call *c, jmg_mp_desc_t *out, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  return jmg_mp_desc(c, a->n, a->n, a->mb, a->nb, a->ld, out, err);
}

int jmg_mp_zero_info(jmg_mp_call *c, jmg_error *err) {
  return JMG_CUDA_TRY(
      cudaMemsetAsync(c->cuda.d_info, 0, sizeof(int), c->cuda.stream),
      c->cuda.op, err);
}

int jmg_mp_agree_info(jmg_mp_call *c, int rc, const char *call, int *info,
                      jmg_error *err) {
  return jmg_cuda_call_info(&c->cuda, rc, info, 1, &call, err);
}

/* ---- the right-hand sides ---------------------------------------------- */

int jmg_mp_rhs_take(jmg_mp_call *c, void *b, int64_t nrhs, jmg_mp_rhs *r,
                    jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  memset(r, 0, sizeof *r);
  r->nrhs = nrhs;
  r->width = nrhs < a->mb ? nrhs : a->mb;
  if (r->width < 1) r->width = 1;
  r->local_rows = jmg_mp_numroc(a->n, a->mb, c->myrow, a->grid_rows);
  r->lld = r->local_rows;
  if (a->grid_rows == 1) { /* rank 0 holds every row: b itself, ld n */
    if (c->mycol == 0) r->local = b;
    return 0;
  }
  int rc = 0;
  if (c->mycol == 0)
    rc = jmg_mp_take(c, (size_t)(r->local_rows * nrhs) * c->elem, &r->local,
                     err);
  /* Every rank receives each owner's part in turn (row 0's is the
   * largest). */
  int64_t most = jmg_mp_numroc(a->n, a->mb, 0, a->grid_rows);
  if (rc == 0)
    rc = jmg_mp_take(c, (size_t)(most * nrhs) * c->elem, &r->recv, err);
  return rc;
}

int jmg_mp_rhs_desc(jmg_mp_call *c, jmg_mp_rhs *r, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = jmg_mp_desc(c, a->n, r->width, a->mb, a->mb, r->lld, &r->desc, err);
  r->last = r->desc;
  const int64_t rest = r->nrhs % r->width;
  if (rc == 0 && rest != 0)
    rc = jmg_mp_desc(c, a->n, rest, a->mb, a->mb, r->lld, &r->last, err);
  return rc;
}

void *jmg_mp_rhs_col(const jmg_mp_call *c, const jmg_mp_rhs *r, void *b,
                     int64_t j) {
  if (r->local == NULL) return b; /* no row of it here */
  return (char *)r->local + (size_t)(j * r->lld) * c->elem;
}

/* Copies the row blocks of grid row `row` between B (n x nrhs, ld n) and
 * that row's packed part (ld lld): to_part 1 packs, 0 unpacks. */
static int move_rows(jmg_mp_call *c, void *b, void *part, int64_t lld, int row,
                     int64_t nrhs, int to_part, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int64_t R = a->grid_rows, mb = a->mb, n = a->n;
  const size_t e = c->elem;
  for (int64_t k = row; k * mb < n; k += R) {
    int64_t g0 = k * mb, len = n - g0 < mb ? n - g0 : mb;
    char *pb = (char *)b + (size_t)g0 * e;
    char *pp = (char *)part + (size_t)((k / R) * mb) * e;
    int rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(
            to_part ? (void *)pp : (void *)pb, (size_t)(to_part ? lld : n) * e,
            to_part ? (const void *)pb : (const void *)pp,
            (size_t)(to_part ? n : lld) * e, (size_t)len * e, (size_t)nrhs,
            cudaMemcpyDeviceToDevice, c->cuda.stream),
        c->cuda.op, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int jmg_mp_rhs_scatter(jmg_mp_call *c, const void *b, jmg_mp_rhs *r,
                       jmg_error *err) {
  if (r->local == NULL || r->local == b || r->nrhs == 0) return 0;
  return move_rows(c, (void *)b, r->local, r->lld, c->myrow, r->nrhs, 1, err);
}

int jmg_mp_rhs_gather(jmg_mp_call *c, void *b, jmg_mp_rhs *r, jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const size_t e = c->elem;
  if (r->nrhs == 0 || a->ranks == 1) return 0; /* b is the only part */
  if (a->grid_rows == 1) /* rank 0 holds all of X, in b itself */
    return a->comm_ops->bcast(a->comm, b, (size_t)(a->n * r->nrhs) * e, 0,
                              a->device_ctx, c->cuda.op, err);
  for (int row = 0; row < a->grid_rows; ++row) {
    /* Grid row `row` of column 0 is rank `row` (column-major mapping). */
    int64_t rows = jmg_mp_numroc(a->n, a->mb, row, a->grid_rows);
    void *buf = a->rank == row ? r->local : r->recv;
    int rc = a->comm_ops->bcast(a->comm, buf, (size_t)(rows * r->nrhs) * e, row,
                                a->device_ctx, c->cuda.op, err);
    if (rc == 0) rc = move_rows(c, b, buf, rows, row, r->nrhs, 0, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int jmg_mp_rhs_solve(jmg_mp_call *c, void *b, jmg_mp_rhs *r, const char *call,
                     jmg_mp_rhs_solve_fn solve, void *ctx, jmg_error *err) {
  int rc = jmg_mp_rhs_scatter(c, b, r, err);
  for (int64_t j = 0; rc == 0 && j < r->nrhs; j += r->width) {
    const int64_t cols = r->nrhs - j < r->width ? r->nrhs - j : r->width;
    int s = 0;
    rc = jmg_mp_zero_info(c, err);
    if (rc == 0)
      rc = jmg_mp_check(
          solve(c, jmg_mp_rhs_col(c, r, b, j), cols,
                cols == r->width ? r->desc : r->last, c->cuda.d_info, ctx),
          c, call, err);
    rc = jmg_mp_agree_info(c, rc, call, &s, err);
    if (rc == 0 && s != 0)
      rc = jmg_error_set(err, JMG_ECUSOLVER, c->cuda.op, call,
                         "info %d after a successful factorization", s);
  }
  if (rc == 0) rc = jmg_mp_rhs_gather(c, b, r, err);
  if (rc == 0) rc = jmg_cuda_call_sync(&c->cuda, err);
  return rc;
}

/* ---- the diagonal ------------------------------------------------------ */

#define DIAG_GROUP 64 /* broadcasts per NCCL group */

int jmg_mp_diag_take(jmg_mp_call *c, void **d_diag, void **h_diag,
                     jmg_error *err) {
  const size_t bytes = (size_t)c->a->n * c->elem;
  *h_diag = NULL;
  int rc = jmg_mp_take(c, bytes, d_diag, err);
  if (rc == 0)
    rc = jmg_cuda_call_buffer(&c->cuda, JMG_HOST, bytes, h_diag, err);
  return rc;
}

int jmg_mp_diag(jmg_mp_call *c, const void *m, void *d_diag, void *h_diag,
                jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  const int64_t R = a->grid_rows, C = a->grid_cols, mb = a->mb, n = a->n;
  const size_t e = c->elem;
  const int64_t tiles = (n + mb - 1) / mb;
  char *d = d_diag;
  int rc = 0;
  for (int64_t k = 0; rc == 0 && k < tiles; ++k) {
    int owner = (int)((k % R) + (k % C) * R);
    if (owner != a->rank) continue;
    int64_t len = n - k * mb < mb ? n - k * mb : mb;
    const char *src = (const char *)m + ((size_t)((k / C) * mb) * (size_t)a->ld +
                                         (size_t)((k / R) * mb)) *
                                            e;
    rc = JMG_CUDA_TRY(
        cudaMemcpy2DAsync(d + (size_t)(k * mb) * e, e, src,
                          (size_t)(a->ld + 1) * e, e, (size_t)len,
                          cudaMemcpyDeviceToDevice, c->cuda.stream),
        c->cuda.op, err);
  }
  for (int64_t k0 = 0; rc == 0 && a->ranks > 1 && k0 < tiles;
       k0 += DIAG_GROUP) {
    rc = a->comm_ops->group_begin(c->cuda.op, err);
    for (int64_t k = k0; rc == 0 && k < tiles && k < k0 + DIAG_GROUP; ++k) {
      int owner = (int)((k % R) + (k % C) * R);
      int64_t len = n - k * mb < mb ? n - k * mb : mb;
      rc =
          a->comm_ops->bcast(a->comm, d + (size_t)(k * mb) * e, (size_t)len * e,
                             owner, a->device_ctx, c->cuda.op, err);
    }
    jmg_error ignored;
    int end = a->comm_ops->group_end(c->cuda.op, rc == 0 ? err : &ignored);
    if (rc == 0) rc = end;
  }
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaMemcpyAsync(h_diag, d, (size_t)n * e,
                                      cudaMemcpyDeviceToHost, c->cuda.stream),
                      c->cuda.op, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(c->cuda.stream), c->cuda.op, err);
  return rc;
}

int jmg_mp_copy_part(jmg_mp_call *c, void *dst, const void *src,
                     jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  if (a->rows == 0 || a->cols == 0) return 0;
  size_t pitch = (size_t)a->ld * c->elem;
  return JMG_CUDA_TRY(
      cudaMemcpy2DAsync(dst, pitch, src, pitch, (size_t)a->rows * c->elem,
                        (size_t)a->cols, cudaMemcpyDeviceToDevice,
                        c->cuda.stream),
      c->cuda.op, err);
}

int jmg_mp_eig_outputs(jmg_mp_call *c, void *w, const void *vectors,
                       jmg_error *err) {
  const jmg_local_matrix *a = c->a;
  int rc = a->comm_ops->bcast(a->comm, w,
                              (size_t)a->n * jmg_dtype_real_size(a->dtype), 0,
                              a->device_ctx, c->cuda.op, err);
  if (rc == 0 && vectors != NULL)
    rc = jmg_mp_copy_part(c, a->data, vectors, err);
  if (rc == 0)
    rc = JMG_CUDA_TRY(cudaStreamSynchronize(c->cuda.stream), c->cuda.op, err);
  return rc;
}

/* ---- the engine ------------------------------------------------------- */

/* The limits of the library that would otherwise fail inside it, from
 * its documentation (docs.nvidia.com/cuda/cusolvermp/usage/functions.html,
 * "functions.html" below; 0.7's, whose calls 0.8 keeps) and samples
 * (NVIDIA/CUDALibrarySamples, cuSOLVERMp/):
 * - every routine takes float32, float64, complex64 and complex128 with
 *   computeType the matrix's own type: all of jaxmg's dtypes;
 * - RSRC = CSRC = 0 only, the column-major grid mapping only
 *   (functions.html, cusolverMpCreateMatrixDesc, CreateDeviceGrid): the
 *   local layout's first block is on rank 0, its mapping column-major;
 * - potrf, potrs, syevd, sygvd, gels: square blocks, MB_A = NB_A, and B
 *   (or Z)
 *   aligned with A, MB_B = MB_A, IB = IA (functions.html): the local
 *   layout has MB = NB = T_A, and every B here has A's MB; IA = JA = 1;
 * - potrs, getrs: 0.7's documentation said one right-hand side per call
 *   ("Currently, this routine only supports NRHS=1"); 0.8.0's library
 *   checks only NRHS >= 0 (mp.h, jmg_mp_rhs): right-hand sides go in chunks of
 *   T_A columns, potri's n of them in one call;
 * - getrs: "Only CUBLAS_OP_N is currently supported": lu_solve's
 *   transposed solve factors Aᵀ (transpose.c);
 * - cusolverMpCreate: the stream cannot be the default stream (checked per
 *   call, jmg_mp_begin: XLA's streams are not);
 * - syevd (through stedc): "the current implementation of the
 *   cusolverMpStedc may fail when the blocksize is not a power of two"
 *   (functions.html, cusolverMpSyevd): the engine picks its own blocks
 *   there (mp_block, below).
 * What remains to refuse per problem is the library itself (not installed:
 * the message names the extra). */
static int mp_own_supports(const jmg_engine *e, const jmg_problem *p,
                           char *why, size_t why_len) {
  (void)e;
  char reason[JMG_ERROR_MSG_LEN];
  if (jmg_mp_load(reason, sizeof reason) == NULL) {
    snprintf(why, why_len, "%s", reason);
    return 0;
  }
  if (p->tile < 1 || p->n < 1 || p->nparts < 1) {
    snprintf(why, why_len,
             "N=%lld, T_A=%lld on %d GPUs: cuSOLVERMp needs N >= 1, T_A >= 1",
             (long long)p->n, (long long)p->tile, p->nparts);
    return 0;
  }
  /* One rank holding a square A runs cuSOLVERDn's routines (one_gpu.c),
   * with their limits. */
  if (jmg_mp_one_gpu_problem(p))
    return jmg_cusolverdn_engine.supports(&jmg_cusolverdn_engine, p, why,
                                          why_len);
  /* cuSOLVERMp 0.8's eigensolver on several ranks (syevd; sygvd runs it
   * after its reduction) fails inside the library for the smallest
   * problems: on 2 GPUs every N <= 8 (4 rows a rank), whatever the blocks,
   * gave wrong eigenpairs with status 0 or CUSOLVER_STATUS_INTERNAL_ERROR,
   * after which every CUDA call of the process failed; every N from 16 to
   * 512 with every block was right (scripts/sweep-cusolvermp.py,
   * docs/gpu-runs/2026-11-27-s15-h200x2/). The bound is set per rank, so
   * that more ranks are held to as many rows each; 4 ranks are unswept. */
  if (jmg_op_is_eigensolver(p->op) &&
      p->n < MP_EIG_MIN_ROWS * (int64_t)p->nparts) {
    snprintf(why, why_len,
             "its eigensolver fails inside cuSOLVERMp below %d rows a GPU "
             "(N=%lld on %d GPUs: wrong eigenpairs, or an internal error "
             "that leaves the GPUs unusable); use N >= %lld, fewer GPUs or "
             "another engine",
             MP_EIG_MIN_ROWS, (long long)p->n, p->nparts,
             (long long)MP_EIG_MIN_ROWS * p->nparts);
    return 0;
  }
  /* qr moves each rank's rows of A between Aᵀ and A with cuBLAS geam,
   * whose sizes are ints (qr.c). */
  const int64_t part = jmg_problem_rows(p) / p->nparts;
  if (p->op == JMG_OP_QR && (part > INT_MAX || p->n > INT_MAX)) {
    snprintf(why, why_len,
             "qr of a %lld x %lld A on %d GPUs: each GPU's %lld x %lld part "
             "is transposed by cuBLAS geam, whose sizes are 32-bit ints (at "
             "most %d)",
             (long long)jmg_problem_rows(p), (long long)p->n, p->nparts,
             (long long)part, (long long)p->n, INT_MAX);
    return 0;
  }
  if ((int)p->dtype < 0 || (int)p->dtype >= JMG_NUM_DTYPES) {
    snprintf(why, why_len,
             "cuSOLVERMp takes float32, float64, complex64 and complex128 "
             "only");
    return 0;
  }
  return 1;
}

/* The public table's: the eigensolvers below their crossover run on rank
 * 0's gathered copy (one_gpu.c, jmg_mp_route_syevd), with cusolverdn-local's
 * limits (cuSOLVERMp's eigensolver, and its failures on tiny problems, are
 * then not called; where the copy does not fit, cuSOLVERMp's own routine
 * runs where mp_own_supports lets it). */
static int mp_supports(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t why_len) {
  if (!jmg_mp_gathers(p)) return mp_own_supports(e, p, why, why_len);
  char reason[JMG_ERROR_MSG_LEN];
  if (jmg_mp_load(reason, sizeof reason) == NULL) {
    snprintf(why, why_len, "%s", reason);
    return 0;
  }
  const jmg_engine *g = &jmg_cusolverdn_local_engine;
  return g->supports(g, p, why, why_len);
}

/* The blocks A is laid out in (engine.h, block): T_A, but for syevd, whose
 * stedc "may fail when the blocksize is not a power of two": there the
 * largest power of two at most T_A that divides the shard (so that no data
 * moves between ranks, layout/local.h), on one GPU at most min(T_A, N).
 * Any T_A runs; one whose shard has only small powers of two in it runs
 * with small blocks, slowly: the Python layer's default T_A pads the
 * shards to a multiple of a wide power of two instead (_shard.py,
 * choose_geometry). lapack-local and cusolverdn-local take the same blocks
 * (their `block`: cusolverdn-local falls back on this engine's routines). */
static int64_t mp_block(const jmg_engine *e, const jmg_problem *p) {
  (void)e;
  /* sygvd reduces to the standard problem and runs syevd's stedc. */
  if (!jmg_op_is_eigensolver(p->op)) return p->tile;
  return jmg_local_pow2_block(p->n, p->nparts, p->tile);
}

/* One rank's workspace is cuSOLVERDn's (one_gpu.c); several ranks'
 * is asked of cuSOLVERMp inside the call, on the grid, and not told ahead
 * of it. */
static int mp_workspace(const jmg_engine *e, const jmg_problem *p,
                        const jmg_workspace_query *q, size_t *bytes,
                        jmg_error *err) {
  (void)e;
  if (jmg_mp_one_gpu_problem(p))
    return jmg_cusolverdn_engine.workspace(&jmg_cusolverdn_engine, p, q,
                                           bytes, err);
  if (jmg_mp_gathers(p))
    return jmg_cusolverdn_local_engine.workspace(&jmg_cusolverdn_local_engine,
                                                 p, q, bytes, err);
  return jmg_error_set(err, JMG_EUNSUPPORTED, jmg_op_name(p->op), "cuSOLVERMp",
                       "%d ranks: the library's workspace is asked on the "
                       "ranks' grid, inside the call",
                       p->nparts);
}

const jmg_engine jmg_cusolvermp_engine = {
    .name = "cusolvermp",
    .model = JMG_MODEL_LOCAL,
    .supports = mp_supports,
    .workspace = mp_workspace,
    .block = mp_block,
    .local =
        {
            .potrs = jmg_mp_one_gpu_potrs,
            .potri = jmg_mp_one_gpu_potri,
            .syevd = jmg_mp_route_syevd,
            .lu_solve = jmg_mp_one_gpu_lu_solve,
            .qr = jmg_mp_qr,
            .sygvd = jmg_mp_route_sygvd,
        },
};

const jmg_engine jmg_cusolvermp_own_engine = {
    .name = "cusolvermp",
    .model = JMG_MODEL_LOCAL,
    .supports = mp_own_supports,
    .block = mp_block,
    .local =
        {
            .potrs = jmg_mp_one_gpu_potrs,
            .potri = jmg_mp_one_gpu_potri,
            .syevd = jmg_mp_one_gpu_syevd,
            .lu_solve = jmg_mp_one_gpu_lu_solve,
            .qr = jmg_mp_qr,
            .sygvd = jmg_mp_sygvd,
        },
};
