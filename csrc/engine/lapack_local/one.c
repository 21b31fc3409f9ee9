/* LAPACK on one device's whole matrix, in place: the one-device engine
 * lapack-local runs on rank 0's gathered matrix (engine.h's on_rank0;
 * engine/local_gather/). The LAPACK engine's own leader routines gather
 * the shards into a copy first; on the gathered matrix that copy would be
 * a third n x n on rank 0, so these call the same LAPACK work (lapack.h,
 * the *_full functions) on the view's one buffer. */
#include "engine/lapack/lapack.h"
#include "engine/lapack/mixed.h"
#include "engine/lapack_local/lapack_local.h"

static int one_potrs(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                     int64_t nrhs, void *diag, int *info, jmg_error *err) {
  (void)e;
  return jmg_lapack_potrs_full(a->dtype, a->n, a->data[0], b, nrhs, diag,
                               info, err);
}

static int one_potri(const jmg_engine *e, const jmg_dist_matrix *a, int *info,
                     jmg_error *err) {
  (void)e;
  return jmg_lapack_potri_full(a->dtype, a->n, a->data[0], info, err);
}

static int one_syevd(const jmg_engine *e, const jmg_dist_matrix *a, void *w,
                     int want_vectors, int *info, jmg_error *err) {
  (void)e;
  return jmg_lapack_syevd_full(a->dtype, a->n, a->data[0], w, want_vectors,
                               info, err);
}

static int one_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a,
                        void *b, int64_t nrhs, int transpose, int *info,
                        jmg_error *err) {
  (void)e;
  return jmg_lapack_lu_solve_full(a->dtype, a->n, a->data[0], b, nrhs,
                                  transpose, info, err);
}

static int one_sygvd(const jmg_engine *e, const jmg_dist_matrix *a,
                     const jmg_dist_matrix *b, void *w, int want_vectors,
                     int *info, jmg_error *err) {
  (void)e;
  return jmg_lapack_sygvd_full(a->dtype, a->n, a->data[0], b->data[0], w,
                               want_vectors, info, err);
}

/* a: Aᵀ, n x m (m = local_cols); rt: n x rcols. */
static int one_qr(const jmg_engine *e, const jmg_dist_matrix *a,
                  const jmg_dist_matrix *rt, int *info, jmg_error *err) {
  (void)e;
  return jmg_lapack_qr_full(a->dtype, a->local_cols, a->n, a->data[0],
                            rt->data[0], rt->local_cols, info, err);
}

static int one_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                           void *b, int64_t nrhs, int *info, jmg_error *err) {
  (void)e;
  return jmg_lapack_potrs_mixed_full(a->dtype, a->n, a->data[0], b, nrhs, info,
                                     NULL, err);
}

static int one_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                              void *b, int64_t nrhs, int transpose, int *info,
                              jmg_error *err) {
  (void)e;
  return jmg_lapack_lu_solve_mixed_full(a->dtype, a->n, a->data[0], b, nrhs,
                                        transpose, info, NULL, err);
}

const jmg_engine jmg_lapack_one_engine = {
    .name = "lapack",
    .model = JMG_MODEL_LEADER,
    .leader =
        {
            .potrs = one_potrs,
            .potri = one_potri,
            .syevd = one_syevd,
            .lu_solve = one_lu_solve,
            .qr = one_qr,
            .sygvd = one_sygvd,
            .potrs_mixed = one_potrs_mixed,
            .lu_solve_mixed = one_lu_solve_mixed,
        },
};
