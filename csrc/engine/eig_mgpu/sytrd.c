/* The multi-GPU Householder tridiagonal reduction (trd.h: jmg_trd_reduce).
 *
 * For each panel of at most nb columns (owner o: the GPU of its tile), for
 * each of its columns c (the panel's k-th), enqueued without a wait of the
 * host (kernels.cu says what each kernel does):
 *
 *   o:        update_col(c)  house(c)  record ev_v[o]
 *   each q≠o: wait ev_v[o]  symv(q)  record ev_y[q]
 *   o:        symv(o); beside it, on a second stream of o (after ev_v[o]):
 *             p1 = W^T v, p2 = V^T v (cuBLAS gemv), record ev_p[o]
 *             wait ev_p[o] and every ev_y[q]  finish_w(c)
 *
 * house writes v into every GPU's v buffer and zeroes every GPU's y (peer
 * stores); finish_w reads every GPU's y (peer loads). At the panel's end
 * the owner completes its last w (fix_w) and copies the panel's V and W
 * rows below the panel to every other GPU (peer copies), records ev_b[o];
 * every GPU then waits for it and updates its own trailing columns, all
 * rows from the panel's end: gather_rows picks V's and W's rows at its
 * columns' indices, and two gemm make A -= V Wc^T + W Vc^T. The next
 * panel's owner starts after its own update, on its stream.
 *
 * Why these orders are enough: a GPU's v and y are rewritten (house of the
 * next column) only after the owner waited for that GPU's symv of this
 * column (ev_y, before finish_w); a GPU's W and V copies are rewritten
 * (the next panel's end) only after that GPU's symv of the next panel's
 * columns, which its stream runs after its update. */
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"
#include "engine/eig_mgpu/kernels.h"
#include "engine/eig_mgpu/trd.h"

/* Where a GPU's scratch parts start, in doubles (each at a multiple of 32
 * doubles, 256 bytes). */
typedef struct trd_parts {
  size_t v, y, w, vr, vg, wg, p1, p2, tau, e, d, alpha, sumsq, dot, total;
} trd_parts;

static size_t up(size_t x) { return (x + 31) / 32 * 32; }

static trd_parts parts_of(int64_t n, int64_t tile, int ndev, int dev, int nb) {
  const size_t nn = (size_t)n, b = (size_t)nb,
               cnt = (size_t)jmg_bc_count(n, tile, ndev, dev);
  trd_parts p;
  size_t at = 0;
#define PART(f, count) \
  p.f = at;            \
  at += up(count)
  PART(v, nn);
  PART(y, nn);
  PART(w, nn * b);
  PART(vr, nn * b);
  PART(vg, (cnt > 0 ? cnt : 1) * b);
  PART(wg, (cnt > 0 ? cnt : 1) * b);
  PART(p1, b);
  PART(p2, b);
  PART(tau, nn);
  PART(e, nn);
  PART(d, nn);
  PART(alpha, nn);
  PART(sumsq, nn);
  PART(dot, nn);
#undef PART
  p.total = at;
  return p;
}

size_t jmg_trd_reduce_bytes(int64_t n, int64_t tile, int ndev, int dev,
                            int nb) {
  return parts_of(n, tile, ndev, dev, nb).total * sizeof(double);
}

/* One run's state. */
typedef struct run {
  const jmg_trd_gpus *g;
  const jmg_trd_matrix *a;
  const jmg_trd_kernels *k;
  int ndev, nb;
  int64_t n, tile;
  double *base[JMG_TRD_MAX_DEV];
  trd_parts p[JMG_TRD_MAX_DEV];
  cudaEvent_t ev_v[JMG_TRD_MAX_DEV], ev_y[JMG_TRD_MAX_DEV],
      ev_b[JMG_TRD_MAX_DEV], ev_p[JMG_TRD_MAX_DEV];
  /* A second stream on each GPU: the owner's two gemv run there, beside
   * its own part of the product. */
  cudaStream_t aux[JMG_TRD_MAX_DEV];
  const char *op;
  jmg_error *err;
} run;

#define PTR(s, dev, part) ((s)->base[dev] + (s)->p[dev].part)

static int cuda(run *s, cudaError_t rc, const char *call) {
  return jmg_cuda_check(rc, s->op, call, s->err);
}

static int blas(run *s, cublasStatus_t rc, const char *call) {
  return jmg_cublas_check(rc, s->op, call, s->err);
}

static int on(run *s, int dev) {
  return cuda(s, cudaSetDevice(s->g->device[dev]), "cudaSetDevice");
}

/* Blocks of 128 threads over m rows, at most 2048 (grid-stride beyond). */
static dim3 rows_grid(int64_t m) {
  int64_t b = (m + 127) / 128;
  if (b < 1) b = 1;
  if (b > 2048) b = 2048;
  return (dim3){(unsigned)b, 1, 1};
}

static const dim3 ROWS_BLOCK = {128, 1, 1};

static int launch(run *s, int dev, cudaKernel_t k, dim3 grid, dim3 block,
                  void **args, const char *name) {
  return jmg_trd_launch(k, grid, block, args, s->g->stream[dev], name, s->op,
                        s->err);
}

/* symv on GPU dev for the trailing matrix from row and column j. */
static int symv(run *s, int dev, int64_t j) {
  const int64_t n = s->n, tile = s->tile;
  const int64_t nloc = jmg_bc_count(n, tile, s->ndev, dev);
  long long lc_first = jmg_bc_first_from(j, n, tile, s->ndev, dev);
  const int64_t cols = nloc - lc_first, rows = n - j;
  if (cols <= 0 || rows <= 0) return 0;
  const int64_t ct = (cols + 31) / 32, rtiles = (rows + 63) / 64;
  int64_t rt = (ct * rtiles + 4095) / 4096;
  if (rt < 1) rt = 1;
  if (rt > 64) rt = 64;
  const int64_t gy = (rtiles + rt - 1) / rt;
  const double *a = s->a->a[dev], *v = PTR(s, dev, v);
  double *y = PTR(s, dev, y);
  long long lda = n, nn = n, nl = nloc, tl = tile, jj = j;
  int nd = s->ndev, dv = dev, r = (int)rt;
  void *args[] = {&a, &lda, &nn, &nl, &tl, &nd, &dv, &jj, &lc_first, &r, &v, &y};
  return launch(s, dev, s->k->symv, (dim3){(unsigned)ct, (unsigned)gy, 1},
                (dim3){64, 1, 1}, args, "cudaLaunchKernel (jmg_trd_symv)");
}

/* Column c = i + k of the panel at i (owner o). */
static int column(run *s, int o, int64_t i, int k) {
  const int64_t n = s->n, c = i + k, j = c + 1;
  const int ndev = s->ndev;
  const int64_t lci = jmg_bc_local(i, s->tile, ndev);
  double *vp = s->a->a[o] + lci * n, *acol = vp + (int64_t)k * n;
  double *w = PTR(s, o, w);
  long long ld = n, nn = n, cc = c, jj = j;
  int kk = k;
  int rc = on(s, o);
  {
    double *tau = PTR(s, o, tau), *dot = PTR(s, o, dot), *d = PTR(s, o, d),
           *alpha = PTR(s, o, alpha), *sumsq = PTR(s, o, sumsq);
    void *args[] = {&acol, &vp, &w, &ld, &nn, &cc, &kk,
                    &tau,  &dot, &d, &alpha, &sumsq};
    if (rc == 0)
      rc = launch(s, o, s->k->update_col, rows_grid(n - c), ROWS_BLOCK, args,
                  "cudaLaunchKernel (jmg_trd_update_col)");
  }
  if (rc != 0 || c == n - 1) return rc;
  {
    jmg_trd_ptrs vs, ys;
    memset(&vs, 0, sizeof vs);
    memset(&ys, 0, sizeof ys);
    for (int q = 0; q < ndev; ++q) {
      vs.p[q] = PTR(s, q, v);
      ys.p[q] = PTR(s, q, y);
    }
    double *alpha = PTR(s, o, alpha), *sumsq = PTR(s, o, sumsq),
           *tau = PTR(s, o, tau), *e = PTR(s, o, e);
    int nd = ndev;
    void *args[] = {&acol, &nn, &cc, &alpha, &sumsq, &tau, &e, &vs, &ys, &nd};
    rc = launch(s, o, s->k->house, rows_grid(n - j), ROWS_BLOCK, args,
                "cudaLaunchKernel (jmg_trd_house)");
  }
  if (rc == 0) rc = cuda(s, cudaEventRecord(s->ev_v[o], s->g->stream[o]),
                         "cudaEventRecord");
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    if (q == o) continue;
    rc = on(s, q);
    if (rc == 0)
      rc = cuda(s, cudaStreamWaitEvent(s->g->stream[q], s->ev_v[o], 0),
                "cudaStreamWaitEvent");
    if (rc == 0) rc = symv(s, q, j);
    if (rc == 0)
      rc = cuda(s, cudaEventRecord(s->ev_y[q], s->g->stream[q]),
                "cudaEventRecord");
  }
  /* p1 = W^T v, p2 = V^T v on the owner's second stream, beside its own
   * part of the product on its stream. */
  double *p1 = PTR(s, o, p1), *p2 = PTR(s, o, p2), *v = PTR(s, o, v);
  if (rc == 0) rc = on(s, o);
  if (rc == 0 && k > 0) {
    const double one = 1.0, zero = 0.0;
    cublasHandle_t h = s->g->blas[o];
    rc = cuda(s, cudaStreamWaitEvent(s->aux[o], s->ev_v[o], 0),
              "cudaStreamWaitEvent");
    if (rc == 0) rc = blas(s, cublasSetStream(h, s->aux[o]), "cublasSetStream");
    if (rc == 0)
      rc = blas(s,
                cublasDgemv_64(h, CUBLAS_OP_T, n - j, k, &one, w + j, n, v + j,
                               1, &zero, p1, 1),
                "cublasDgemv_64 (W^T v)");
    if (rc == 0)
      rc = blas(s,
                cublasDgemv_64(h, CUBLAS_OP_T, n - j, k, &one, vp + j, n,
                               v + j, 1, &zero, p2, 1),
                "cublasDgemv_64 (V^T v)");
    /* Back on the GPU's stream, where the trailing update's gemm run. */
    const int r = blas(s, cublasSetStream(h, s->g->stream[o]), "cublasSetStream");
    if (rc == 0) rc = r;
    if (rc == 0)
      rc = cuda(s, cudaEventRecord(s->ev_p[o], s->aux[o]), "cudaEventRecord");
  }
  if (rc == 0) rc = symv(s, o, j);
  if (rc == 0 && k > 0)
    rc = cuda(s, cudaStreamWaitEvent(s->g->stream[o], s->ev_p[o], 0),
              "cudaStreamWaitEvent");
  jmg_trd_ptrs yp;
  memset(&yp, 0, sizeof yp);
  int npeer = 0;
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    if (q == o) continue;
    yp.p[npeer++] = PTR(s, q, y);
    rc = cuda(s, cudaStreamWaitEvent(s->g->stream[o], s->ev_y[q], 0),
              "cudaStreamWaitEvent");
  }
  if (rc == 0) {
    double *yown = PTR(s, o, y), *tau = PTR(s, o, tau), *dot = PTR(s, o, dot);
    void *args[] = {&yown, &yp, &npeer, &vp, &w,   &ld,  &nn, &jj,
                    &kk,   &p1, &p2,    &v,  &tau, &cc, &dot};
    rc = launch(s, o, s->k->finish_w, rows_grid(n - j), ROWS_BLOCK, args,
                "cudaLaunchKernel (jmg_trd_finish_w)");
  }
  return rc;
}

/* After the panel at i (width wd, owner o): the last w completed, V and W
 * sent, every GPU's trailing columns updated. */
static int trailing(run *s, int o, int64_t i, int64_t wd) {
  const int64_t n = s->n, tile = s->tile, r0 = i + wd, c = r0 - 1;
  const int ndev = s->ndev;
  const int64_t lci = jmg_bc_local(i, tile, ndev);
  double *vp = s->a->a[o] + lci * n;
  int rc = on(s, o);
  {
    double *wcol = PTR(s, o, w) + (wd - 1) * n, *vcol = vp + (wd - 1) * n;
    double *tau = PTR(s, o, tau), *dot = PTR(s, o, dot);
    long long nn = n, cc = c;
    void *args[] = {&wcol, &vcol, &nn, &cc, &tau, &dot};
    if (rc == 0)
      rc = launch(s, o, s->k->fix_w, rows_grid(n - r0), ROWS_BLOCK, args,
                  "cudaLaunchKernel (jmg_trd_fix_w)");
  }
  /* The rows r0 .. n-1 of the panel's wd columns, as one span of the
   * column-major storage (the rows above r0 between columns come along). */
  const size_t span = (size_t)((wd - 1) * n + (n - r0)) * sizeof(double);
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    if (q == o) continue;
    rc = cuda(s,
              cudaMemcpyPeerAsync(PTR(s, q, vr) + r0, s->g->device[q], vp + r0,
                                  s->g->device[o], span, s->g->stream[o]),
              "cudaMemcpyPeerAsync (V)");
    if (rc == 0)
      rc = cuda(s,
                cudaMemcpyPeerAsync(PTR(s, q, w) + r0, s->g->device[q],
                                    PTR(s, o, w) + r0, s->g->device[o], span,
                                    s->g->stream[o]),
                "cudaMemcpyPeerAsync (W)");
  }
  if (rc == 0)
    rc = cuda(s, cudaEventRecord(s->ev_b[o], s->g->stream[o]),
              "cudaEventRecord");
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    const int64_t nloc = jmg_bc_count(n, tile, ndev, q);
    long long lcf = jmg_bc_first_from(r0, n, tile, ndev, q);
    const int64_t cnt = nloc - lcf;
    rc = on(s, q);
    if (rc == 0 && q != o)
      rc = cuda(s, cudaStreamWaitEvent(s->g->stream[q], s->ev_b[o], 0),
                "cudaStreamWaitEvent");
    if (rc != 0 || cnt <= 0) continue;
    const double *vsrc = q == o ? vp : PTR(s, q, vr);
    const double *wsrc = PTR(s, q, w);
    double *vg = PTR(s, q, vg), *wg = PTR(s, q, wg);
    long long ld = n, cn = cnt, tl = tile;
    int b = (int)wd, nd = ndev, dv = q;
    void *args[] = {&vsrc, &wsrc, &ld, &vg, &wg, &cn, &b, &lcf, &tl, &nd, &dv};
    rc = launch(s, q, s->k->gather_rows, rows_grid(cnt * wd), ROWS_BLOCK, args,
                "cudaLaunchKernel (jmg_trd_gather_rows)");
    double *cq = s->a->a[q] + lcf * n + r0;
    const double minus = -1.0, one = 1.0;
    if (rc == 0)
      rc = blas(s,
                cublasDgemm_64(s->g->blas[q], CUBLAS_OP_N, CUBLAS_OP_T, n - r0,
                               cnt, wd, &minus, vsrc + r0, n, wg, cnt, &one, cq,
                               n),
                "cublasDgemm_64 (A -= V Wc^T)");
    if (rc == 0)
      rc = blas(s,
                cublasDgemm_64(s->g->blas[q], CUBLAS_OP_N, CUBLAS_OP_T, n - r0,
                               cnt, wd, &minus, wsrc + r0, n, vg, cnt, &one, cq,
                               n),
                "cublasDgemm_64 (A -= W Vc^T)");
  }
  return rc;
}

/* T and tau to the host: each entry from its column's owner. */
static int collect(run *s, double *d, double *e, double *tau) {
  const int64_t n = s->n;
  const int ndev = s->ndev;
  double *h = malloc((size_t)n * 3 * (size_t)ndev * sizeof(double));
  if (h == NULL)
    return jmg_error_set(s->err, JMG_ENOMEM, s->op, "malloc",
                         "cannot allocate T's host copies (N=%lld)",
                         (long long)n);
  int rc = 0;
  const size_t bytes = (size_t)n * sizeof(double);
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    double *hq = h + (size_t)q * 3 * (size_t)n;
    rc = on(s, q);
    if (rc == 0)
      rc = cuda(s,
                cudaMemcpyAsync(hq, PTR(s, q, d), bytes, cudaMemcpyDeviceToHost,
                                s->g->stream[q]),
                "cudaMemcpyAsync (d)");
    if (rc == 0)
      rc = cuda(s,
                cudaMemcpyAsync(hq + n, PTR(s, q, e), bytes,
                                cudaMemcpyDeviceToHost, s->g->stream[q]),
                "cudaMemcpyAsync (e)");
    if (rc == 0)
      rc = cuda(s,
                cudaMemcpyAsync(hq + 2 * n, PTR(s, q, tau), bytes,
                                cudaMemcpyDeviceToHost, s->g->stream[q]),
                "cudaMemcpyAsync (tau)");
  }
  for (int q = 0; rc == 0 && q < ndev; ++q)
    rc = cuda(s, cudaStreamSynchronize(s->g->stream[q]),
              "cudaStreamSynchronize");
  for (int64_t c = 0; rc == 0 && c < n; ++c) {
    const double *hq =
        h + (size_t)jmg_bc_owner(c, s->tile, ndev) * 3 * (size_t)n;
    d[c] = hq[c];
    if (c + 1 < n) {
      e[c] = hq[n + c];
      tau[c] = hq[2 * n + c];
    }
  }
  free(h);
  return rc;
}

int jmg_trd_reduce(const jmg_trd_gpus *g, const jmg_trd_matrix *a, int nb,
                   void *const *work, double *d, double *e, double *tau,
                   const char *op, jmg_error *err) {
  run s;
  memset(&s, 0, sizeof s);
  s.g = g;
  s.a = a;
  s.ndev = g->ndev;
  s.nb = nb;
  s.n = a->n;
  s.tile = a->tile;
  s.op = op;
  s.err = err;
  if (g->ndev < 1 || g->ndev > JMG_TRD_MAX_DEV || nb < 1 ||
      nb > JMG_TRD_NB_MAX || a->tile < 1)
    return jmg_error_set(err, JMG_EINVAL, op, "jmg_trd_reduce",
                         "%d GPUs (1 .. %d), panel %d (1 .. %d), tile %lld",
                         g->ndev, JMG_TRD_MAX_DEV, nb, JMG_TRD_NB_MAX,
                         (long long)a->tile);
  if (a->n <= 0) return 0;
  int saved = -1;
  int rc = cuda(&s, cudaGetDevice(&saved), "cudaGetDevice");
  if (rc == 0) rc = jmg_trd_kernels_get(&s.k, op, err);
  for (int q = 0; rc == 0 && q < s.ndev; ++q) {
    s.base[q] = work[q];
    s.p[q] = parts_of(s.n, s.tile, s.ndev, q, nb);
    rc = on(&s, q);
    if (rc == 0)
      rc = blas(&s, cublasSetStream(g->blas[q], g->stream[q]),
                "cublasSetStream");
    if (rc == 0)
      rc = blas(&s, cublasSetPointerMode(g->blas[q], CUBLAS_POINTER_MODE_HOST),
                "cublasSetPointerMode");
    /* The per-column sums are accumulated with atomics from zero. */
    if (rc == 0)
      rc = cuda(&s,
                cudaMemsetAsync(PTR(&s, q, sumsq), 0,
                                (size_t)s.n * sizeof(double), g->stream[q]),
                "cudaMemsetAsync");
    if (rc == 0)
      rc = cuda(&s,
                cudaMemsetAsync(PTR(&s, q, dot), 0,
                                (size_t)s.n * sizeof(double), g->stream[q]),
                "cudaMemsetAsync");
    if (rc == 0)
      rc = cuda(&s, cudaEventCreateWithFlags(&s.ev_v[q], cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
    if (rc == 0)
      rc = cuda(&s, cudaEventCreateWithFlags(&s.ev_y[q], cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
    if (rc == 0)
      rc = cuda(&s, cudaEventCreateWithFlags(&s.ev_b[q], cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
    if (rc == 0)
      rc = cuda(&s, cudaEventCreateWithFlags(&s.ev_p[q], cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
    if (rc == 0)
      rc = cuda(&s, cudaStreamCreateWithFlags(&s.aux[q], cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags");
    /* The other GPUs wait for this one's memsets before their first use
     * of its buffers (house writes into every GPU's v and y). */
    if (rc == 0)
      rc = cuda(&s, cudaEventRecord(s.ev_b[q], g->stream[q]),
                "cudaEventRecord");
  }
  for (int q = 0; rc == 0 && q < s.ndev; ++q) {
    rc = on(&s, q);
    for (int r = 0; rc == 0 && r < s.ndev; ++r)
      if (r != q)
        rc = cuda(&s, cudaStreamWaitEvent(g->stream[q], s.ev_b[r], 0),
                  "cudaStreamWaitEvent");
  }
  int64_t wd = 0;
  for (int64_t i = 0; rc == 0 && i < s.n; i += wd) {
    wd = jmg_bc_panel(i, s.n - 1, s.tile, nb);
    const int o = jmg_bc_owner(i, s.tile, s.ndev);
    for (int64_t k = 0; rc == 0 && k < wd; ++k) rc = column(&s, o, i, (int)k);
    if (rc == 0 && i + wd < s.n) rc = trailing(&s, o, i, wd);
  }
  if (rc == 0) rc = collect(&s, d, e, tau);
  /* A failure leaves work queued: wait for it before the events go. The
   * second streams' last work is ordered before the GPUs' streams' end
   * (finish_w waited for it). */
  for (int q = 0; q < s.ndev; ++q) {
    if (s.ev_v[q] == NULL) continue;
    (void)cudaSetDevice(g->device[q]);
    if (rc != 0) (void)cudaStreamSynchronize(g->stream[q]);
    if (s.aux[q] != NULL) {
      if (rc != 0) (void)cudaStreamSynchronize(s.aux[q]);
      const int r = cuda(&s, cudaStreamDestroy(s.aux[q]), "cudaStreamDestroy");
      if (rc == 0) rc = r;
    }
    (void)cudaEventDestroy(s.ev_v[q]);
    if (s.ev_y[q] != NULL) (void)cudaEventDestroy(s.ev_y[q]);
    if (s.ev_b[q] != NULL) (void)cudaEventDestroy(s.ev_b[q]);
    if (s.ev_p[q] != NULL) (void)cudaEventDestroy(s.ev_p[q]);
  }
  if (saved >= 0) {
    const int r = cuda(&s, cudaSetDevice(saved), "cudaSetDevice");
    if (rc == 0) rc = r;
  }
  return rc;
}

int jmg_trd_time_symv(const jmg_trd_gpus *g, const jmg_trd_matrix *a, int nb,
                      void *const *work, int reps, double *ms, const char *op,
                      jmg_error *err) {
  run s;
  memset(&s, 0, sizeof s);
  s.g = g;
  s.a = a;
  s.ndev = g->ndev;
  s.nb = nb;
  s.n = a->n;
  s.tile = a->tile;
  s.op = op;
  s.err = err;
  *ms = 0.0;
  int rc = jmg_trd_kernels_get(&s.k, op, err);
  cudaEvent_t e0 = NULL, e1 = NULL;
  for (int q = 0; rc == 0 && q < s.ndev; ++q) {
    s.base[q] = work[q];
    s.p[q] = parts_of(s.n, s.tile, s.ndev, q, nb);
    rc = on(&s, q);
    /* v = 1 everywhere: the product's values do not matter here. */
    if (rc == 0)
      rc = cuda(&s,
                cudaMemsetAsync(PTR(&s, q, v), 0, (size_t)s.n * sizeof(double),
                                g->stream[q]),
                "cudaMemsetAsync");
    if (rc == 0)
      rc = cuda(&s,
                cudaMemsetAsync(PTR(&s, q, y), 0, (size_t)s.n * sizeof(double),
                                g->stream[q]),
                "cudaMemsetAsync");
    if (rc == 0) rc = cuda(&s, cudaStreamSynchronize(g->stream[q]), "cudaStreamSynchronize");
  }
  /* GPU 0's time (events on its stream) over reps products at j = 0, the
   * other GPUs running theirs at the same time. */
  if (rc == 0) rc = on(&s, 0);
  if (rc == 0) rc = cuda(&s, cudaEventCreate(&e0), "cudaEventCreate");
  if (rc == 0) rc = cuda(&s, cudaEventCreate(&e1), "cudaEventCreate");
  if (rc == 0) rc = cuda(&s, cudaEventRecord(e0, g->stream[0]), "cudaEventRecord");
  for (int i = 0; rc == 0 && i < reps; ++i)
    for (int q = 0; rc == 0 && q < s.ndev; ++q) {
      rc = on(&s, q);
      if (rc == 0) rc = symv(&s, q, 0);
    }
  if (rc == 0) rc = on(&s, 0);
  if (rc == 0) rc = cuda(&s, cudaEventRecord(e1, g->stream[0]), "cudaEventRecord");
  for (int q = 0; rc == 0 && q < s.ndev; ++q) {
    rc = on(&s, q);
    if (rc == 0) rc = cuda(&s, cudaStreamSynchronize(g->stream[q]), "cudaStreamSynchronize");
  }
  float t = 0.0f;
  if (rc == 0) rc = cuda(&s, cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
  if (rc == 0) *ms = (double)t / (reps > 0 ? reps : 1);
  if (e0 != NULL) (void)cudaEventDestroy(e0);
  if (e1 != NULL) (void)cudaEventDestroy(e1);
  return rc;
}
