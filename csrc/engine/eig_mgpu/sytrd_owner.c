/* The reduction's panels as session 19 ran them (trd.h JMG_TRD_OWNER):
 * the panel's owner o runs each column's steps and exchanges with every
 * other GPU twice a column. For each column c (the panel's k-th),
 * enqueued without a wait of the host (kernels.cu says what each kernel
 * does):
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
 * every GPU then waits for it and updates its own trailing columns. The
 * next panel's owner starts after its own update, on its stream.
 *
 * Why these orders are enough: a GPU's v and y are rewritten (house of the
 * next column) only after the owner waited for that GPU's symv of this
 * column (ev_y, before finish_w); a GPU's W and V copies are rewritten
 * (the next panel's end) only after that GPU's symv of the next panel's
 * columns, which its stream runs after its update. */
#include <string.h>

#include "engine/eig_mgpu/trd_run.h"

#define PTR JMG_TRD_PTR

/* Column c = i + k of the panel at i (owner o). */
static int column(jmg_trd_run *s, int o, int64_t i, int k) {
  const int64_t n = s->n, c = i + k, j = c + 1;
  const int ndev = s->ndev;
  const int64_t lci = jmg_bc_local(i, s->tile, ndev);
  double *vp = s->a->a[o] + lci * n, *acol = vp + (int64_t)k * n;
  double *w = PTR(s, o, w);
  long long ld = n, nn = n, cc = c, jj = j;
  int kk = k;
  int rc = jmg_trd_on(s, o);
  {
    double *tau = PTR(s, o, tau), *dot = PTR(s, o, dot), *d = PTR(s, o, d),
           *alpha = PTR(s, o, alpha), *sumsq = PTR(s, o, sumsq);
    void *args[] = {&acol, &vp,  &w,   &ld, &nn,    &cc,
                    &kk,   &tau, &dot, &d,  &alpha, &sumsq};
    if (rc == 0)
      rc =
          jmg_trd_run_launch(s, o, JMG_TRD_UPDATE_COL, jmg_trd_rows_grid(n - c),
                             JMG_TRD_ROWS_BLOCK, args);
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
    rc = jmg_trd_run_launch(s, o, JMG_TRD_HOUSE, jmg_trd_rows_grid(n - j),
                            JMG_TRD_ROWS_BLOCK, args);
  }
  if (rc == 0) rc = jmg_trd_signal_others(s, o, s->ev_v[o]);
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    if (q == o) continue;
    rc = jmg_trd_on(s, q);
    if (rc == 0) rc = jmg_trd_symv_launch(s, q, j, PTR(s, q, v), PTR(s, q, y));
    if (rc == 0)
      rc = jmg_trd_cuda(s, cudaEventRecord(s->ev_y[q], s->g->stream[q]),
                        "cudaEventRecord");
  }
  /* p1 = W^T v, p2 = V^T v on the owner's second stream, beside its own
   * part of the product on its stream. */
  double *p1 = PTR(s, o, p1), *p2 = PTR(s, o, p2), *v = PTR(s, o, v);
  if (rc == 0) rc = jmg_trd_on(s, o);
  if (rc == 0 && k > 0) {
    const double one = 1.0, zero = 0.0;
    cublasHandle_t h = s->g->blas[o];
    rc = jmg_trd_cuda(s, cudaStreamWaitEvent(s->aux[o], s->ev_v[o], 0),
                      "cudaStreamWaitEvent");
    if (rc == 0)
      rc = jmg_trd_blas(s, cublasSetStream(h, s->aux[o]), "cublasSetStream");
    if (rc == 0)
      rc = jmg_trd_blas(s,
                        cublasDgemv_64(h, CUBLAS_OP_T, n - j, k, &one, w + j, n,
                                       v + j, 1, &zero, p1, 1),
                        "cublasDgemv_64 (W^T v)");
    if (rc == 0)
      rc = jmg_trd_blas(s,
                        cublasDgemv_64(h, CUBLAS_OP_T, n - j, k, &one, vp + j,
                                       n, v + j, 1, &zero, p2, 1),
                        "cublasDgemv_64 (V^T v)");
    /* Back on the GPU's stream, where the trailing update's gemm run. */
    const int r =
        jmg_trd_blas(s, cublasSetStream(h, s->g->stream[o]), "cublasSetStream");
    if (rc == 0) rc = r;
    if (rc == 0)
      rc = jmg_trd_cuda(s, cudaEventRecord(s->ev_p[o], s->aux[o]),
                        "cudaEventRecord");
  }
  if (rc == 0) rc = jmg_trd_symv_launch(s, o, j, PTR(s, o, v), PTR(s, o, y));
  if (rc == 0 && k > 0)
    rc = jmg_trd_cuda(s, cudaStreamWaitEvent(s->g->stream[o], s->ev_p[o], 0),
                      "cudaStreamWaitEvent");
  jmg_trd_ptrs yp;
  memset(&yp, 0, sizeof yp);
  int npeer = 0;
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    if (q == o) continue;
    yp.p[npeer++] = PTR(s, q, y);
    rc = jmg_trd_cuda(s, cudaStreamWaitEvent(s->g->stream[o], s->ev_y[q], 0),
                      "cudaStreamWaitEvent");
  }
  if (rc == 0) {
    double *yown = PTR(s, o, y), *tau = PTR(s, o, tau), *dot = PTR(s, o, dot);
    void *args[] = {&yown, &yp, &npeer, &vp, &w,   &ld, &nn, &jj,
                    &kk,   &p1, &p2,    &v,  &tau, &cc, &dot};
    rc = jmg_trd_run_launch(s, o, JMG_TRD_FINISH_W, jmg_trd_rows_grid(n - j),
                            JMG_TRD_ROWS_BLOCK, args);
  }
  return rc;
}

/* After the panel at i (width wd, owner o): the last w completed, V and W
 * sent, every GPU's trailing columns updated. */
static int trailing(jmg_trd_run *s, int o, int64_t i, int64_t wd) {
  const int64_t n = s->n, tile = s->tile, r0 = i + wd, c = r0 - 1;
  const int ndev = s->ndev;
  const int64_t lci = jmg_bc_local(i, tile, ndev);
  double *vp = s->a->a[o] + lci * n;
  int rc = jmg_trd_on(s, o);
  {
    double *wcol = PTR(s, o, w) + (wd - 1) * n, *vcol = vp + (wd - 1) * n;
    double *tau = PTR(s, o, tau), *dot = PTR(s, o, dot);
    long long nn = n, cc = c;
    void *args[] = {&wcol, &vcol, &nn, &cc, &tau, &dot};
    if (rc == 0)
      rc = jmg_trd_run_launch(s, o, JMG_TRD_FIX_W, jmg_trd_rows_grid(n - r0),
                              JMG_TRD_ROWS_BLOCK, args);
  }
  /* The rows r0 .. n-1 of the panel's wd columns, as one span of the
   * column-major storage (the rows above r0 between columns come along). */
  const size_t span = (size_t)((wd - 1) * n + (n - r0)) * sizeof(double);
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    if (q == o) continue;
    rc = jmg_trd_cuda(
        s,
        cudaMemcpyPeerAsync(PTR(s, q, vr) + r0, s->g->device[q], vp + r0,
                            s->g->device[o], span, s->g->stream[o]),
        "cudaMemcpyPeerAsync (V)");
    if (rc == 0)
      rc = jmg_trd_cuda(s,
                        cudaMemcpyPeerAsync(PTR(s, q, w) + r0, s->g->device[q],
                                            PTR(s, o, w) + r0, s->g->device[o],
                                            span, s->g->stream[o]),
                        "cudaMemcpyPeerAsync (W)");
  }
  if (rc == 0) rc = jmg_trd_signal_others(s, o, s->ev_b[o]);
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    rc = jmg_trd_on(s, q);
    if (rc == 0)
      rc = jmg_trd_update_trailing(s, q, r0, wd, q == o ? vp : PTR(s, q, vr),
                                   PTR(s, q, w));
  }
  return rc;
}

static int start(jmg_trd_run *s, int o, int64_t i, int64_t wd) {
  (void)s, (void)o, (void)i, (void)wd;
  return 0;
}

const jmg_trd_steps jmg_trd_owner_steps = {start, column, trailing};
