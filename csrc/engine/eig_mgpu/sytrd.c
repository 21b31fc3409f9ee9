/* The multi-GPU Householder tridiagonal reduction (trd.h: jmg_trd_reduce):
 * the driver. For each panel of at most nb columns (owner o: the GPU of
 * its tile) it runs the chosen path's steps (trd_run.h jmg_trd_steps:
 * sytrd_replicated.c, every GPU running every column's steps; or
 * sytrd_owner.c, session 19's, the owner running them), then brings T and
 * tau to the host, the only wait of the host. Here too: the scratch, the
 * split symmetric product and the trailing update that both paths launch,
 * and the timing of the panels for the trace. */
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"
#include "engine/eig_mgpu/trd_run.h"

#define PTR JMG_TRD_PTR

static size_t up(size_t x) { return (x + 31) / 32 * 32; }

/* GPU dev's scratch, both paths' parts (a few panels of n rows: small
 * beside A's columns). Owner path: v, y (n) the reflector and the partial
 * product; W (n x nb); vr (n x nb) V received; p1, p2 (nb) the gemv's; the
 * per-column alpha, sumsq, dot (atomics from zero). Replicated path: W;
 * the panel copies in vr (two panels, n x nb each, by the panel's parity);
 * y (two products of n, by the column's parity); part, count (the column
 * kernels' partial sums and their ticket); pp (the panel corrections);
 * scale and dot per column. Both: vg, wg (V's and W's rows at the GPU's
 * columns, for the trailing update); tau, e, d per column. */
static jmg_trd_parts parts_of(int64_t n, int64_t tile, int ndev, int dev,
                              int nb) {
  const size_t nn = (size_t)n, b = (size_t)nb,
               cnt = (size_t)jmg_bc_count(n, tile, ndev, dev);
  jmg_trd_parts p;
  size_t at = 0;
#define PART(f, count) \
  p.f = at;            \
  at += up(count)
  PART(v, nn);
  PART(y, 2 * nn);
  PART(w, nn * b);
  PART(vr, 2 * nn * b);
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
  PART(part, (2 * JMG_TRD_RNB + 1) * JMG_TRD_GMAX);
  _Static_assert((2 * JMG_TRD_RNB + 1) * JMG_TRD_GMAX >= JMG_TRD_GMAX_FINISH,
                 "col_finish's sums fit");
  PART(pp, 2 * JMG_TRD_RNB);
  PART(scale, nn);
  PART(count, 1);
#undef PART
  p.pc = p.vr;
  p.yy = p.y;
  p.total = at;
  return p;
}

size_t jmg_trd_reduce_bytes(int64_t n, int64_t tile, int ndev, int dev,
                            int nb) {
  return parts_of(n, tile, ndev, dev, nb).total * sizeof(double);
}

int jmg_trd_cuda(jmg_trd_run *s, cudaError_t rc, const char *call) {
  return jmg_cuda_check(rc, s->op, call, s->err);
}

int jmg_trd_blas(jmg_trd_run *s, cublasStatus_t rc, const char *call) {
  return jmg_cublas_check(rc, s->op, call, s->err);
}

int jmg_trd_on(jmg_trd_run *s, int dev) {
  return jmg_trd_cuda(s, cudaSetDevice(s->g->device[dev]), "cudaSetDevice");
}

int jmg_trd_signal_others(jmg_trd_run *s, int o, cudaEvent_t ev) {
  int rc = jmg_trd_on(s, o);
  if (rc == 0)
    rc = jmg_trd_cuda(s, cudaEventRecord(ev, s->g->stream[o]),
                      "cudaEventRecord");
  for (int q = 0; rc == 0 && q < s->ndev; ++q) {
    if (q == o) continue;
    rc = jmg_trd_on(s, q);
    if (rc == 0)
      rc = jmg_trd_cuda(s, cudaStreamWaitEvent(s->g->stream[q], ev, 0),
                        "cudaStreamWaitEvent");
  }
  return rc;
}

dim3 jmg_trd_rows_grid(int64_t m) {
  int64_t b = (m + 127) / 128;
  if (b < 1) b = 1;
  if (b > 2048) b = 2048;
  return (dim3){(unsigned)b, 1, 1};
}

int jmg_trd_run_launch(jmg_trd_run *s, int dev, jmg_trd_kernel k, dim3 grid,
                       dim3 block, void **args) {
  return jmg_trd_launch(k, grid, block, args, s->g->stream[dev], s->op, s->err);
}

int jmg_trd_symv_launch(jmg_trd_run *s, int dev, int64_t j, const double *v,
                        double *y) {
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
  const double *a = s->a->a[dev];
  long long lda = n, nn = n, nl = nloc, tl = tile, jj = j;
  int nd = s->ndev, dv = dev, r = (int)rt;
  void *args[] = {&a, &lda, &nn, &nl, &tl, &nd, &dv, &jj, &lc_first, &r, &v, &y};
  return jmg_trd_run_launch(s, dev, JMG_TRD_SYMV,
                            (dim3){(unsigned)ct, (unsigned)gy, 1},
                            (dim3){64, 1, 1}, args);
}

int jmg_trd_update_trailing(jmg_trd_run *s, int q, int64_t r0, int64_t wd,
                            const double *vsrc, const double *wsrc) {
  const int64_t n = s->n, tile = s->tile;
  const int ndev = s->ndev;
  long long lcf = jmg_bc_first_from(r0, n, tile, ndev, q);
  const int64_t cnt = jmg_bc_count(n, tile, ndev, q) - lcf;
  if (cnt <= 0) return 0;
  double *vg = PTR(s, q, vg), *wg = PTR(s, q, wg);
  long long ld = n, cn = cnt, tl = tile;
  int b = (int)wd, nd = ndev, dv = q;
  void *args[] = {&vsrc, &wsrc, &ld, &vg, &wg, &cn, &b, &lcf, &tl, &nd, &dv};
  int rc =
      jmg_trd_run_launch(s, q, JMG_TRD_GATHER_ROWS, jmg_trd_rows_grid(cnt * wd),
                         JMG_TRD_ROWS_BLOCK, args);
  double *cq = s->a->a[q] + lcf * n + r0;
  const double minus = -1.0, one = 1.0;
  if (rc == 0)
    rc = jmg_trd_blas(
        s,
        cublasDgemm_64(s->g->blas[q], CUBLAS_OP_N, CUBLAS_OP_T, n - r0, cnt, wd,
                       &minus, vsrc + r0, n, wg, cnt, &one, cq, n),
        "cublasDgemm_64 (A -= V Wc^T)");
  if (rc == 0)
    rc = jmg_trd_blas(
        s,
        cublasDgemm_64(s->g->blas[q], CUBLAS_OP_N, CUBLAS_OP_T, n - r0, cnt, wd,
                       &minus, wsrc + r0, n, vg, cnt, &one, cq, n),
        "cublasDgemm_64 (A -= W Vc^T)");
  return rc;
}

/* T and tau to the host, each entry from a GPU that made it (replicated:
 * GPU 0 made all; owner: the column's owner); every stream waited for. */
static int collect(jmg_trd_run *s, double *d, double *e, double *tau) {
  const int64_t n = s->n;
  const int ndev = s->ndev, from = s->path == JMG_TRD_REPLICATED ? 1 : ndev;
  double *h = malloc((size_t)n * 3 * (size_t)from * sizeof(double));
  if (h == NULL)
    return jmg_error_set(s->err, JMG_ENOMEM, s->op, "malloc",
                         "cannot allocate T's host copies (N=%lld)",
                         (long long)n);
  int rc = 0;
  const size_t bytes = (size_t)n * sizeof(double);
  for (int q = 0; rc == 0 && q < from; ++q) {
    double *hq = h + (size_t)q * 3 * (size_t)n;
    const double *src[3] = {PTR(s, q, d), PTR(s, q, e), PTR(s, q, tau)};
    rc = jmg_trd_on(s, q);
    for (int i = 0; rc == 0 && i < 3; ++i)
      rc = jmg_trd_cuda(
          s,
          cudaMemcpyAsync(hq + (size_t)i * (size_t)n, src[i], bytes,
                          cudaMemcpyDeviceToHost, s->g->stream[q]),
          "cudaMemcpyAsync (T to the host)");
  }
  for (int q = 0; rc == 0 && q < ndev; ++q)
    rc = jmg_trd_cuda(s, cudaStreamSynchronize(s->g->stream[q]),
                      "cudaStreamSynchronize");
  for (int64_t c = 0; rc == 0 && c < n; ++c) {
    const int q = from == 1 ? 0 : jmg_bc_owner(c, s->tile, ndev);
    const double *hq = h + (size_t)q * 3 * (size_t)n;
    d[c] = hq[c];
    if (c + 1 < n) {
      e[c] = hq[n + c];
      tau[c] = hq[2 * n + c];
    }
  }
  free(h);
  return rc;
}

/* The run's per-GPU events (kind 0 .. 3), for creating and destroying them
 * in one place. */
#define EVENT_KINDS 4
static cudaEvent_t *event_of(jmg_trd_run *s, int kind, int q) {
  cudaEvent_t *kinds[EVENT_KINDS] = {s->ev_v, s->ev_y, s->ev_b, s->ev_p};
  return &kinds[kind][q];
}

/* Timing events on GPU 0's stream: at each panel's start and before its
 * trailing update, and one at the end (2 per panel + 1). */
typedef struct marks {
  cudaEvent_t *ev;
  int count, made;
} marks;

static int marks_make(jmg_trd_run *s, marks *m, int64_t panels) {
  memset(m, 0, sizeof *m);
  m->count = (int)(2 * panels + 1);
  m->ev = calloc((size_t)m->count, sizeof(cudaEvent_t));
  if (m->ev == NULL)
    return jmg_error_set(s->err, JMG_ENOMEM, s->op, "calloc",
                         "cannot allocate %d timing events", m->count);
  int rc = jmg_trd_on(s, 0);
  for (; rc == 0 && m->made < m->count; ++m->made)
    rc = jmg_trd_cuda(s, cudaEventCreate(&m->ev[m->made]), "cudaEventCreate");
  return rc;
}

static int marks_record(jmg_trd_run *s, marks *m, int i) {
  if (m->ev == NULL) return 0;
  int rc = jmg_trd_on(s, 0);
  if (rc == 0)
    rc = jmg_trd_cuda(s, cudaEventRecord(m->ev[i], s->g->stream[0]),
                      "cudaEventRecord (timing)");
  return rc;
}

/* After every stream finished: the profile from the marks. */
static int marks_read(jmg_trd_run *s, marks *m, jmg_trd_profile *pr) {
  memset(pr, 0, sizeof *pr);
  double cols[8] = {0};
  int64_t i = 0, wd = 0;
  int rc = 0;
  for (int p = 0; rc == 0 && i < s->n; ++p, i += wd) {
    wd = jmg_bc_panel(i, s->n - 1, s->tile, s->nb);
    float t1 = 0.0f, t2 = 0.0f;
    rc = jmg_trd_cuda(s,
                      cudaEventElapsedTime(&t1, m->ev[2 * p], m->ev[2 * p + 1]),
                      "cudaEventElapsedTime");
    if (rc == 0)
      rc = jmg_trd_cuda(
          s, cudaEventElapsedTime(&t2, m->ev[2 * p + 1], m->ev[2 * p + 2]),
          "cudaEventElapsedTime");
    pr->columns_ms += t1;
    pr->trailing_ms += t2;
    const int b = (int)(i * 8 / s->n);
    pr->us_per_column[b] += 1e3 * ((double)t1 + (double)t2);
    cols[b] += (double)wd;
  }
  for (int b = 0; b < 8; ++b)
    if (cols[b] > 0) pr->us_per_column[b] /= cols[b];
  return rc;
}

static void marks_free(marks *m) {
  for (int i = 0; i < m->made; ++i) (void)cudaEventDestroy(m->ev[i]);
  free(m->ev);
}

/* Sets up the run on every GPU: scratch, handles on their streams, sums
 * zeroed, events and streams; every GPU waits for the others' setup before
 * its first use of their buffers. */
static int setup(jmg_trd_run *s, void *const *work) {
  const jmg_trd_gpus *g = s->g;
  int rc = 0;
  for (int q = 0; rc == 0 && q < s->ndev; ++q) {
    s->base[q] = work[q];
    s->p[q] = parts_of(s->n, s->tile, s->ndev, q, s->nb);
    rc = jmg_trd_on(s, q);
    if (rc == 0)
      rc = jmg_trd_blas(s, cublasSetStream(g->blas[q], g->stream[q]),
                        "cublasSetStream");
    if (rc == 0)
      rc = jmg_trd_blas(
          s, cublasSetPointerMode(g->blas[q], CUBLAS_POINTER_MODE_HOST),
          "cublasSetPointerMode");
    /* The owner path's per-column sums are accumulated with atomics from
     * zero; the replicated path's ticket starts at zero. */
    double *zero[3] = {PTR(s, q, sumsq), PTR(s, q, dot), PTR(s, q, count)};
    const size_t len[3] = {(size_t)s->n, (size_t)s->n, 1};
    for (int i = 0; rc == 0 && i < 3; ++i)
      rc = jmg_trd_cuda(
          s, cudaMemsetAsync(zero[i], 0, len[i] * sizeof(double), g->stream[q]),
          "cudaMemsetAsync");
    for (int kind = 0; rc == 0 && kind < EVENT_KINDS; ++kind)
      rc = jmg_trd_cuda(s,
                        cudaEventCreateWithFlags(event_of(s, kind, q),
                                                 cudaEventDisableTiming),
                        "cudaEventCreateWithFlags");
    if (rc == 0 && s->path == JMG_TRD_OWNER)
      rc = jmg_trd_cuda(
          s, cudaStreamCreateWithFlags(&s->aux[q], cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags");
    if (rc == 0)
      rc = jmg_trd_cuda(s, cudaEventRecord(s->ev_b[q], g->stream[q]),
                        "cudaEventRecord");
  }
  for (int q = 0; rc == 0 && q < s->ndev; ++q) {
    rc = jmg_trd_on(s, q);
    for (int r = 0; rc == 0 && r < s->ndev; ++r)
      if (r != q)
        rc = jmg_trd_cuda(s, cudaStreamWaitEvent(g->stream[q], s->ev_b[r], 0),
                          "cudaStreamWaitEvent");
  }
  return rc;
}

/* A failure leaves work queued: it is waited for before the events go.
 * The second streams' last work is ordered before the GPUs' streams' end
 * (finish_w waited for it). */
static int teardown(jmg_trd_run *s, int rc) {
  for (int q = 0; q < s->ndev; ++q) {
    if (s->base[q] == NULL) continue;
    (void)cudaSetDevice(s->g->device[q]);
    if (rc != 0) (void)cudaStreamSynchronize(s->g->stream[q]);
    if (s->aux[q] != NULL) {
      if (rc != 0) (void)cudaStreamSynchronize(s->aux[q]);
      const int r =
          jmg_trd_cuda(s, cudaStreamDestroy(s->aux[q]), "cudaStreamDestroy");
      if (rc == 0) rc = r;
    }
    for (int kind = 0; kind < EVENT_KINDS; ++kind)
      if (*event_of(s, kind, q) != NULL)
        (void)cudaEventDestroy(*event_of(s, kind, q));
  }
  return rc;
}

static void run_init(jmg_trd_run *s, const jmg_trd_gpus *g,
                     const jmg_trd_matrix *a, int nb, jmg_trd_path path,
                     const char *op, jmg_error *err) {
  memset(s, 0, sizeof *s);
  s->g = g;
  s->a = a;
  s->path = path;
  s->ndev = g->ndev;
  s->nb = nb;
  s->n = a->n;
  s->tile = a->tile;
  s->op = op;
  s->err = err;
}

int jmg_trd_reduce(const jmg_trd_gpus *g, const jmg_trd_matrix *a, int nb,
                   jmg_trd_path path, void *const *work, double *d, double *e,
                   double *tau, jmg_trd_profile *profile, const char *op,
                   jmg_error *err) {
  jmg_trd_run s;
  run_init(&s, g, a, nb, path, op, err);
  const int nb_max = path == JMG_TRD_REPLICATED ? JMG_TRD_RNB : JMG_TRD_NB_MAX;
  if (g->ndev < 1 || g->ndev > JMG_TRD_MAX_DEV || nb < 1 || nb > nb_max ||
      a->tile < 1 || (path != JMG_TRD_REPLICATED && path != JMG_TRD_OWNER))
    return jmg_error_set(err, JMG_EINVAL, op, "jmg_trd_reduce",
                         "%d GPUs (1 .. %d), panel %d (1 .. %d), tile %lld, "
                         "path %d",
                         g->ndev, JMG_TRD_MAX_DEV, nb, nb_max,
                         (long long)a->tile, (int)path);
  if (a->n <= 0) return 0;
  const jmg_trd_steps *steps = path == JMG_TRD_REPLICATED
                                   ? &jmg_trd_replicated_steps
                                   : &jmg_trd_owner_steps;
  int saved = -1;
  marks m;
  memset(&m, 0, sizeof m);
  int rc = jmg_trd_cuda(&s, cudaGetDevice(&saved), "cudaGetDevice");
  if (rc == 0) rc = jmg_trd_kernels_get(op, err);
  if (rc == 0) rc = setup(&s, work);
  if (rc == 0 && profile != NULL) {
    int64_t panels = 0;
    for (int64_t i = 0; i < s.n; ++panels)
      i += jmg_bc_panel(i, s.n - 1, s.tile, nb);
    rc = marks_make(&s, &m, panels);
  }
  int64_t wd = 0;
  for (int64_t i = 0; rc == 0 && i < s.n; i += wd, ++s.panel) {
    wd = jmg_bc_panel(i, s.n - 1, s.tile, nb);
    const int o = jmg_bc_owner(i, s.tile, s.ndev);
    rc = marks_record(&s, &m, (int)(2 * s.panel));
    if (rc == 0) rc = steps->start(&s, o, i, wd);
    for (int64_t k = 0; rc == 0 && k < wd; ++k)
      rc = steps->column(&s, o, i, (int)k);
    if (rc == 0) rc = marks_record(&s, &m, (int)(2 * s.panel + 1));
    if (rc == 0 && i + wd < s.n) rc = steps->end(&s, o, i, wd);
  }
  if (rc == 0) rc = marks_record(&s, &m, (int)(2 * s.panel));
  if (rc == 0) rc = collect(&s, d, e, tau);
  if (rc == 0 && m.ev != NULL) rc = marks_read(&s, &m, profile);
  rc = teardown(&s, rc);
  marks_free(&m);
  if (saved >= 0) {
    const int r = jmg_trd_cuda(&s, cudaSetDevice(saved), "cudaSetDevice");
    if (rc == 0) rc = r;
  }
  return rc;
}

int jmg_trd_time_symv(const jmg_trd_gpus *g, const jmg_trd_matrix *a, int nb,
                      void *const *work, int reps, double *ms, const char *op,
                      jmg_error *err) {
  jmg_trd_run s;
  run_init(&s, g, a, nb, JMG_TRD_OWNER, op, err);
  *ms = 0.0;
  int rc = jmg_trd_kernels_get(op, err);
  cudaEvent_t e0 = NULL, e1 = NULL;
  for (int q = 0; rc == 0 && q < s.ndev; ++q) {
    s.base[q] = work[q];
    s.p[q] = parts_of(s.n, s.tile, s.ndev, q, nb);
    rc = jmg_trd_on(&s, q);
    /* v = 0 everywhere: the product's values do not matter here. */
    for (int i = 0; rc == 0 && i < 2; ++i)
      rc = jmg_trd_cuda(
          &s,
          cudaMemsetAsync(i == 0 ? PTR(&s, q, v) : PTR(&s, q, y), 0,
                          (size_t)s.n * sizeof(double), g->stream[q]),
          "cudaMemsetAsync");
    if (rc == 0)
      rc = jmg_trd_cuda(&s, cudaStreamSynchronize(g->stream[q]),
                        "cudaStreamSynchronize");
  }
  /* GPU 0's time (events on its stream) over reps products at j = 0, the
   * other GPUs running theirs at the same time. */
  if (rc == 0) rc = jmg_trd_on(&s, 0);
  if (rc == 0) rc = jmg_trd_cuda(&s, cudaEventCreate(&e0), "cudaEventCreate");
  if (rc == 0) rc = jmg_trd_cuda(&s, cudaEventCreate(&e1), "cudaEventCreate");
  if (rc == 0)
    rc = jmg_trd_cuda(&s, cudaEventRecord(e0, g->stream[0]), "cudaEventRecord");
  for (int i = 0; rc == 0 && i < reps; ++i)
    for (int q = 0; rc == 0 && q < s.ndev; ++q) {
      rc = jmg_trd_on(&s, q);
      if (rc == 0)
        rc = jmg_trd_symv_launch(&s, q, 0, PTR(&s, q, v), PTR(&s, q, y));
    }
  if (rc == 0) rc = jmg_trd_on(&s, 0);
  if (rc == 0)
    rc = jmg_trd_cuda(&s, cudaEventRecord(e1, g->stream[0]), "cudaEventRecord");
  for (int q = 0; rc == 0 && q < s.ndev; ++q)
    rc = jmg_trd_cuda(&s, cudaStreamSynchronize(g->stream[q]),
                      "cudaStreamSynchronize");
  float t = 0.0f;
  if (rc == 0)
    rc = jmg_trd_cuda(&s, cudaEventElapsedTime(&t, e0, e1),
                      "cudaEventElapsedTime");
  if (rc == 0) *ms = (double)t / (reps > 0 ? reps : 1);
  if (e0 != NULL) (void)cudaEventDestroy(e0);
  if (e1 != NULL) (void)cudaEventDestroy(e1);
  return rc;
}
