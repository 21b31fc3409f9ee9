/* ceiling: times cuSOLVERMg on data already in its block-cyclic layout.
 *
 *   ceiling [--gpus K] [--repeats R] [--max-case-s S] [--budget-s B]
 *           [--nrhs K] [--seed S] [--check-all] [--case OP,DTYPE,N,T_A]...
 *   ceiling --list
 *
 * OP is potrs, potri (jaxmg's way: potrf + potrs on the identity),
 * potri_mg (cusolverMgPotri) or syevd; DTYPE float32, float64, complex64 or
 * complex128. Without --case, cases are read from stdin, one per line
 * ("potrs float64 65536 1024" or with commas). One process drives the first
 * K GPUs (all by default) for every case.
 *
 * Each case: the matrix is generated once (untimed) and copied into the
 * operand before every run (untimed: potrf and syevd work in place); one
 * warm-up run, then R timed runs (fewer when a run is long, see runs_for),
 * each timed on the host clock between two waits for every GPU. The last
 * run's result is checked (ops.c says how); with --check-all every timed
 * run's is, the residual printed is the worst, and stderr says how many runs
 * were above the tolerance (a run can be wrong where its neighbours are not:
 * docs/gpu-notes.md, GPUs shared with other processes).
 *
 * Output, one CSV row per case on stdout (progress on stderr):
 *   op,dtype,N,T_A,gpus,median_s,min_s,max_s,runs,residual,status
 * status: ok; FAIL (residual above 100 eps sqrt(N)); error (a call failed,
 * its message on stderr); skipped (--budget-s spent). The exit status is 0
 * when no case had an error (a FAIL is a measurement, not a failure of this
 * program), 1 otherwise, 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ceiling.h"

typedef struct spec {
  op_t op;
  dtype_t dt;
  int64_t n, tile;
} spec;

typedef struct options {
  int gpus, repeats, list, check_all;
  double max_case_s, budget_s;
  int64_t nrhs;
  unsigned long long seed;
  spec *cases;
  size_t ncases, cap;
} options;

static void usage(void) {
  fprintf(stderr,
          "usage: ceiling [--gpus K] [--repeats R] [--max-case-s S] "
          "[--budget-s B] [--nrhs K] [--seed S] [--check-all]\n"
          "               [--case OP,DTYPE,N,T_A]...\n"
          "       ceiling --list\n"
          "OP: potrs potri potri_mg syevd; DTYPE: float32 float64 complex64 "
          "complex128; without --case, cases come from stdin\n");
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int parse_int64(const char *s, int64_t *out) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < 1) return -1;
  *out = (int64_t)v;
  return 0;
}

static int parse_double(const char *s, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= 0)) return -1;
  *out = v;
  return 0;
}

/* "potrs float64 65536 1024" or "potrs,float64,65536,1024". */
static int parse_spec(char *text, spec *s) {
  char *save = NULL, *tok[4];
  int nt = 0;
  for (char *t = strtok_r(text, ", \t\r\n", &save); t != NULL;
       t = strtok_r(NULL, ", \t\r\n", &save)) {
    if (nt == 4) return -1;
    tok[nt++] = t;
  }
  if (nt != 4 || op_parse(tok[0], &s->op) || dtype_parse(tok[1], &s->dt) ||
      parse_int64(tok[2], &s->n) || parse_int64(tok[3], &s->tile)) {
    fprintf(stderr, "ceiling: bad case \"%s\"\n", text);
    return -1;
  }
  return 0;
}

static int add_case(options *o, char *text) {
  if (o->ncases == o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 16;
    spec *p = realloc(o->cases, cap * sizeof *p);
    if (p == NULL) return -1;
    o->cases = p;
    o->cap = cap;
  }
  if (parse_spec(text, &o->cases[o->ncases])) return -1;
  o->ncases++;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "--list") == 0) {
      o->list = 1;
      continue;
    }
    if (strcmp(a, "--check-all") == 0) {
      o->check_all = 1;
      continue;
    }
    if (i + 1 >= argc) return -1;
    char *v = argv[++i];
    int64_t x = 0;
    if (strcmp(a, "--gpus") == 0 && parse_int64(v, &x) == 0 &&
        x <= CEIL_MAX_DEVICES)
      o->gpus = (int)x;
    else if (strcmp(a, "--repeats") == 0 && parse_int64(v, &x) == 0 && x < 1000)
      o->repeats = (int)x;
    else if (strcmp(a, "--nrhs") == 0 && parse_int64(v, &x) == 0)
      o->nrhs = x;
    else if (strcmp(a, "--seed") == 0 && parse_int64(v, &x) == 0)
      o->seed = (unsigned long long)x;
    else if (strcmp(a, "--max-case-s") == 0 &&
             parse_double(v, &o->max_case_s) == 0)
      continue;
    else if (strcmp(a, "--budget-s") == 0 && parse_double(v, &o->budget_s) == 0)
      continue;
    else if (strcmp(a, "--case") == 0 && add_case(o, v) == 0)
      continue;
    else
      return -1;
  }
  return 0;
}

static int read_cases(options *o) {
  char *line = NULL;
  size_t cap = 0;
  int rc = 0;
  while (rc == 0 && getline(&line, &cap, stdin) >= 0) {
    const char *p = line + strspn(line, " \t\r\n");
    if (*p == '\0' || *p == '#') continue;
    rc = add_case(o, line);
  }
  free(line);
  return rc;
}

static int list_gpus(void) {
  int count = 0;
  if (CUDA(cudaGetDeviceCount(&count))) return 1;
  printf("gpus,%d\n", count);
  for (int d = 0; d < count; ++d) {
    struct cudaDeviceProp p;
    if (CUDA(cudaGetDeviceProperties(&p, d))) return 1;
    printf("gpu,%d,%s,%zu\n", d, p.name, p.totalGlobalMem);
  }
  return 0;
}

/* Timed runs: R, or fewer (at least 2) when R runs of the warm-up's length
 * would exceed max_case_s. The count is printed with the result. */
static int runs_for(const options *o, double warm_s) {
  if (o->max_case_s <= 0 || warm_s * o->repeats <= o->max_case_s)
    return o->repeats;
  int r = (int)(o->max_case_s / warm_s);
  if (r < 2) r = 2;
  return r < o->repeats ? r : o->repeats;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of sorted t[0 .. runs-1], runs >= 1. */
static double median(const double *t, int runs) {
  return runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
}

static void print_row(const spec *s, int gpus, const double *t, int runs,
                      double residual, const char *status) {
  printf("%s,%s,%lld,%lld,%d,", op_name(s->op), dtype_of(s->dt)->name,
         (long long)s->n, (long long)s->tile, gpus);
  if (runs > 0) {
    const double med = median(t, runs);
    printf("%.6f,%.6f,%.6f,%d,%.3e,%s\n", med, t[0], t[runs - 1], runs,
           residual, status);
  } else {
    printf(",,,0,,%s\n", status);
  }
  fflush(stdout);
}

/* Runs one case; returns 0, or -1 when a call failed. */
static int run_case(ctx_t *c, const spec *s, const options *o, uint64_t seed) {
  op_case k;
  memset(&k, 0, sizeof k);
  k.op = s->op;
  k.dt = s->dt;
  k.n = s->n;
  k.tile = s->tile;
  k.nrhs = o->nrhs;
  k.ctx = c;
  k.host_rng = seed;
  double times[1000];
  double residual = NAN;
  int runs = 0;
  int rc = op_setup(&k);
  double warm = 0;
  if (rc == 0) rc = op_prepare(&k);
  if (rc == 0) {
    const double t0 = now();
    rc = op_run(&k);
    warm = now() - t0;
  }
  const int want = runs_for(o, warm);
  const double tol = 100.0 * dtype_of(s->dt)->eps * sqrt((double)s->n);
  int wrong = 0, checked = 0;
  for (; rc == 0 && runs < want; ++runs) {
    rc = op_prepare(&k);
    const double t0 = now();
    if (rc == 0) rc = op_run(&k);
    times[runs] = now() - t0;
    if (rc == 0 && (o->check_all || runs == want - 1)) {
      double r = NAN;
      rc = op_check(&k, &r);
      checked++;
      if (!(r <= tol)) wrong++;
      /* The worst run's residual; a non-finite one stays. */
      if (checked == 1 || (!isnan(residual) && !(r <= residual))) residual = r;
    }
  }
  op_free(&k);
  if (rc != 0) {
    print_row(s, c->ndev, times, 0, NAN, "error");
    return -1;
  }
  qsort(times, (size_t)runs, sizeof times[0], cmp_double);
  const char *status = wrong == 0 ? "ok" : "FAIL";
  print_row(s, c->ndev, times, runs, residual, status);
  fprintf(stderr,
          "ceiling: %s %s N=%lld T_A=%lld on %d GPU(s): median %.4f s of %d, "
          "residual %.2e (tolerance %.1e) %s; %d of %d checked runs wrong\n",
          op_name(s->op), dtype_of(s->dt)->name, (long long)s->n,
          (long long)s->tile, c->ndev, median(times, runs), runs, residual, tol,
          status, wrong, checked);
  return 0;
}

int main(int argc, char **argv) {
  options o = {.gpus = 0,
               .repeats = 5,
               .max_case_s = 0,
               .budget_s = 0,
               .nrhs = 1,
               .seed = 1};
  if (parse_args(argc, argv, &o)) {
    usage();
    free(o.cases);
    return 2;
  }
  if (o.list) {
    free(o.cases);
    return list_gpus();
  }
  if (o.ncases == 0 && read_cases(&o)) {
    usage();
    free(o.cases);
    return 2;
  }
  int count = 0;
  if (CUDA(cudaGetDeviceCount(&count))) return 1;
  const int gpus = o.gpus ? o.gpus : (count < CEIL_MAX_DEVICES ? count : 16);
  if (gpus < 1 || gpus > count) {
    fprintf(stderr, "ceiling: %d GPU(s) asked, %d present\n", gpus, count);
    free(o.cases);
    return 1;
  }
  const double start = now();
  ctx_t c;
  if (ctx_init(&c, gpus, o.seed)) {
    ctx_destroy(&c);
    free(o.cases);
    return 1;
  }
  printf("op,dtype,N,T_A,gpus,median_s,min_s,max_s,runs,residual,status\n");
  int failed = 0;
  for (size_t i = 0; i < o.ncases; ++i) {
    if (o.budget_s > 0 && now() - start > o.budget_s) {
      print_row(&o.cases[i], gpus, NULL, 0, NAN, "skipped");
      continue;
    }
    if (run_case(&c, &o.cases[i], &o, o.seed * 1000003u + i + 1)) failed = 1;
  }
  ctx_destroy(&c);
  free(o.cases);
  return failed;
}
