/* gesvd (ops/gesvd.c, engine/lapack/gesvd.c): its description (a
 * rectangular A, optional results that move the ones after them), the
 * LAPACK routine on several host "devices", and the op's leader steps over
 * several shards (jmg_leader_run on hand-made posts), with a reference
 * gesdd (one-sided Jacobi, in double complex) registered in SciPy's place.
 * Every check is residual-based: A V = U S, orthonormal U and V, and the
 * singular values of a matrix built from known ones. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/lapack/lapack.h"
#include "engine/lapack/table.h"
#include "exec/join.h"
#include "exec/leader.h"
#include "host_leader.h"
#include "ops/ops.h"
#include "ref_lapack.h"
#include "test.h"
#include "test_random.h"

/* ---- a reference gesdd ---------------------------------------------------*/

typedef double complex cplx;

/* Column j of a column-major matrix with leading dimension ld. */
#define COL(a, ld, j) ((a) + (size_t)(j) * (size_t)(ld))

static double col_norm2(const cplx *x, int m) {
  double s = 0.0;
  for (int i = 0; i < m; ++i) s += creal(x[i] * conj(x[i]));
  return s;
}

/* e_c with the columns of the m x cols Q (ld m) other than j projected out
 * (Gram-Schmidt, twice), the columns not kept after j excepted (not yet
 * filled); into column j. Returns its norm. */
static double orthogonal_to_the_others(cplx *q, int m, int cols, const int *keep,
                                       int j, int c) {
  cplx *x = COL(q, m, j);
  for (int i = 0; i < m; ++i) x[i] = i == c ? 1.0 : 0.0;
  for (int pass = 0; pass < 2; ++pass)
    for (int o = 0; o < cols; ++o) {
      if (o == j || (!keep[o] && o > j)) continue;
      const cplx *y = COL(q, m, o);
      cplx dot = 0.0;
      for (int i = 0; i < m; ++i) dot += conj(y[i]) * x[i];
      for (int i = 0; i < m; ++i) x[i] -= dot * y[i];
    }
  return sqrt(col_norm2(x, m));
}

/* Fills the columns j of the m x cols Q (ld m) whose `keep[j]` is 0 with
 * unit vectors orthogonal to every other column: of e_0 .. e_{m-1}, the one
 * that keeps the most once the others are projected out (some e_c keeps at
 * least 1/sqrt(m) while a column is missing; a fixed threshold could find
 * none, as random matrices showed). A set of orthonormal columns completed. */
static void complete(cplx *q, int m, int cols, const int *keep) {
  for (int j = 0; j < cols; ++j) {
    if (keep[j]) continue;
    int best = 0;
    double most = -1.0;
    for (int c = 0; c < m; ++c) {
      const double nrm = orthogonal_to_the_others(q, m, cols, keep, j, c);
      if (nrm > most) most = nrm, best = c;
    }
    const double nrm = orthogonal_to_the_others(q, m, cols, keep, j, best);
    cplx *x = COL(q, m, j);
    for (int i = 0; i < m; ++i) x[i] /= nrm;
  }
}

/* The SVD of the m x n col-major A (m >= n) by one-sided Jacobi: w (m x n)
 * becomes U S, v (n x n) V; s descending; u gets m x ucols (ucols n, or m:
 * completed), vt n x n = Vᴴ. */
static void jacobi_tall(const cplx *a, int m, int n, double *s, cplx *u,
                        int ucols, cplx *vh) {
  cplx *w = malloc((size_t)m * (size_t)n * sizeof *w);
  cplx *v = calloc((size_t)n * (size_t)n, sizeof *v);
  int *order = malloc((size_t)n * sizeof *order);
  int *keep = calloc((size_t)(ucols > 0 ? ucols : 1), sizeof *keep);
  if (!w || !v || !order || !keep) abort();
  memcpy(w, a, (size_t)m * (size_t)n * sizeof *w);
  for (int j = 0; j < n; ++j) v[j + (size_t)j * n] = 1.0;
  for (int sweep = 0; sweep < 60; ++sweep) {
    double off = 0.0;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        cplx *wp = COL(w, m, p), *wq = COL(w, m, q);
        double al = col_norm2(wp, m), be = col_norm2(wq, m);
        cplx g = 0.0;
        for (int i = 0; i < m; ++i) g += conj(wp[i]) * wq[i];
        double ag = cabs(g);
        if (ag == 0.0 || ag <= 1e-300 + 1e-17 * sqrt(al * be)) continue;
        if (ag / sqrt(al * be) > off) off = ag / sqrt(al * be);
        cplx ph = conj(g / ag); /* w_q e^{-i phi} */
        double zeta = (be - al) / (2.0 * ag);
        double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
        double c = 1.0 / sqrt(1 + t * t), sn = c * t;
        for (int i = 0; i < m; ++i) {
          cplx x = wp[i], y = wq[i] * ph;
          wp[i] = c * x - sn * y;
          wq[i] = sn * x + c * y;
        }
        cplx *vp = COL(v, n, p), *vq = COL(v, n, q);
        for (int i = 0; i < n; ++i) {
          cplx x = vp[i], y = vq[i] * ph;
          vp[i] = c * x - sn * y;
          vq[i] = sn * x + c * y;
        }
      }
    if (off < 1e-15) break;
  }
  for (int j = 0; j < n; ++j) order[j] = j;
  double *norms = malloc((size_t)n * sizeof *norms);
  if (!norms) abort();
  for (int j = 0; j < n; ++j) norms[j] = sqrt(col_norm2(COL(w, m, j), m));
  for (int i = 1; i < n; ++i) /* insertion sort, descending */
    for (int j = i; j > 0 && norms[order[j]] > norms[order[j - 1]]; --j) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int j = 0; j < n; ++j) {
    const int o = order[j];
    s[j] = norms[o];
    if (u != NULL) {
      keep[j] = s[j] > 1e-300;
      for (int i = 0; i < m; ++i)
        COL(u, m, j)[i] = keep[j] ? COL(w, m, o)[i] / s[j] : 0.0;
    }
    if (vh != NULL)
      for (int i = 0; i < n; ++i) vh[j + (size_t)i * n] = conj(COL(v, n, o)[i]);
  }
  if (u != NULL) complete(u, m, ucols, keep);
  free(norms);
  free(keep);
  free(order);
  free(v);
  free(w);
}

/* gesdd's contract on a matrix of doubles (cplx = 0) or complex doubles. */
static void ref_gesdd(int cplx_type, char *jobz, int *mp, int *np, void *a,
                      int *lda, double *s, void *u, int *ldu, void *vt,
                      int *ldvt, void *work, int *lwork, int *info) {
  const int m = *mp, n = *np, k = m < n ? m : n;
  *info = 0;
  if (*lwork == -1) { /* workspace query: none needed */
    if (cplx_type)
      ((cplx *)work)[0] = 1.0;
    else
      ((double *)work)[0] = 1.0;
    return;
  }
  if (*jobz != 'N' && *jobz != 'S' && *jobz != 'A') {
    *info = -1;
    return;
  }
  const int vectors = *jobz != 'N', full = *jobz == 'A';
  const int ucols = full ? m : k, vrows = full ? n : k;
  if (vectors && (*ldu < m || *ldvt < vrows)) {
    *info = *ldu < m ? -8 : -10;
    return;
  }
  /* A in double complex, column-major m x n. */
  cplx *A = malloc((size_t)m * (size_t)n * sizeof *A);
  if (!A) abort();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      const size_t at = (size_t)i + (size_t)j * (size_t)*lda;
      A[i + (size_t)j * m] =
          cplx_type ? ((cplx *)a)[at] : (cplx)((double *)a)[at];
    }
  cplx *U = calloc((size_t)m * (size_t)m, sizeof *U);
  cplx *VT = calloc((size_t)n * (size_t)n, sizeof *VT);
  if (!U || !VT) abort();
  if (m >= n) {
    jacobi_tall(A, m, n, s, U, full ? m : n, VT);
  } else {
    /* Aᴴ = U2 S V2ᴴ gives A = V2 S U2ᴴ. */
    cplx *AH = malloc((size_t)m * (size_t)n * sizeof *AH);
    cplx *U2 = calloc((size_t)n * (size_t)n, sizeof *U2);
    cplx *V2H = calloc((size_t)m * (size_t)m, sizeof *V2H);
    if (!AH || !U2 || !V2H) abort();
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) AH[j + (size_t)i * n] = conj(A[i + (size_t)j * m]);
    jacobi_tall(AH, n, m, s, U2, full ? n : m, V2H);
    for (int j = 0; j < m; ++j) /* U = V2 = (V2ᴴ)ᴴ */
      for (int i = 0; i < m; ++i) U[i + (size_t)j * m] = conj(V2H[j + (size_t)i * m]);
    for (int j = 0; j < n; ++j) /* VT = U2ᴴ, n x n (its first m rows: k) */
      for (int i = 0; i < n; ++i) VT[i + (size_t)j * n] = conj(U2[j + (size_t)i * n]);
    free(V2H);
    free(U2);
    free(AH);
  }
  /* In the first m >= n case VT is n x n with ld n; in the second too. */
  if (vectors) {
    for (int j = 0; j < ucols; ++j)
      for (int i = 0; i < m; ++i) {
        const size_t at = (size_t)i + (size_t)j * (size_t)*ldu;
        if (cplx_type)
          ((cplx *)u)[at] = U[i + (size_t)j * m];
        else
          ((double *)u)[at] = creal(U[i + (size_t)j * m]);
      }
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < vrows; ++i) {
        const size_t at = (size_t)i + (size_t)j * (size_t)*ldvt;
        if (cplx_type)
          ((cplx *)vt)[at] = VT[i + (size_t)j * n];
        else
          ((double *)vt)[at] = creal(VT[i + (size_t)j * n]);
      }
  }
  free(VT);
  free(U);
  free(A);
}

static void ref_dgesdd(char *jobz, int *m, int *n, void *a, int *lda, void *s,
                       void *u, int *ldu, void *vt, int *ldvt, void *work,
                       int *lwork, int *iwork, int *info) {
  (void)iwork;
  ref_gesdd(0, jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, info);
}

static void ref_zgesdd(char *jobz, int *m, int *n, void *a, int *lda, void *s,
                       void *u, int *ldu, void *vt, int *ldvt, void *work,
                       int *lwork, void *rwork, int *iwork, int *info) {
  (void)iwork, (void)rwork;
  ref_gesdd(1, jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, info);
}

/* A gesdd that never converges: info = 1, outputs garbage. */
static void failing_dgesdd(char *jobz, int *m, int *n, void *a, int *lda,
                           void *s, void *u, int *ldu, void *vt, int *ldvt,
                           void *work, int *lwork, int *iwork, int *info) {
  (void)jobz, (void)m, (void)n, (void)a, (void)lda, (void)u, (void)ldu;
  (void)vt, (void)ldvt, (void)iwork;
  if (*lwork == -1) {
    ((double *)work)[0] = 1.0;
    *info = 0;
    return;
  }
  ((double *)s)[0] = 12345.0;
  *info = 1;
}

static void register_reference_gesdd(void) {
  if (jmg_lapack_register("dgesdd", (void *)ref_dgesdd) != 0 ||
      jmg_lapack_register("zgesdd", (void *)ref_zgesdd) != 0)
    abort();
}

/* ---- matrices with known singular values -----------------------------------*/

/* Each test starts the sequence again (seed_uniform), so that its matrices
 * do not depend on which tests ran before it. */
static uint64_t g_seed;
static void seed_uniform(void) { g_seed = 88172645463325252ULL; }
static double uniform(void) { return test_uniform(&g_seed); }

/* A Householder reflector I - 2 w wᴴ / (wᴴ w), k x k, col-major. */
static cplx *reflector(int k, int complex_entries) {
  cplx *w = malloc((size_t)k * sizeof *w);
  cplx *q = malloc((size_t)k * (size_t)k * sizeof *q);
  if (!w || !q) abort();
  double nn = 0.0;
  for (int i = 0; i < k; ++i) {
    w[i] = uniform() + (complex_entries ? uniform() * I : 0.0);
    nn += creal(w[i] * conj(w[i]));
  }
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < k; ++i)
      q[i + (size_t)j * k] = (i == j ? 1.0 : 0.0) - 2.0 * w[i] * conj(w[j]) / nn;
  free(w);
  return q;
}

/* A = Q1[:, :k] diag(sv) Q2[:, :k]ᴴ, m x n, ROW-major (as a JAX array). */
static cplx *known_matrix(int m, int n, const double *sv, int complex_entries) {
  const int k = m < n ? m : n;
  cplx *q1 = reflector(m, complex_entries), *q2 = reflector(n, complex_entries);
  cplx *a = calloc((size_t)m * (size_t)n, sizeof *a);
  if (!a) abort();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l)
        a[(size_t)i * n + j] +=
            q1[i + (size_t)l * m] * sv[l] * conj(q2[j + (size_t)l * n]);
  free(q1);
  free(q2);
  return a;
}

/* ---- checks -------------------------------------------------------------*/

/* Checks a decomposition of the m x n ROW-major A: s against the known
 * singular values; U (m x uc, row-major) and Vh (vr x n, row-major), when
 * given, orthonormal (UᴴU = I, Vh Vhᴴ = I) and A = U[:, :k] S Vh[:k, :]
 * (or A Vhᴴ = U S with one of them). Writes why and returns 0 on failure. */
static int check_svd(const cplx *a, int m, int n, const double *known,
                     const double *s, const cplx *u, int uc, const cplx *vh,
                     int vr, char *why, size_t len) {
  const int k = m < n ? m : n;
  const double tol = 1e-10;
  for (int l = 0; l < k; ++l)
    if (!(fabs(s[l] - known[l]) < tol * known[0])) {
      snprintf(why, len, "s[%d] = %.17g, expected %.17g", l, s[l], known[l]);
      return 0;
    }
  if (u != NULL)
    for (int p = 0; p < uc; ++p)
      for (int q = 0; q < uc; ++q) {
        cplx d = 0.0;
        for (int i = 0; i < m; ++i) d += conj(u[(size_t)i * uc + p]) * u[(size_t)i * uc + q];
        if (!(cabs(d - (p == q ? 1.0 : 0.0)) < tol)) {
          snprintf(why, len, "(UᴴU)[%d][%d] is off by %g", p, q,
                   cabs(d - (p == q ? 1.0 : 0.0)));
          return 0;
        }
      }
  if (vh != NULL)
    for (int p = 0; p < vr; ++p)
      for (int q = 0; q < vr; ++q) {
        cplx d = 0.0;
        for (int j = 0; j < n; ++j) d += vh[(size_t)p * n + j] * conj(vh[(size_t)q * n + j]);
        if (!(cabs(d - (p == q ? 1.0 : 0.0)) < tol)) {
          snprintf(why, len, "(Vh Vhᴴ)[%d][%d] is off by %g", p, q,
                   cabs(d - (p == q ? 1.0 : 0.0)));
          return 0;
        }
      }
  if (u != NULL && vh != NULL) { /* A = U[:, :k] S Vh[:k, :] */
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        cplx r = -a[(size_t)i * n + j];
        for (int l = 0; l < k; ++l) r += u[(size_t)i * uc + l] * s[l] * vh[(size_t)l * n + j];
        if (!(cabs(r) < tol * known[0])) {
          snprintf(why, len, "(U S Vh - A)[%d][%d] = %g", i, j, cabs(r));
          return 0;
        }
      }
  } else if (vh != NULL) { /* ||A Vhᴴ e_l|| = s_l */
    for (int l = 0; l < k; ++l) {
      double nn = 0.0;
      for (int i = 0; i < m; ++i) {
        cplx x = 0.0;
        for (int j = 0; j < n; ++j) x += a[(size_t)i * n + j] * conj(vh[(size_t)l * n + j]);
        nn += creal(x * conj(x));
      }
      if (!(fabs(sqrt(nn) - s[l]) < tol * known[0])) {
        snprintf(why, len, "|A vh_%d| = %g, expected %g", l, sqrt(nn), s[l]);
        return 0;
      }
    }
  } else if (u != NULL) { /* ||Aᴴ u_l|| = s_l */
    for (int l = 0; l < k; ++l) {
      double nn = 0.0;
      for (int j = 0; j < n; ++j) {
        cplx x = 0.0;
        for (int i = 0; i < m; ++i) x += conj(a[(size_t)i * n + j]) * u[(size_t)i * uc + l];
        nn += creal(x * conj(x));
      }
      if (!(fabs(sqrt(nn) - s[l]) < tol * known[0])) {
        snprintf(why, len, "|Aᴴ u_%d| = %g, expected %g", l, sqrt(nn), s[l]);
        return 0;
      }
    }
  }
  return 1;
}

/* ---- the description -------------------------------------------------------*/

TEST(gesvd_desc_optional_results_move_the_ones_after_them) {
  const jmg_op_desc *op = &jmg_gesvd_op;
  CHECK(op->rows_scalar > 0);
  CHECK_CONTAINS(op->scalars[op->rows_scalar - 1].name, "m");
  /* The buffers: A, S, U, Vh, status. */
  CHECK_EQ(jmg_op_nbuffers(op), 5);
  const jmg_op_buf *s = jmg_op_buffer(op, 1), *u = jmg_op_buffer(op, 2),
                   *vh = jmg_op_buffer(op, 3), *st = jmg_op_buffer(op, 4);
  CHECK_CONTAINS(u->name, "U");
  CHECK_CONTAINS(vh->name, "Vh");
  jmg_io_storage store_;
  memset(&store_, 0, sizeof store_);
  jmg_shard_io *io = &store_.io;
  int64_t *want_u = NULL, *want_vh = NULL;
  for (int i = 0; i < op->nscalars; ++i) {
    if (strcmp(op->scalars[i].name, "want_u") == 0)
      want_u = jmg_op_scalar_slot(&op->scalars[i], io);
    if (strcmp(op->scalars[i].name, "want_vh") == 0)
      want_vh = jmg_op_scalar_slot(&op->scalars[i], io);
  }
  CHECK(want_u != NULL && want_vh != NULL);
  static const struct {
    int u, vh, nrets, s_at, u_at, vh_at;
  } cases[] = {
      {1, 1, 5, 1, 2, 3}, /* A, S, U, Vh, status */
      {0, 1, 4, 1, -1, 2}, /* A, S, Vh, status */
      {1, 0, 4, 1, 2, -1}, /* A, S, U, status */
      {0, 0, 3, 1, -1, -1}, /* A, S, status */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    *want_u = cases[c].u;
    *want_vh = cases[c].vh;
    CHECK_EQ(jmg_op_nrets_in(op, io), cases[c].nrets);
    CHECK_EQ(jmg_op_ret_index(op, s, io), cases[c].s_at);
    if (cases[c].u) CHECK_EQ(jmg_op_ret_index(op, u, io), cases[c].u_at);
    if (cases[c].vh) CHECK_EQ(jmg_op_ret_index(op, vh, io), cases[c].vh_at);
    CHECK_EQ(jmg_op_ret_index(op, st, io), cases[c].nrets - 1);
    CHECK_EQ(jmg_op_buf_present(op, u, io), cases[c].u);
    CHECK_EQ(jmg_op_buf_present(op, vh, io), cases[c].vh);
  }
}

TEST(gesvd_desc_rows_of_a_rectangular_a_make_the_group) {
  const jmg_op_desc *op = &jmg_gesvd_op;
  jmg_io_storage st;
  memset(&st, 0, sizeof st);
  jmg_shard_io *io = &st.io;
  int64_t *m = jmg_op_scalar_slot(&op->scalars[op->rows_scalar - 1], io);
  double a = 0, s = 0;
  int32_t status = 0;
  io->dtype = JMG_F64;
  io->n = 5; /* A is 12 x 5: shards of 3 rows on 4 devices */
  io->local_cols = 3;
  io->tile = 1;
  *m = 12;
  io->a = &a;
  io->status = &status;
  *jmg_op_buf_slot(jmg_op_buffer(op, 1), io) = &s;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_op_rows(op, io), 12);
  CHECK_EQ(jmg_op_check_local(op, io, 4, &err), 0);
  CHECK_EQ(jmg_op_check_local(op, io, 3, &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "A's rows M=12");
  /* A square op's rows are n. */
  CHECK_EQ(jmg_op_rows(&jmg_potri_op, io), 5);
}

/* ---- the LAPACK routine over several host devices -------------------------*/

/* The routine on M = the n x c col-major matrix that `a_rows` (c x n,
 * row-major) is, split over ndev devices; checks the SVD of a_rows itself
 * through the transposes (ops/gesvd.c), as the op does. */
static void check_lapack(jmg_dtype t, int ndev, int m, int n, int full,
                         int want_u, int want_vh) {
  const int k = m < n ? m : n;
  const size_t es = jmg_dtype_size(t);
  double *known = malloc((size_t)k * sizeof *known);
  if (!known) abort();
  for (int l = 0; l < k; ++l) known[l] = 10.0 - 9.0 * l / (k > 1 ? k - 1 : 1);
  cplx *A = known_matrix(m, n, known, t == JMG_C128);
  const int lc = m / ndev, uc = full ? m : k, vr = full ? n : k;
  void *shards[8], *ush[8], *vsh[8], *ctx[8] = {0};
  for (int d = 0; d < ndev; ++d) {
    shards[d] = malloc((size_t)lc * n * es);
    ush[d] = malloc((size_t)lc * uc * es);
    vsh[d] = malloc((size_t)(vr / ndev) * n * es);
    if (!shards[d] || !ush[d] || !vsh[d]) abort();
    for (size_t i = 0; i < (size_t)lc * n; ++i)
      ref_store(t, shards[d], i, A[(size_t)d * lc * n + i]);
  }
  jmg_dist_matrix a = {.ndev = ndev, .n = n, .tile = lc, .local_cols = lc,
                       .dtype = t, .data = shards, .device_ctx = ctx};
  /* A's Vh is the engine's U_M (n rows), A's U its Vh_M (uc rows). */
  jmg_dist_matrix um = a, vm = a;
  um.data = vsh;
  um.local_cols = vr / ndev;
  vm.data = ush;
  vm.n = uc;
  double *s = malloc((size_t)k * sizeof *s);
  if (!s) abort();
  int info = -1;
  jmg_error err;
  jmg_error_clear(&err);
  int rc = jmg_lapack_gesvd(NULL, &a, s, want_vh ? &um : NULL,
                            want_u ? &vm : NULL, full, &info, &err);
  char why[512] = "";
  cplx *U = malloc((size_t)m * uc * sizeof *U), *V = malloc((size_t)vr * n * sizeof *V);
  if (!U || !V) abort();
  for (int d = 0; d < ndev; ++d) {
    for (size_t i = 0; i < (size_t)lc * uc; ++i)
      U[(size_t)d * lc * uc + i] = ref_load(t, ush[d], i);
    for (size_t i = 0; i < (size_t)(vr / ndev) * n; ++i)
      V[(size_t)d * (vr / ndev) * n + i] = ref_load(t, vsh[d], i);
  }
  if (rc != 0)
    snprintf(why, sizeof why, "failed: %s", err.msg);
  else if (info != 0)
    snprintf(why, sizeof why, "info %d", info);
  else
    check_svd(A, m, n, known, s, want_u ? U : NULL, uc, want_vh ? V : NULL, vr,
              why, sizeof why);
  for (int d = 0; d < ndev; ++d) {
    free(shards[d]);
    free(ush[d]);
    free(vsh[d]);
  }
  free(U);
  free(V);
  free(s);
  free(A);
  free(known);
  if (why[0])
    TEST_FAIL_AT("lapack gesvd %s on %d devices, %d x %d, full=%d u=%d vh=%d: %s",
                 jmg_dtype_name(t), ndev, m, n, full, want_u, want_vh, why);
}

TEST(gesvd_lapack_routine_decomposes_known_matrices) {
  seed_uniform();
  register_reference_gesdd();
  static const struct {
    int ndev, m, n;
  } shapes[] = {{1, 5, 5}, {2, 8, 4}, {3, 6, 9}, {4, 4, 4}, {2, 4, 7}, {4, 12, 3}};
  static const jmg_dtype types[] = {JMG_F64, JMG_C128};
  for (size_t t = 0; t < 2; ++t)
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; ++c)
      for (int full = 0; full < 2; ++full)
        for (int sel = 0; sel < 4; ++sel) {
          const int m = shapes[c].m, n = shapes[c].n, k = m < n ? m : n;
          const int vr = full ? n : k;
          if (vr % shapes[c].ndev != 0) continue; /* Vh could not be sharded */
          check_lapack(types[t], shapes[c].ndev, m, n, full, sel & 1, sel >> 1);
          if (jmg_test_failed) return;
        }
}

TEST(gesvd_lapack_refuses_outputs_of_the_wrong_shape) {
  seed_uniform();
  register_reference_gesdd();
  double a0[6] = {1, 2, 3, 4, 5, 6}, u0[9], s[2];
  void *ad[1] = {a0}, *ud[1] = {u0}, *ctx[1] = {0};
  /* M is 2 x 3; its U (reduced) is 2 x 2: a 3-column U is wrong. */
  jmg_dist_matrix a = {.ndev = 1, .n = 2, .tile = 3, .local_cols = 3,
                       .dtype = JMG_F64, .data = ad, .device_ctx = ctx};
  jmg_dist_matrix u = {.ndev = 1, .n = 2, .tile = 3, .local_cols = 3,
                       .dtype = JMG_F64, .data = ud, .device_ctx = ctx};
  int info = 0;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_lapack_gesvd(NULL, &a, s, &u, NULL, 0, &info, &err),
           -JMG_EINTERNAL);
  CHECK_CONTAINS(err.msg, "2 x 3");
}

/* ---- the op's leader steps over several shards ------------------------------*/

/* One participant's post: the op's io, filled through its description. */
typedef struct post {
  jmg_io_storage io;
  void *a, *s, *u, *vh;
  int32_t status;
} post;

static void set_scalar(post *p, const char *name, int64_t value) {
  *op_scalar_named(&jmg_gesvd_op, &p->io.io, name) = value;
}

/* Runs gesvd's leader steps with the LAPACK engine over ndev shards of the
 * m x n row-major A (in dtype t); fills the posts. */
static void run_op(post *p, int ndev, jmg_dtype t, const cplx *A, int m, int n,
                   int full, int want_u, int want_vh, jmg_error *err, int *rc) {
  const jmg_op_desc *op = &jmg_gesvd_op;
  const size_t es = jmg_dtype_size(t);
  const int k = m < n ? m : n, lc = m / ndev;
  const int uc = full ? m : k, vr = (full ? n : k) / ndev;
  void *posts[8];
  for (int d = 0; d < ndev; ++d) {
    memset(&p[d], 0, sizeof p[d]);
    jmg_shard_io *io = &p[d].io.io;
    p[d].a = malloc((size_t)lc * n * es);
    p[d].s = malloc((size_t)k * jmg_dtype_real_size(t));
    p[d].u = want_u ? malloc((size_t)lc * uc * es) : NULL;
    p[d].vh = want_vh ? malloc((size_t)vr * n * es) : NULL;
    if (!p[d].a || !p[d].s || (want_u && !p[d].u) || (want_vh && !p[d].vh)) abort();
    for (size_t i = 0; i < (size_t)lc * n; ++i)
      ref_store(t, p[d].a, i, A[(size_t)d * lc * n + i]);
    host_shard_io_init(io, t, n, lc, 1, p[d].a, &p[d].status);
    set_scalar(&p[d], "m", m);
    set_scalar(&p[d], "want_u", want_u);
    set_scalar(&p[d], "want_vh", want_vh);
    set_scalar(&p[d], "full_matrices", full);
    set_scalar(&p[d], "k", k);
    set_scalar(&p[d], "u_cols", want_u ? uc : 0);
    set_scalar(&p[d], "vh_rows", want_vh ? vr : 0);
    *jmg_op_buf_slot(jmg_op_buffer(op, 1), io) = p[d].s;
    *jmg_op_buf_slot(jmg_op_buffer(op, 2), io) = p[d].u;
    *jmg_op_buf_slot(jmg_op_buffer(op, 3), io) = p[d].vh;
    posts[d] = io;
  }
  *rc = host_leader_run(op, posts, ndev, err);
}

static void free_posts(post *p, int ndev) {
  for (int d = 0; d < ndev; ++d) {
    free(p[d].a);
    free(p[d].s);
    free(p[d].u);
    free(p[d].vh);
  }
}

static void check_op(jmg_dtype t, int ndev, int m, int n, int full, int want_u,
                     int want_vh) {
  const int k = m < n ? m : n, lc = m / ndev;
  const int uc = full ? m : k, vr = full ? n : k;
  double *known = malloc((size_t)k * sizeof *known);
  if (!known) abort();
  for (int l = 0; l < k; ++l) known[l] = 3.0 + 0.5 * (k - l) * (k - l);
  cplx *A = known_matrix(m, n, known, t == JMG_C128);
  post p[8];
  jmg_error err;
  int rc = 0;
  run_op(p, ndev, t, A, m, n, full, want_u, want_vh, &err, &rc);
  char why[512] = "";
  cplx *U = malloc((size_t)m * uc * sizeof *U), *V = malloc((size_t)vr * n * sizeof *V);
  double *s = malloc((size_t)k * sizeof *s);
  if (!U || !V || !s) abort();
  for (int d = 0; rc == 0 && d < ndev; ++d) {
    for (size_t i = 0; want_u && i < (size_t)lc * uc; ++i)
      U[(size_t)d * lc * uc + i] = ref_load(t, p[d].u, i);
    for (size_t i = 0; want_vh && i < (size_t)(vr / ndev) * n; ++i)
      V[(size_t)d * (vr / ndev) * n + i] = ref_load(t, p[d].vh, i);
    if (p[d].status != 0 && !why[0])
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)p[d].status);
    if (memcmp(p[d].s, p[0].s, (size_t)k * sizeof(double)) && !why[0])
      snprintf(why, sizeof why, "shard %d's S differs from shard 0's", d);
  }
  if (rc != 0)
    snprintf(why, sizeof why, "failed: %s", err.msg);
  else if (!why[0]) {
    memcpy(s, p[0].s, (size_t)k * sizeof *s);
    check_svd(A, m, n, known, s, want_u ? U : NULL, uc, want_vh ? V : NULL, vr,
              why, sizeof why);
  }
  free_posts(p, ndev);
  free(U);
  free(V);
  free(s);
  free(A);
  free(known);
  if (why[0])
    TEST_FAIL_AT("gesvd op %s over %d shards, %d x %d, full=%d u=%d vh=%d: %s",
                 jmg_dtype_name(t), ndev, m, n, full, want_u, want_vh, why);
}

TEST(gesvd_op_over_shards_gives_every_output_in_a_rows_layout) {
  seed_uniform();
  register_reference_gesdd();
  static const struct {
    int ndev, m, n, full;
  } cases[] = {{1, 3, 5, 1}, {2, 6, 4, 0}, {2, 6, 4, 1}, {4, 8, 12, 0},
               {4, 8, 12, 1}, {3, 9, 9, 0}, {4, 16, 4, 0}};
  static const jmg_dtype types[] = {JMG_F64, JMG_C128};
  for (size_t t = 0; t < 2; ++t)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
      for (int sel = 0; sel < 4; ++sel) {
        check_op(types[t], cases[c].ndev, cases[c].m, cases[c].n, cases[c].full,
                 sel & 1, sel >> 1);
        if (jmg_test_failed) return;
      }
}

TEST(gesvd_op_failed_decomposition_gives_status_and_nan) {
  seed_uniform();
  if (jmg_lapack_register("dgesdd", (void *)failing_dgesdd) != 0) abort();
  enum { P = 2, M = 4, N = 6 };
  const double known[M] = {4, 3, 2, 1};
  cplx *A = known_matrix(M, N, known, 0);
  post p[P];
  jmg_error err;
  int rc = 0;
  run_op(p, P, JMG_F64, A, M, N, 0, 1, 1, &err, &rc);
  char why[600] = "";
  for (int d = 0; d < P && !why[0]; ++d) {
    if (rc != 0)
      snprintf(why, sizeof why, "failed: %s", err.msg);
    else if (p[d].status != 1)
      snprintf(why, sizeof why, "shard %d: status %d", d, (int)p[d].status);
    for (int i = 0; i < M && !why[0]; ++i)
      if (!isnan(((double *)p[d].s)[i]))
        snprintf(why, sizeof why, "shard %d: S[%d] is not NaN", d, i);
    for (int i = 0; i < (M / P) * M && !why[0]; ++i)
      if (!isnan(((double *)p[d].u)[i]))
        snprintf(why, sizeof why, "shard %d: U[%d] is not NaN", d, i);
    for (int i = 0; i < (M / P) * N && !why[0]; ++i)
      if (!isnan(((double *)p[d].vh)[i]))
        snprintf(why, sizeof why, "shard %d: Vh[%d] is not NaN", d, i);
  }
  free_posts(p, P);
  free(A);
  register_reference_gesdd();
  if (why[0]) TEST_FAIL_AT("%s", why);
}

TEST(gesvd_op_outputs_of_the_wrong_shape_are_an_error) {
  seed_uniform();
  register_reference_gesdd();
  enum { P = 2, M = 4, N = 6 };
  const double known[M] = {4, 3, 2, 1};
  cplx *A = known_matrix(M, N, known, 0);
  post p[P];
  jmg_error err;
  int rc = 0;
  /* The posts say reduced shapes (Vh 4 x 6), then ask for full matrices
   * (Vh 6 x 6). */
  run_op(p, P, JMG_F64, A, M, N, 0, 1, 1, &err, &rc);
  const jmg_op_desc *op = &jmg_gesvd_op;
  void *posts[P];
  for (int d = 0; d < P; ++d) {
    set_scalar(&p[d], "full_matrices", 1);
    posts[d] = &p[d].io.io;
  }
  jmg_op_call call;
  host_leader_call(&call, op);
  jmg_error_clear(&err);
  const int first_rc = rc;
  rc = jmg_leader_run(&call, posts, P, &err);
  free_posts(p, P);
  free(A);
  CHECK_EQ(first_rc, 0);
  CHECK_EQ(rc, -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "Vh's shards of 2 rows over 2 devices do not make its 6 rows");
}
