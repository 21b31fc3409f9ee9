#define _POSIX_C_SOURCE 200809L
/* jaxmg's tiled Cholesky and its tiled inverse from the factor
 * (csrc/engine/cusolvermg/cuda_potrf.c, cuda_potri.c) run on the CPU under
 * tests/emu/emu_cuda.cc and emu_tiles.cc, on 1 to 5 emulated GPUs, for the
 * four types, the Cholesky's both paths (JAXMG_POTRF_PIPELINE 0 and 1): the
 * columns each device's x receives must be those of A^-1 (||A X - I||
 * small, X's lower triangle taken from the devices, the upper mirrored),
 * zero above each tile's first row, and A's shards must hold L. Each case
 * runs with the streams deferred and scheduled at random (emu_streams.h)
 * under two seeds, so that work the code fails to order by an event runs
 * out of order in one of them. The per-GPU timer's split (JAXMG_TRACE;
 * there each "ms" is a count of emulated operations) must have been read
 * from completed events, and show the panel copies on the compute streams
 * without the pipeline and not with it. Run by tests/emu/run.sh; prints one
 * line per case and exits non-zero on a failure. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/trace.h"
#include "cuda/device.h"
#include "emu_streams.h"
#include "engine/cusolvermg/cuda_potrf.h"
#include "engine/cusolvermg/cuda_potri.h"

static double rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

static void put(jmg_dtype t, void *p, size_t i, double complex v) {
  switch (t) {
    case JMG_F32: ((float *)p)[i] = (float)creal(v); break;
    case JMG_F64: ((double *)p)[i] = creal(v); break;
    case JMG_C64:
      ((float *)p)[2 * i] = (float)creal(v);
      ((float *)p)[2 * i + 1] = (float)cimag(v);
      break;
    default:
      ((double *)p)[2 * i] = creal(v);
      ((double *)p)[2 * i + 1] = cimag(v);
  }
}

static double complex get(jmg_dtype t, const void *p, size_t i) {
  switch (t) {
    case JMG_F32: return ((const float *)p)[i];
    case JMG_F64: return ((const double *)p)[i];
    case JMG_C64: return CMPLX(((const float *)p)[2 * i], ((const float *)p)[2 * i + 1]);
    default: return CMPLX(((const double *)p)[2 * i], ((const double *)p)[2 * i + 1]);
  }
}

/* jmg_trace_end's line (written to stderr) into line. */
static void trace_end_into(char *line, size_t len) {
  line[0] = '\0';
  fflush(stderr);
  FILE *tmp = tmpfile();
  const int saved = dup(2);
  if (tmp == NULL || saved < 0 || dup2(fileno(tmp), 2) < 0) {
    jmg_trace_end();
    if (tmp != NULL) fclose(tmp);
    if (saved >= 0) close(saved);
    return;
  }
  jmg_trace_end();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  const size_t got = fread(line, 1, len - 1, tmp);
  line[got] = '\0';
  fclose(tmp);
}

/* The timer's complaint about the trace line (NULL: none): every device
 * measured, no mark dropped, and the potrf's copies where the path puts
 * them. */
static const char *timer_fault(const char *line, int G, int pipeline) {
  const char *potrf = strstr(line, "tiled potrf [");
  if (potrf == NULL || strstr(line, "tiled potri [") == NULL) return "no timer note";
  const char *end = strchr(potrf, ']');
  char part[2048];
  const size_t n = end != NULL ? (size_t)(end - potrf) : strlen(potrf);
  snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), potrf);
  if (strstr(line, "not measured") != NULL) return "a device not measured";
  if (strstr(line, "dropped") != NULL) return "marks dropped";
  if (G > 1 && strstr(part, " wait ") == NULL) return "potrf: no wait";
  if (G > 1 && !pipeline && strstr(part, " copy ") == NULL) return "potrf: no copy";
  if (pipeline && strstr(part, " copy ") != NULL) return "potrf: a copy on a compute stream";
  return NULL;
}

/* Global column of device d's local column c (tile width t, G devices). */
static int64_t global_col(int64_t c, int64_t t, int G, int d) {
  return (c / t * G + d) * t + c % t;
}

static int one_case(jmg_dtype dt, int pipeline, int64_t n, int64_t t, int G, uint64_t seed,
                    unsigned schedule) {
  const int64_t lc = n / G;
  const size_t es = jmg_dtype_size(dt);
  const int cplx = jmg_dtype_is_complex(dt);
  const double tol = jmg_dtype_real_size(dt) == 4 ? 1e-5 : 1e-12;
  double complex *a = calloc((size_t)(n * n), sizeof *a), *m = calloc((size_t)(n * n), sizeof *m);
  for (int64_t i = 0; i < n * n; ++i) m[i] = rnd(&seed) + (cplx ? I * rnd(&seed) : 0.0);
  /* A = I + M M^H / n, as the devices hold it (rounded to the type). */
  char elem[16];
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i) {
      double complex s = i == j ? 1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) s += m[i + k * n] * conj(m[j + k * n]) / (double)n;
      if (i == j) s = creal(s);
      put(dt, elem, 0, s);
      a[i + j * n] = get(dt, elem, 0);
    }
  void *data[JMG_CUDA_MAX_DEVICES], *x[JMG_CUDA_MAX_DEVICES], *work[JMG_CUDA_MAX_DEVICES],
      *panels[JMG_CUDA_MAX_DEVICES], *ctx[JMG_CUDA_MAX_DEVICES];
  jmg_cuda_device dev[JMG_CUDA_MAX_DEVICES];
  cublasHandle_t blas[JMG_CUDA_MAX_DEVICES];
  cusolverDnHandle_t dn[JMG_CUDA_MAX_DEVICES];
  char stream_token[JMG_CUDA_MAX_DEVICES];
  jmg_dist_matrix dm = {G, n, t, lc, dt, data, ctx};
  for (int d = 0; d < G; ++d) {
    memset(&dev[d], 0, sizeof dev[d]);
    dev[d].device = d;
    dev[d].stream = &stream_token[d];
    ctx[d] = &dev[d];
    blas[d] = (cublasHandle_t)&stream_token[d];
    dn[d] = (cusolverDnHandle_t)&stream_token[d];
    data[d] = calloc((size_t)(n * lc), es);
    x[d] = calloc((size_t)(n * lc), es);
    panels[d] = calloc(jmg_cuda_potri_workspace(&dm), 1);
    for (int64_t c = 0; c < lc; ++c)
      for (int64_t r = 0; r < n; ++r)
        put(dt, data[d], (size_t)(r + c * n), a[r + global_col(c, t, G, d) * n]);
  }
  jmg_cuda_potrf_handles h = {blas, dn, NULL};
  jmg_error err;
  memset(&err, 0, sizeof err);
  size_t wbytes = 0;
  emu_streams_defer(schedule);
  const unsigned long choices = emu_streams_choices();
  jmg_trace_begin("tiles %s pipeline %d", jmg_dtype_name(dt), pipeline);
  int rc = jmg_cuda_potrf_workspace(&dm, &h, pipeline, &wbytes, "potri", &err);
  for (int d = 0; rc == 0 && d < G; ++d) work[d] = calloc(wbytes, 1);
  int64_t info = -1;
  if (rc == 0) rc = jmg_cuda_potrf(&dm, &h, pipeline, work, &info, "potri", &err);
  if (rc == 0 && info == 0) rc = jmg_cuda_potri_from_factor(&dm, &h, x, panels, "potri", &err);
  const unsigned long interleaved = emu_streams_choices() - choices;
  emu_streams_defer(0);
  char line[4096];
  trace_end_into(line, sizeof line);
  int bad = rc != 0 || info != 0;
  if (bad) printf("  rc %d info %lld: %s\n", rc, (long long)info, err.msg);
  const char *fault = bad ? NULL : timer_fault(line, G, pipeline);
  /* X from the devices: its lower triangle, mirrored; the entries above the
   * diagonal inside a diagonal tile must match their mirror; zero above
   * the tile. */
  double complex *inv = calloc((size_t)(n * n), sizeof *inv);
  double nonzero_above = 0.0, lerr = 0.0, tile_sym = 0.0;
  for (int d = 0; !bad && d < G; ++d)
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = global_col(c, t, G, d);
      for (int64_t r = gc; r < n; ++r) {
        const double complex v = get(dt, x[d], (size_t)(r + c * n));
        inv[r + gc * n] = v;
        inv[gc + r * n] = conj(v);
      }
    }
  for (int d = 0; !bad && d < G; ++d)
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = global_col(c, t, G, d), top = gc / t * t;
      for (int64_t r = 0; r < gc; ++r) {
        const double complex v = get(dt, x[d], (size_t)(r + c * n));
        if (r < top) nonzero_above = fmax(nonzero_above, cabs(v));
        else tile_sym = fmax(tile_sym, cabs(v - inv[r + gc * n]));
      }
    }
  /* L's check: (L L^H)(r, c) = A(r, c) over the lower triangle. */
  double complex *ld = calloc((size_t)(n * n), sizeof *ld);
  for (int d = 0; !bad && d < G; ++d)
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = global_col(c, t, G, d);
      for (int64_t r = gc; r < n; ++r) ld[r + gc * n] = get(dt, data[d], (size_t)(r + c * n));
    }
  for (int64_t c = 0; !bad && c < n; ++c)
    for (int64_t r = c; r < n; ++r) {
      double complex s = 0.0;
      for (int64_t k = 0; k <= c; ++k) s += ld[r + k * n] * conj(ld[c + k * n]);
      lerr = fmax(lerr, cabs(s - a[r + c * n]));
    }
  double res = 0.0;
  for (int64_t j = 0; !bad && j < n; ++j)
    for (int64_t i = 0; i < n; ++i) {
      double complex s = i == j ? -1.0 : 0.0;
      for (int64_t k = 0; k < n; ++k) s += a[i + k * n] * inv[k + j * n];
      res = fmax(res, cabs(s));
    }
  bad = bad || fault != NULL || !(res < tol) || nonzero_above != 0.0 || !(lerr < tol) ||
        !(tile_sym < tol);
  printf("%s %-10s pipeline %d n=%lld T_A=%lld on %d (schedule %u, %lu choices): "
         "||A X - I||max %.2e, L L^H - A %.2e, in-tile symmetry %.1e, above tiles %.1e\n",
         bad ? "FAIL" : "ok  ", jmg_dtype_name(dt), pipeline, (long long)n, (long long)t, G,
         schedule, interleaved, res, lerr, tile_sym, nonzero_above);
  /* The timer's split, once a path (and wherever it is wrong). */
  if (fault != NULL || (dt == JMG_F64 && n == 48 && G == 2 && schedule == 7922u))
    printf("  %s%s%s", fault != NULL ? fault : "", fault != NULL ? ": " : "", line);
  for (int d = 0; d < G; ++d) {
    free(data[d]);
    free(x[d]);
    free(panels[d]);
    if (rc == 0 || info == 0) free(work[d]);
  }
  free(a);
  free(m);
  free(inv);
  free(ld);
  return bad;
}

int main(void) {
  int failed = 0, cases = 0;
  setenv("JAXMG_TRACE", "1", 1); /* the per-GPU timer's paths too */
  /* n, T_A, G: one tile a device (nt = G), two (the pipeline's second
   * buffer's first use), T_A 1, and several steps a buffer is reused. */
  static const int64_t shapes[][3] = {
      {24, 8, 1}, {32, 16, 2}, {16, 8, 2}, {48, 8, 2}, {40, 4, 2}, {12, 1, 2},
      {24, 8, 3}, {60, 4, 3},  {72, 8, 3}, {36, 6, 3}, {9, 1, 3},
      /* From 4 GPUs a device's panels come 3 in a row: nothing but the
       * pipeline's 'freed' event keeps a copy from overwriting the buffer
       * its compute stream still reads (on 2 or 3, the lookahead's chain
       * of panels passes through the device's own stream). */
      {64, 4, 4}, {48, 2, 4}, {60, 3, 5},
  };
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  uint64_t seed = 1;
  for (int pipeline = 0; pipeline <= 1; ++pipeline)
    for (int t = 0; t < JMG_NUM_DTYPES; ++t)
      for (int s = 0; s < nshapes; ++s)
        for (unsigned schedule = 1; schedule <= 2; ++schedule, ++cases)
          failed += one_case((jmg_dtype)t, pipeline, shapes[s][0], shapes[s][1],
                             (int)shapes[s][2], seed++, schedule * 7919u + (unsigned)s);
  printf("%d of %d failed\n", failed, cases);
  return failed != 0;
}
