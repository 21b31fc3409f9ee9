/* The reduction's panels with every GPU running every column's steps
 * (trd.h JMG_TRD_REPLICATED): one exchange between the GPUs a column.
 *
 * At the panel's start its owner o copies the panel's columns (rows from
 * the panel's first down, after its trailing update) into every other
 * GPU's panel buffer (peer copies on o's stream), records ev_b[o], and
 * every other GPU waits for it. Then for each column c (the panel's k-th),
 * enqueued without a wait of the host (kernels.cu says what each kernel
 * does):
 *
 *   each GPU q:  col_start(c)  symv(q)  record ev_y[q]
 *   each GPU q:  wait every other ev_y  col_finish(c)
 *
 * col_start updates q's copy of column c, makes the reflector (its last
 * block), zeroes q's y; symv adds q's part of the product into q's y;
 * col_finish sums every GPU's y (peer loads, in GPU order) and makes w and
 * v on q. Every GPU holds the same V, W, tau, d and e, bit for bit (every
 * sum in the column kernels is in a fixed order, and every GPU sums the
 * same y's), so at the panel's end each updates its own trailing columns
 * from its own V and W (fix_w, then gather_rows and two gemm): nothing
 * else is sent. The owner works on A's columns, the others on their copy.
 *
 * Why these orders are enough: y has two buffers a GPU (by the column's
 * parity): col_start(c+2) on GPU d zeroes the buffer that GPU q's
 * col_finish(c) reads, and it runs after d's col_finish(c+1), which waited
 * for q's symv(c+1), which q's stream runs after its col_finish(c). The
 * panel buffers are two (by the panel's parity): the owner of panel p
 * copies into GPU q's buffer that q last read in panel p-2's trailing
 * update, and the copy runs after the owner's col_finish of panel p-1's
 * last column, which waited for q's symv of that column, which q ran after
 * that update. */
#include "engine/eig_mgpu/trd_run.h"

#define PTR JMG_TRD_PTR

/* GPU q's copy of the panel at i (owner o): A's columns on the owner, the
 * panel buffer of the panel's parity elsewhere (ld n, rows global). */
static double *panel_of(jmg_trd_run *s, int q, int o, int64_t i) {
  if (q == o) return s->a->a[o] + jmg_bc_local(i, s->tile, s->ndev) * s->n;
  return PTR(s, q, pc) + (size_t)(s->panel & 1) * (size_t)s->n * (size_t)s->nb;
}

/* The column kernels' grid: a block a tile of JMG_TRD_CR rows, at most
 * most blocks (grid-stride beyond). col_finish takes more than col_start:
 * its blocks wait on loads from the other GPUs, and leave one sum each. */
static dim3 col_grid(int64_t rows, int64_t most) {
  int64_t b = (rows + JMG_TRD_CR - 1) / JMG_TRD_CR;
  if (b < 1) b = 1;
  if (b > most) b = most;
  return (dim3){(unsigned)b, 1, 1};
}

static const dim3 COL_BLOCK = {JMG_TRD_CR * JMG_TRD_CS, 1, 1};

static int start(jmg_trd_run *s, int o, int64_t i, int64_t wd) {
  const int64_t n = s->n;
  const int ndev = s->ndev;
  if (ndev == 1) return 0;
  /* The rows i .. n-1 of the panel's wd columns, as one span of the
   * column-major storage (the rows above i between columns come along). */
  const size_t span = (size_t)((wd - 1) * n + (n - i)) * sizeof(double);
  const double *src = panel_of(s, o, o, i) + i;
  int rc = jmg_trd_on(s, o);
  for (int q = 0; rc == 0 && q < ndev; ++q)
    if (q != o)
      rc = jmg_trd_cuda(
          s,
          cudaMemcpyPeerAsync(panel_of(s, q, o, i) + i, s->g->device[q], src,
                              s->g->device[o], span, s->g->stream[o]),
          "cudaMemcpyPeerAsync (the panel)");
  if (rc == 0) rc = jmg_trd_signal_others(s, o, s->ev_b[o]);
  return rc;
}

static int column(jmg_trd_run *s, int o, int64_t i, int k) {
  const int64_t n = s->n, c = i + k, j = c + 1;
  const int ndev = s->ndev;
  const size_t par = (size_t)(c & 1) * (size_t)n;
  long long ld = n, nn = n, cc = c;
  int kk = k, nd = ndev, rc = 0;
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    double *vp = panel_of(s, q, o, i), *acol = vp + (int64_t)k * n,
           *w = PTR(s, q, w), *tau = PTR(s, q, tau), *e = PTR(s, q, e),
           *d = PTR(s, q, d), *scale = PTR(s, q, scale), *dot = PTR(s, q, dot),
           *y = PTR(s, q, yy) + par, *part = PTR(s, q, part),
           *pp = PTR(s, q, pp);
    unsigned *count = (unsigned *)PTR(s, q, count);
    void *args[] = {&acol, &vp, &w,     &ld,  &nn, &cc,   &kk,    &tau,
                    &e,    &d,  &scale, &dot, &y,  &part, &count, &pp};
    rc = jmg_trd_on(s, q);
    if (rc == 0)
      rc = jmg_trd_run_launch(s, q, JMG_TRD_COL_START,
                              col_grid(n - c, JMG_TRD_GMAX), COL_BLOCK, args);
    if (rc == 0 && j < n) rc = jmg_trd_symv_launch(s, q, j, acol, y);
    if (rc == 0 && j < n && ndev > 1)
      rc = jmg_trd_cuda(s, cudaEventRecord(s->ev_y[q], s->g->stream[q]),
                        "cudaEventRecord");
  }
  if (rc != 0 || j >= n) return rc;
  jmg_trd_ptrs ys;
  for (int q = 0; q < JMG_TRD_MAX_DEV; ++q)
    ys.p[q] = q < ndev ? PTR(s, q, yy) + par : NULL;
  for (int q = 0; rc == 0 && q < ndev; ++q) {
    double *vp = panel_of(s, q, o, i), *acol = vp + (int64_t)k * n,
           *w = PTR(s, q, w), *tau = PTR(s, q, tau), *scale = PTR(s, q, scale),
           *dot = PTR(s, q, dot), *part = PTR(s, q, part), *pp = PTR(s, q, pp);
    unsigned *count = (unsigned *)PTR(s, q, count);
    void *args[] = {&acol, &vp, &w,   &ld,    &nn,  &cc,   &kk,   &ys,
                    &nd,   &pp, &tau, &scale, &dot, &part, &count};
    rc = jmg_trd_on(s, q);
    for (int r = 0; rc == 0 && r < ndev; ++r)
      if (r != q)
        rc =
            jmg_trd_cuda(s, cudaStreamWaitEvent(s->g->stream[q], s->ev_y[r], 0),
                         "cudaStreamWaitEvent");
    if (rc == 0)
      rc = jmg_trd_run_launch(s, q, JMG_TRD_COL_FINISH,
                              col_grid(n - j, JMG_TRD_GMAX_FINISH), COL_BLOCK,
                              args);
  }
  return rc;
}

/* Every GPU: its last w completed (fix_w), its trailing columns updated
 * from its own V and W. */
static int end(jmg_trd_run *s, int o, int64_t i, int64_t wd) {
  const int64_t n = s->n, r0 = i + wd;
  long long nn = n, cc = r0 - 1;
  int rc = 0;
  for (int q = 0; rc == 0 && q < s->ndev; ++q) {
    double *vp = panel_of(s, q, o, i), *w = PTR(s, q, w);
    double *wcol = w + (wd - 1) * n, *vcol = vp + (wd - 1) * n,
           *tau = PTR(s, q, tau), *dot = PTR(s, q, dot);
    void *args[] = {&wcol, &vcol, &nn, &cc, &tau, &dot};
    rc = jmg_trd_on(s, q);
    if (rc == 0)
      rc = jmg_trd_run_launch(s, q, JMG_TRD_FIX_W, jmg_trd_rows_grid(n - r0),
                              JMG_TRD_ROWS_BLOCK, args);
    if (rc == 0) rc = jmg_trd_update_trailing(s, q, r0, wd, vp, w);
  }
  return rc;
}

const jmg_trd_steps jmg_trd_replicated_steps = {start, column, end};
