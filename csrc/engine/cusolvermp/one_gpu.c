/* One rank holding the whole square matrix (a 1 x 1 grid, ld n) runs the
 * cuSOLVERDn engine's routine on a one-GPU view of its part, as the gather
 * engine does on its gathered copy; several ranks run cuSOLVERMp's.
 *
 * Why: cuSOLVERMp's own factorizations are slower there than cuSOLVERDn's,
 * which JAX calls (docs/gpu-runs/2026-11-25-s12-h100: cusolverMpGetrf held
 * lu_solve well below JAX's speed at every block size tried, and
 * cusolverMpPotrf potrs); its syevd needs a scratch Z beside A and computes
 * eigenvectors even for eigenvalues alone, its potri a scratch W. So
 * potrs, potri, syevd and lu_solve run cuSOLVERDn's routine there (no
 * transpose, no scratch, the other engines' statuses and limits: context.c's
 * mp_supports and mp_workspace ask jmg_cusolverdn_engine). sygvd (sygvd.c
 * says why) and qr's rectangular part keep cuSOLVERMp's. */
#include "engine/cusolvermp/mp.h"

#include "engine/gather/thresholds.h"

/* The engine one rank's square problems go to. */
#define MP_ONE (&jmg_cusolverdn_engine)

int jmg_mp_one_gpu_problem(const jmg_problem *p) {
  return p->nparts == 1 && !jmg_op_is_rectangular(p->op) &&
         p->op != JMG_OP_SYGVD;
}

/* A one-GPU view of a's part where a is one rank's whole matrix: 1 and
 * *view (data and ctx its pointers' homes), else 0. */
typedef struct one_gpu {
  jmg_dist_matrix view;
  void *data, *device_ctx;
} one_gpu;

static int one_gpu_of(const jmg_local_matrix *a, one_gpu *o) {
  if (a->ranks != 1 || a->rows != a->n || a->cols != a->n || a->ld != a->n)
    return 0;
  o->data = a->data;
  o->device_ctx = a->device_ctx;
  o->view = (jmg_dist_matrix){.ndev = 1,
                              .n = a->n,
                              .tile = a->mb,
                              .local_cols = a->n,
                              .dtype = a->dtype,
                              .data = &o->data,
                              .device_ctx = &o->device_ctx};
  return 1;
}

int jmg_mp_one_gpu_potrs(const jmg_engine *e, const jmg_local_matrix *a,
                         void *b, int64_t nrhs, void *diag, int *info,
                         jmg_error *err) {
  one_gpu o;
  return one_gpu_of(a, &o)
             ? MP_ONE->leader.potrs(MP_ONE, &o.view, b, nrhs, diag, info, err)
             : jmg_mp_potrs(e, a, b, nrhs, diag, info, err);
}

int jmg_mp_one_gpu_potri(const jmg_engine *e, const jmg_local_matrix *a,
                         int *info, jmg_error *err) {
  one_gpu o;
  return one_gpu_of(a, &o) ? MP_ONE->leader.potri(MP_ONE, &o.view, info, err)
                           : jmg_mp_potri(e, a, info, err);
}

int jmg_mp_one_gpu_syevd(const jmg_engine *e, const jmg_local_matrix *a,
                         void *w, int want_vectors, int *info, jmg_error *err) {
  one_gpu o;
  return one_gpu_of(a, &o)
             ? MP_ONE->leader.syevd(MP_ONE, &o.view, w, want_vectors, info, err)
             : jmg_mp_syevd(e, a, w, want_vectors, info, err);
}

int jmg_mp_one_gpu_lu_solve(const jmg_engine *e, const jmg_local_matrix *a,
                            void *b, int64_t nrhs, int transpose, int *info,
                            jmg_error *err) {
  one_gpu o;
  return one_gpu_of(a, &o)
             ? MP_ONE->leader.lu_solve(MP_ONE, &o.view, b, nrhs, transpose,
                                       info, err)
             : jmg_mp_lu_solve(e, a, b, nrhs, transpose, info, err);
}

/* ---- the eigensolvers below the crossover --------------------------------*/

int jmg_mp_gathers(const jmg_problem *p) {
  char why[160];
  return jmg_op_is_eigensolver(p->op) && p->nparts > 1 &&
         jmg_cusolverdn_local_by_default(why, sizeof why) &&
         jmg_gather_local_prefers(&jmg_cusolverdn_local_engine, p, why,
                                  sizeof why);
}

static int gathers(const jmg_local_matrix *a, jmg_op op) {
  const jmg_problem p = {.op = op,
                         .nparts = a->ranks,
                         .nodes = 1,
                         .dtype = a->dtype,
                         .n = a->n,
                         .m = a->n,
                         .tile = a->mb};
  return jmg_mp_gathers(&p);
}

int jmg_mp_route_syevd(const jmg_engine *e, const jmg_local_matrix *a,
                       void *w, int want_vectors, int *info, jmg_error *err) {
  const jmg_engine *g = &jmg_cusolverdn_local_engine;
  return gathers(a, JMG_OP_SYEVD)
             ? g->local.syevd(g, a, w, want_vectors, info, err)
             : jmg_mp_one_gpu_syevd(e, a, w, want_vectors, info, err);
}

int jmg_mp_route_sygvd(const jmg_engine *e, const jmg_local_matrix *a,
                       const jmg_local_matrix *b, void *w, int want_vectors,
                       int *info, jmg_error *err) {
  const jmg_engine *g = &jmg_cusolverdn_local_engine;
  return gathers(a, JMG_OP_SYGVD)
             ? g->local.sygvd(g, a, b, w, want_vectors, info, err)
             : jmg_mp_sygvd(e, a, b, w, want_vectors, info, err);
}
