/* Each op's cuSOLVERMg call sequence, as jaxmg's engine makes it
 * (csrc/engine/cusolvermg/), and its check.
 *
 *   potrs     potrf, then potrs in calls of at most 2048 right-hand sides
 *             (cuSOLVERMg 13.0 is wrong past 2048 in one call), B one column
 *             tile on the first GPU; a wait for every GPU after each call.
 *   potri     jaxmg's inverse: potrf, then for every device's column slab of
 *             the identity, potrs on it (in calls of 2048) on the first GPU
 *             and a copy to the slab's GPU; then the slabs into A.
 *   potri_mg  cusolverMgPotri itself (potrf + potri), for reference: wrong
 *             past row 2048 on several GPUs in 13.0 (docs/gpu-notes.md), and
 *             its check says so.
 *   syevd     cusolverMgSyevd with eigenvectors.
 *
 * Workspaces are taken once per case, before the timed runs (jaxmg takes
 * them from XLA's allocator in every call): the ceiling owns its memory.
 *
 * Checks (the value printed as `residual`; the tolerance is main.c's):
 *   potrs     ||x - x_true|| / ||x_true||, where b = A x_true was computed
 *             from the untouched copy of A before the solve;
 *   potri*    ||X (A v) - v|| / ||v|| for a random v: every entry of X takes
 *             part (X both triangles for potri; potri_mg's lower triangle is
 *             mirrored first, as LAPACK's convention leaves it);
 *   syevd     the largest of ||A V c - V (w c)|| / (max|w| ||c||),
 *             ||V^H V c - c|| / ||c|| (c random: all eigenpairs at once) and
 *             |sum(w) - trace(A)| / (N max|w|); inf if w is not ascending.
 * A has condition number about 5 (dist.c), so these relative errors are a
 * small multiple of the unit roundoff times a power of N when right. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ceiling.h"

/* cuSOLVERMg 13.0's potrs is wrong past 2048 right-hand sides in one call
 * (jaxmg's MG_MAX_RHS_CHUNK). */
#define MAX_RHS_CHUNK 2048

static const char *const g_op_names[] = {
    [OP_POTRS] = "potrs",
    [OP_POTRI] = "potri",
    [OP_POTRI_MG] = "potri_mg",
    [OP_SYEVD] = "syevd",
};

const char *op_name(op_t op) { return g_op_names[op]; }

int op_parse(const char *s, op_t *out) {
  for (size_t i = 0; i < sizeof g_op_names / sizeof g_op_names[0]; ++i)
    if (strcmp(s, g_op_names[i]) == 0) {
      *out = (op_t)i;
      return 0;
    }
  return -1;
}

static size_t esize(const op_case *k) { return dtype_of(k->dt)->size; }

static cudaDataType ctype(const op_case *k) { return dtype_of(k->dt)->type; }

static int check_info(int info, const char *call) {
  if (info == 0) return 0;
  fprintf(stderr, "ceiling: %s returned info = %d\n", call, info);
  return -1;
}

static int alloc_each(const ctx_t *c, void **p, size_t bytes) {
  for (int d = 0; d < c->ndev; ++d) {
    if (CUDA(cudaSetDevice(c->dev[d]))) return -1;
    if (CUDA(cudaMalloc(&p[d], bytes ? bytes : 1))) return -1;
  }
  return 0;
}

static void free_each(const ctx_t *c, void **p) {
  for (int d = 0; d < c->ndev; ++d)
    if (p[d] != NULL) {
      (void)CUDA(cudaSetDevice(c->dev[d]));
      (void)CUDA(cudaFree(p[d]));
      p[d] = NULL;
    }
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Right-hand sides per potrs call, the descriptors of B's calls (one column
 * tile on the first GPU) and potrs's workspace for them. */
static int rhs_plan(op_case *k, int64_t nrhs, void *const *b, int64_t *lwork) {
  ctx_t *c = k->ctx;
  k->chunk = nrhs < MAX_RHS_CHUNK ? nrhs : MAX_RHS_CHUNK;
  k->rest = nrhs % k->chunk;
  if (SOLVER(cusolverMgCreateMatrixDesc(&k->desc_b, k->n, k->chunk, k->n,
                                        k->chunk, ctype(k), c->grid)))
    return -1;
  if (k->rest > 0 &&
      SOLVER(cusolverMgCreateMatrixDesc(&k->desc_b_rest, k->n, k->rest, k->n,
                                        k->rest, ctype(k), c->grid)))
    return -1;
  void *bp[CEIL_MAX_DEVICES];
  for (int d = 0; d < c->ndev; ++d) bp[d] = b[d];
  if (CUDA(cudaSetDevice(c->dev[0]))) return -1;
  return SOLVER(cusolverMgPotrs_bufferSize(
      c->mg, CUBLAS_FILL_MODE_LOWER, (int)k->n, (int)k->chunk, k->a.p, 1, 1,
      k->desc_a, bp, 1, 1, k->desc_b, ctype(k), lwork));
}

int op_setup(op_case *k) {
  ctx_t *c = k->ctx;
  const int G = c->ndev;
  const dtype_info *ti = dtype_of(k->dt);
  if (k->n > INT_MAX || k->tile < 1 || k->n % ((int64_t)G * k->tile) != 0) {
    fprintf(stderr,
            "ceiling: N=%lld must be a multiple of GPUs x T_A = %d x %lld "
            "(and at most %d)\n",
            (long long)k->n, G, (long long)k->tile, INT_MAX);
    return -1;
  }
  if (dmat_alloc(c, &k->a, k->dt, k->n, k->tile) ||
      dmat_alloc(c, &k->a0, k->dt, k->n, k->tile) ||
      dmat_random_hpd(c, &k->a0, &k->shift))
    return -1;
  if (SOLVER(cusolverMgCreateMatrixDesc(&k->desc_a, k->n, k->n, k->n, k->tile,
                                        ctype(k), c->grid)))
    return -1;
  if (CUDA(cudaSetDevice(c->dev[0]))) return -1;
  int64_t lw_f = 0, lw_s = 0;
  const int n = (int)k->n;
  if (k->op != OP_SYEVD && SOLVER(cusolverMgPotrf_bufferSize(
                               c->mg, CUBLAS_FILL_MODE_LOWER, n, k->a.p, 1, 1,
                               k->desc_a, ctype(k), &lw_f)))
    return -1;
  const size_t nd = ti->complex ? 2 : 1;
  switch (k->op) {
    case OP_POTRS: {
      const size_t count = (size_t)k->n * (size_t)k->nrhs;
      if (alloc_each(c, k->b, count * esize(k)) ||
          rhs_plan(k, k->nrhs, k->b, &lw_s))
        return -1;
      k->xtrue = malloc(count * nd * sizeof(double));
      k->b0 = malloc(count * nd * sizeof(double));
      if (k->xtrue == NULL || k->b0 == NULL) {
        fprintf(stderr, "ceiling: out of host memory\n");
        return -1;
      }
      host_random(k->xtrue, count * nd, &k->host_rng);
      /* b = A x_true, column by column, from the untouched matrix. */
      for (int64_t j = 0; j < k->nrhs; ++j)
        if (dmat_gemv(c, &k->a0, LAYOUT_CYCLIC, 0,
                      k->xtrue + (size_t)j * (size_t)k->n * nd,
                      k->b0 + (size_t)j * (size_t)k->n * nd))
          return -1;
      break;
    }
    case OP_POTRI: {
      const size_t r = (size_t)k->a.cols;
      if (alloc_each(c, k->x, (size_t)k->n * r * esize(k)) ||
          rhs_plan(k, (int64_t)r, k->x, &lw_s))
        return -1;
      k->ones = calloc(r, esize(k));
      if (k->ones == NULL) {
        fprintf(stderr, "ceiling: out of host memory\n");
        return -1;
      }
      for (size_t i = 0; i < r; ++i) {
        /* 1 in the element type: its first real component. */
        if (ti->real_type == CUDA_R_32F) {
          const float one = 1.0f;
          memcpy((char *)k->ones + i * esize(k), &one, sizeof one);
        } else {
          const double one = 1.0;
          memcpy((char *)k->ones + i * esize(k), &one, sizeof one);
        }
      }
      break;
    }
    case OP_POTRI_MG:
      if (SOLVER(cusolverMgPotri_bufferSize(c->mg, CUBLAS_FILL_MODE_LOWER, n,
                                            k->a.p, 1, 1, k->desc_a, ctype(k),
                                            &lw_s)))
        return -1;
      break;
    case OP_SYEVD:
      k->w = malloc((size_t)k->n * (ti->real_type == CUDA_R_32F ? 4 : 8));
      if (k->w == NULL) {
        fprintf(stderr, "ceiling: out of host memory\n");
        return -1;
      }
      if (SOLVER(cusolverMgSyevd_bufferSize(
              c->mg, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
              k->a.p, 1, 1, k->desc_a, k->w, ti->real_type, ctype(k), &lw_s)))
        return -1;
      break;
  }
  k->lwork = max64(max64(lw_f, lw_s), 1);
  return alloc_each(c, k->work, (size_t)k->lwork * esize(k));
}

int op_prepare(op_case *k) {
  if (dmat_copy(k->ctx, &k->a, &k->a0)) return -1;
  if (k->op == OP_POTRS &&
      host_to_device(k->dt, k->b0, (size_t)k->n * (size_t)k->nrhs, k->b[0]))
    return -1;
  return sync_all(k->ctx);
}

/* cuSOLVERMg reports a matrix that is not positive definite as a failed
 * status with info > 0: ours are, so that is an error here too. */
static int factor(op_case *k) {
  ctx_t *c = k->ctx;
  int info = 0;
  if (CUDA(cudaSetDevice(c->dev[0]))) return -1;
  cusolverStatus_t s =
      cusolverMgPotrf(c->mg, CUBLAS_FILL_MODE_LOWER, (int)k->n, k->a.p, 1, 1,
                      k->desc_a, ctype(k), k->work, k->lwork, &info);
  if (check_solver(s, "cusolverMgPotrf")) {
    if (info > 0)
      fprintf(stderr, "ceiling: not positive definite at minor %d\n", info);
    return -1;
  }
  if (sync_all(c)) return -1;
  return check_info(info, "cusolverMgPotrf");
}

/* Solves A X = B, B n x nrhs on the first GPU, in calls of k->chunk columns;
 * other[d] are valid buffers on every GPU (cuSOLVERMg wants a B pointer on
 * each). */
static int solve_chunked(op_case *k, char *b, int64_t nrhs,
                         void *const *other) {
  ctx_t *c = k->ctx;
  void *bp[CEIL_MAX_DEVICES];
  for (int d = 0; d < c->ndev; ++d) bp[d] = other[d];
  for (int64_t j = 0; j < nrhs; j += k->chunk) {
    const int64_t m = nrhs - j < k->chunk ? nrhs - j : k->chunk;
    int info = 0;
    bp[0] = b + (size_t)j * (size_t)k->n * esize(k);
    if (SOLVER(cusolverMgPotrs(c->mg, CUBLAS_FILL_MODE_LOWER, (int)k->n, (int)m,
                               k->a.p, 1, 1, k->desc_a, bp, 1, 1,
                               m == k->chunk ? k->desc_b : k->desc_b_rest,
                               ctype(k), k->work, k->lwork, &info)))
      return -1;
    if (sync_all(c) || check_info(info, "cusolverMgPotrs")) return -1;
  }
  return 0;
}

static int run_potri(op_case *k) {
  ctx_t *c = k->ctx;
  const int G = c->ndev;
  const size_t es = esize(k), r = (size_t)k->a.cols;
  const size_t shard = (size_t)k->n * r * es;
  if (factor(k)) return -1;
  /* Slabs 1, 2, ..., G-1, then 0 (solved in place on the first GPU). */
  for (int j = 1; j <= G; ++j) {
    const int d = j % G;
    if (CUDA(cudaSetDevice(c->dev[0])) ||
        CUDA(cudaMemsetAsync(k->x[0], 0, shard, 0)) ||
        CUDA(cudaMemcpy2DAsync((char *)k->x[0] + (size_t)d * r * es,
                               ((size_t)k->n + 1) * es, k->ones, es, es, r,
                               cudaMemcpyHostToDevice, 0)) ||
        CUDA(cudaStreamSynchronize(0)) ||
        solve_chunked(k, k->x[0], (int64_t)r, k->x))
      return -1;
    if (d != 0 && CUDA(cudaMemcpyPeerAsync(k->x[d], c->dev[d], k->x[0],
                                           c->dev[0], shard, 0)))
      return -1;
    if (CUDA(cudaStreamSynchronize(0))) return -1;
  }
  for (int d = 0; d < G; ++d)
    if (CUDA(cudaSetDevice(c->dev[d])) ||
        CUDA(cudaMemcpyAsync(k->a.p[d], k->x[d], shard,
                             cudaMemcpyDeviceToDevice, 0)))
      return -1;
  return sync_all(c);
}

int op_run(op_case *k) {
  ctx_t *c = k->ctx;
  int info = 0;
  switch (k->op) {
    case OP_POTRS:
      if (factor(k)) return -1;
      return solve_chunked(k, k->b[0], k->nrhs, k->b);
    case OP_POTRI:
      return run_potri(k);
    case OP_POTRI_MG:
      if (factor(k) || CUDA(cudaSetDevice(c->dev[0])) ||
          SOLVER(cusolverMgPotri(c->mg, CUBLAS_FILL_MODE_LOWER, (int)k->n,
                                 k->a.p, 1, 1, k->desc_a, ctype(k), k->work,
                                 k->lwork, &info)) ||
          sync_all(c))
        return -1;
      return check_info(info, "cusolverMgPotri");
    case OP_SYEVD:
      if (CUDA(cudaSetDevice(c->dev[0])) ||
          SOLVER(cusolverMgSyevd(c->mg, CUSOLVER_EIG_MODE_VECTOR,
                                 CUBLAS_FILL_MODE_LOWER, (int)k->n, k->a.p, 1,
                                 1, k->desc_a, k->w, dtype_of(k->dt)->real_type,
                                 ctype(k), k->work, k->lwork, &info)) ||
          sync_all(c))
        return -1;
      return check_info(info, "cusolverMgSyevd");
  }
  return -1;
}

/* Host scratch vectors of n elements for the checks, freed together. */
typedef struct vecs {
  double *v[6];
} vecs;

static int vecs_alloc(vecs *s, size_t doubles) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < 6; ++i) {
    s->v[i] = malloc(doubles * sizeof(double));
    if (s->v[i] == NULL) {
      fprintf(stderr, "ceiling: out of host memory\n");
      return -1;
    }
  }
  return 0;
}

static void vecs_free(vecs *s) {
  for (int i = 0; i < 6; ++i) free(s->v[i]);
}

static int check_potrs(op_case *k, double *res) {
  const size_t nd = dtype_of(k->dt)->complex ? 2 : 1;
  const size_t count = (size_t)k->n * (size_t)k->nrhs;
  double *x = malloc(count * nd * sizeof *x);
  if (x == NULL) {
    fprintf(stderr, "ceiling: out of host memory\n");
    return -1;
  }
  int rc = device_to_host(k->dt, k->b[0], count, x);
  if (rc == 0)
    *res = host_diff_norm(x, k->xtrue, count * nd) /
           host_norm(k->xtrue, count * nd);
  free(x);
  return rc;
}

static int check_potri(op_case *k, layout_t layout, double *res) {
  const size_t nd = dtype_of(k->dt)->complex ? 2 : 1, len = (size_t)k->n * nd;
  vecs s;
  int rc = vecs_alloc(&s, len);
  double *v = s.v[0], *y = s.v[1], *z = s.v[2];
  if (rc == 0) {
    host_random(v, len, &k->host_rng);
    rc = dmat_gemv(k->ctx, &k->a0, LAYOUT_CYCLIC, 0, v, y);
  }
  if (rc == 0) rc = dmat_gemv(k->ctx, &k->a, layout, 0, y, z);
  if (rc == 0) *res = host_diff_norm(z, v, len) / host_norm(v, len);
  vecs_free(&s);
  return rc;
}

/* The larger of a and b, NaN when either is (fmax drops a NaN). */
static double worst(double a, double b) {
  return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
}

static int check_syevd(op_case *k, double *res) {
  const dtype_info *ti = dtype_of(k->dt);
  const size_t n = (size_t)k->n, nd = ti->complex ? 2 : 1, len = n * nd;
  vecs s;
  if (vecs_alloc(&s, len)) {
    vecs_free(&s);
    return -1;
  }
  double *w = s.v[0], *cv = s.v[1], *y1 = s.v[2], *y2 = s.v[3], *y3 = s.v[4],
         *wc = s.v[5];
  double wmax = 0.0, wsum = 0.0;
  int ascending = 1;
  for (size_t i = 0; i < n; ++i) {
    w[i] = ti->real_type == CUDA_R_32F ? ((const float *)k->w)[i]
                                       : ((const double *)k->w)[i];
    wmax = fmax(wmax, fabs(w[i]));
    wsum += w[i];
    if (i > 0 && w[i] < w[i - 1]) ascending = 0;
  }
  host_random(cv, len, &k->host_rng);
  for (size_t i = 0; i < len; ++i) wc[i] = w[i / nd] * cv[i];
  const ctx_t *c = k->ctx;
  int rc = dmat_gemv(c, &k->a, LAYOUT_CYCLIC, 0, cv, y1);           /* V c */
  if (rc == 0) rc = dmat_gemv(c, &k->a0, LAYOUT_CYCLIC, 0, y1, y2); /* A V c */
  if (rc == 0) rc = dmat_gemv(c, &k->a, LAYOUT_CYCLIC, 0, wc, y3);  /* V w c */
  const double r1 =
      rc == 0 ? host_diff_norm(y2, y3, len) / (wmax * host_norm(cv, len)) : 0;
  if (rc == 0) rc = dmat_gemv(c, &k->a, LAYOUT_CYCLIC, 1, y1, y2); /* V^H V c */
  if (rc == 0) {
    const double r2 = host_diff_norm(y2, cv, len) / host_norm(cv, len);
    const double r3 = fabs(wsum - (double)n * k->shift) / ((double)n * wmax);
    *res = ascending ? worst(r1, worst(r2, r3)) : INFINITY;
    if (!ascending) fprintf(stderr, "ceiling: eigenvalues not ascending\n");
  }
  vecs_free(&s);
  return rc;
}

int op_check(op_case *k, double *residual) {
  *residual = NAN;
  switch (k->op) {
    case OP_POTRS:
      return check_potrs(k, residual);
    case OP_POTRI:
      return check_potri(k, LAYOUT_CONTIG, residual);
    case OP_POTRI_MG:
      /* LAPACK's convention: the inverse in the lower triangle only. */
      if (dmat_mirror_lower(k->ctx, &k->a)) return -1;
      return check_potri(k, LAYOUT_CYCLIC, residual);
    case OP_SYEVD:
      return check_syevd(k, residual);
  }
  return -1;
}

void op_free(op_case *k) {
  ctx_t *c = k->ctx;
  (void)sync_all(c);
  free_each(c, k->work);
  free_each(c, k->b);
  free_each(c, k->x);
  dmat_free(c, &k->a);
  dmat_free(c, &k->a0);
  if (k->desc_a) (void)SOLVER(cusolverMgDestroyMatrixDesc(k->desc_a));
  if (k->desc_b) (void)SOLVER(cusolverMgDestroyMatrixDesc(k->desc_b));
  if (k->desc_b_rest) (void)SOLVER(cusolverMgDestroyMatrixDesc(k->desc_b_rest));
  k->desc_a = k->desc_b = k->desc_b_rest = NULL;
  free(k->ones);
  free(k->b0);
  free(k->xtrue);
  free(k->w);
  k->ones = k->w = NULL;
  k->b0 = k->xtrue = NULL;
}
