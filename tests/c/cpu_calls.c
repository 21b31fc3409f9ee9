/* Calls of the CPU handlers shared by the op test files (cpu_calls.h). */
#include "cpu_calls.h"

#include <stdlib.h>
#include <string.h>

const XLA_FFI_DataType k_xla_types[JMG_NUM_DTYPES] = {
    XLA_FFI_DataType_F32, XLA_FFI_DataType_F64, XLA_FFI_DataType_C64,
    XLA_FFI_DataType_C128};

static const char k_want_logdet[] = "want_logdet#";

void build_potrs_logdet(frame_builder *f, int64_t run_id, int64_t mesh_id,
                        int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                        int64_t n, void *b, void *x, int64_t nrhs,
                        XLA_FFI_DataType logdet_dt, void *logdet,
                        int32_t *shard, int32_t *status) {
  fb_init(f, fake_xla_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, dt, b, 2, nrhs, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, dt, x, 2, nrhs, n);
  if (logdet != NULL) fb_ret(f, logdet_dt, logdet, 0, 0, 0);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
  if (logdet != NULL)
    fb_attr_scalar(f, k_want_logdet, 11, XLA_FFI_DataType_PRED, 1);
}

void build_potrs(frame_builder *f, int64_t run_id, int64_t mesh_id,
                 int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                 int64_t n, void *b, void *x, int64_t nrhs, int32_t *shard,
                 int32_t *status) {
  build_potrs_logdet(f, run_id, mesh_id, tile, dt, a, lc, n, b, x, nrhs, dt,
                     NULL, shard, status);
}

void build_potri(frame_builder *f, int64_t run_id, int64_t mesh_id,
                 int64_t tile, XLA_FFI_DataType dt, void *a, int64_t lc,
                 int64_t n, int32_t *shard, int32_t *status) {
  fb_init(f, fake_xla_api(), run_id);
  fb_arg(f, dt, a, 2, lc, n);
  fb_arg(f, XLA_FFI_DataType_S32, shard, 0, 0, 0);
  fb_ret(f, dt, a, 2, lc, n);
  fb_ret(f, XLA_FFI_DataType_S32, status, 0, 0, 0);
  fb_attr_i64(f, NAME_T_A, tile);
  fb_attr_i64(f, NAME_MESH_ID, mesh_id);
}

shard_call *make_shard_calls(int nparts, int64_t n, int64_t tile,
                             int64_t mesh_id, int64_t run_id, const double *A,
                             const double *B, int64_t nrhs) {
  shard_call *s = calloc((size_t)nparts, sizeof *s);
  if (s == NULL) abort();
  const int64_t lc = n / nparts;
  for (int d = 0; d < nparts; ++d) {
    s[d].shard = d;
    s[d].status = -99;
    s[d].a = malloc((size_t)(lc * n) * sizeof(double));
    s[d].b = malloc((size_t)(nrhs * n + 1) * sizeof(double));
    s[d].x = malloc((size_t)(nrhs * n + 1) * sizeof(double));
    if (!s[d].a || !s[d].b || !s[d].x) abort();
    memcpy(s[d].a, A + d * lc * n, (size_t)(lc * n) * sizeof(double));
    if (B != NULL) {
      memcpy(s[d].b, B, (size_t)(nrhs * n) * sizeof(double));
      for (int64_t i = 0; i < nrhs * n; ++i) s[d].x[i] = -777.0;
      build_potrs(&s[d].f, run_id, mesh_id, tile, XLA_FFI_DataType_F64, s[d].a,
                  lc, n, s[d].b, s[d].x, nrhs, &s[d].shard, &s[d].status);
      s[d].call.handler = jaxmg_potrs_cpu;
    } else {
      build_potri(&s[d].f, run_id, mesh_id, tile, XLA_FFI_DataType_F64, s[d].a,
                  lc, n, &s[d].shard, &s[d].status);
      s[d].call.handler = jaxmg_potri_cpu;
    }
    s[d].call.frame = &s[d].f.frame;
  }
  return s;
}

void run_shard_calls(shard_call *s, int nparts) {
  ffi_call calls[16];
  for (int d = 0; d < nparts; ++d) calls[d] = s[d].call;
  run_calls(calls, nparts);
  for (int d = 0; d < nparts; ++d) s[d].call = calls[d];
}

void free_shard_calls(shard_call *s, int nparts) {
  for (int d = 0; d < nparts; ++d) {
    free(s[d].a);
    free(s[d].b);
    free(s[d].x);
  }
  free(s);
}

double *spd_matrix(int64_t n) {
  double *A = malloc((size_t)(n * n) * sizeof *A);
  if (A == NULL) abort();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      A[i * n + j] =
          1.0 / (double)(1 + i + j) + (i == j ? (double)n + (double)i : 0.0);
  return A;
}

void free_typed_calls(typed_call *s, int nparts) {
  for (int d = 0; d < nparts; ++d) {
    free(s[d].a);
    free(s[d].b);
    free(s[d].x);
  }
  free(s);
}
