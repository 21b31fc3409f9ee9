/* The 1D block-cyclic planner and its in-place executor (layout/cyclic.h),
 * checked against the direct definition of the layout: tile k = col / T_A
 * goes to device k % ndev, at local column (k / ndev) * T_A + col % T_A. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/cyclic.h"
#include "test.h"

/* ---- the reference, written independently of the library ---------------- */

static void ref_locate(int64_t col, int ndev, int64_t tile, int *dev,
                       int64_t *local_col) {
  int64_t k = col / tile;
  *dev = (int)(k % ndev);
  *local_col = (k / ndev) * tile + col % tile;
}

static int64_t ref_gcd(int64_t a, int64_t b) {
  while (b != 0) {
    int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* 1 if n splits evenly over ndev devices and the cyclic layout gives every
 * device exactly n / ndev columns, by a direct count. */
static int ref_layout_fits(int64_t n, int ndev, int64_t tile) {
  if (n % ndev != 0) return 0;
  int64_t *count = calloc((size_t)ndev, sizeof *count);
  if (count == NULL) abort();
  for (int64_t col = 0; col < n; ++col) {
    int dev;
    int64_t lc;
    ref_locate(col, ndev, tile, &dev, &lc);
    count[dev]++;
  }
  int fits = 1;
  for (int d = 0; d < ndev; ++d)
    if (count[d] != n / ndev) fits = 0;
  free(count);
  return fits;
}

/* A small deterministic generator (xorshift64*), so failures reproduce. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}

static int64_t rng_range(uint64_t *s, int64_t lo, int64_t hi) { /* [lo, hi] */
  return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* Fills why and returns 1: for the "return fail(...)" idiom of the checkers
 * below, which report instead of asserting so that they can free first. */
static int fail(char *why, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(char *why, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, len, fmt, ap);
  va_end(ap);
  return 1;
}

/* ---- plan invariants ---------------------------------------------------- */

/* Checks the plan's fields against the reference. Returns 0, or 1 with why. */
static int check_plan(const jmg_cyclic_plan *p, int64_t n, int ndev,
                      int64_t tile, char *why, size_t len) {
  const int64_t lc = n / ndev;
  if (p->n != n || p->ndev != ndev || p->tile != tile || p->local_cols != lc)
    return fail(why, len, "plan fields n=%lld ndev=%d tile=%lld lc=%lld",
                (long long)p->n, p->ndev, (long long)p->tile,
                (long long)p->local_cols);
  if (p->unit != ref_gcd(tile, lc) || p->nunits != n / p->unit)
    return fail(why, len, "unit=%lld nunits=%lld, expected %lld and %lld",
                (long long)p->unit, (long long)p->nunits,
                (long long)ref_gcd(tile, lc),
                (long long)(n / ref_gcd(tile, lc)));
  const int64_t per_dev = lc / p->unit;
  int rc = 0;
  unsigned char *hit = calloc((size_t)p->nunits, 1);
  unsigned char *in_cycle = calloc((size_t)p->nunits, 1);
  if (!hit || !in_cycle) abort();

  /* dest is the reference placement of every unit, and a permutation. */
  for (int64_t s = 0; s < p->nunits && rc == 0; ++s) {
    int64_t d = p->dest[s];
    if (d < 0 || d >= p->nunits) {
      rc = fail(why, len, "dest[%lld]=%lld out of range", (long long)s,
                (long long)d);
      break;
    }
    if (hit[d]++) {
      rc = fail(why, len, "dest is not a permutation: slot %lld hit twice",
                (long long)d);
      break;
    }
    /* Every column of unit s lands, in order, in unit d: units never split. */
    for (int64_t c = 0; c < p->unit; ++c) {
      int dev;
      int64_t lcol;
      ref_locate(s * p->unit + c, ndev, tile, &dev, &lcol);
      if (dev != d / per_dev || lcol != (d % per_dev) * p->unit + c) {
        rc = fail(why, len,
                  "column %lld of unit %lld belongs on device %d column %lld, "
                  "but dest says slot %lld",
                  (long long)(s * p->unit + c), (long long)s, dev,
                  (long long)lcol, (long long)d);
        break;
      }
    }
  }

  /* Cycles: disjoint, length >= 2, each follows dest, together they cover
   * exactly the slots that move. */
  if (rc == 0 && (p->ncycles < 0 || p->cycle_start[0] != 0))
    rc = fail(why, len, "ncycles=%lld, cycle_start[0]=%lld",
              (long long)p->ncycles, (long long)p->cycle_start[0]);
  for (int64_t c = 0; c < p->ncycles && rc == 0; ++c) {
    int64_t b = p->cycle_start[c], e = p->cycle_start[c + 1];
    if (e - b < 2) {
      rc = fail(why, len, "cycle %lld has length %lld", (long long)c,
                (long long)(e - b));
      break;
    }
    for (int64_t i = b; i < e; ++i) {
      int64_t s = p->cycle_slots[i];
      if (s < 0 || s >= p->nunits || in_cycle[s]) {
        rc = fail(why, len, "slot %lld is out of range or in two cycles",
                  (long long)s);
        break;
      }
      in_cycle[s] = 1;
      int64_t next = p->cycle_slots[i + 1 < e ? i + 1 : b];
      if (p->dest[s] != next) {
        rc = fail(why, len, "cycle %lld: dest[%lld]=%lld but next is %lld",
                  (long long)c, (long long)s, (long long)p->dest[s],
                  (long long)next);
        break;
      }
    }
  }
  for (int64_t s = 0; s < p->nunits && rc == 0; ++s)
    if (in_cycle[s] != (p->dest[s] != s))
      rc = fail(why, len, "slot %lld: in a cycle=%d, moves=%d", (long long)s,
                in_cycle[s], p->dest[s] != s);
  /* Trivial layouts move nothing. */
  if (rc == 0 && (ndev == 1 || tile == lc) && p->ncycles != 0)
    rc = fail(why, len, "trivial layout with %lld cycles",
              (long long)p->ncycles);
  free(hit);
  free(in_cycle);
  return rc;
}

/* ---- applying a plan to host buffers ------------------------------------ */

#define MAX_LANES 8

typedef struct copy_ctx {
  int ndev;
  int64_t col_len; /* elements per column */
  int64_t unit;    /* columns per unit */
  int64_t per_dev; /* units per device */
  int32_t **dev;   /* dev[d]: local_cols columns of col_len elements */
  int32_t *stage[MAX_LANES];
  int nlanes;
  int64_t calls;
  int64_t fail_at; /* fail the fail_at-th call (1-based); 0: never */
  /* Checks of the calls themselves. */
  int bad;             /* a location out of range, or dst == src */
  int stage_misuse;    /* a lane's staging not used save ... restore */
  int open[MAX_LANES]; /* lane l has a cycle in flight (saved, not restored) */
  int last_lane;       /* the lane of the previous cycle, or -1 */
  /* Deferred mode: copies are queued per lane and run at the end, the last
   * lane first, as concurrent GPU streams may: right only if different lanes
   * never touch the same unit. */
  int deferred;
  struct queued_copy {
    int32_t *dst;
    const int32_t *src;
  } * queue[MAX_LANES];
  int64_t queued[MAX_LANES];
} copy_ctx;

static int32_t *unit_ptr(copy_ctx *c, jmg_unit_loc loc) {
  if (loc.dev == JMG_STAGE) {
    if (loc.unit < 0 || loc.unit >= c->nlanes) return NULL;
    return c->stage[loc.unit];
  }
  if (loc.dev < 0 || loc.dev >= c->ndev || loc.unit < 0 ||
      loc.unit >= c->per_dev)
    return NULL;
  return c->dev[loc.dev] + loc.unit * c->unit * c->col_len;
}

static int memcpy_unit(void *ctx, int lane, jmg_unit_loc dst, jmg_unit_loc src,
                       jmg_error *err) {
  copy_ctx *c = ctx;
  c->calls++;
  if (c->fail_at != 0 && c->calls == c->fail_at)
    return jmg_error_set(err, JMG_ECUDA, NULL, "cudaMemcpyPeerAsync",
                         "injected failure on copy %lld", (long long)c->calls);
  int32_t *d = unit_ptr(c, dst), *s = unit_ptr(c, src);
  if (lane < 0 || lane >= c->nlanes || d == NULL || s == NULL || d == s) {
    c->bad = 1;
    return 0;
  }
  /* A cycle saves into its own lane's staging buffer first and restores from
   * it last; cycles go round-robin over the lanes. */
  if (dst.dev == JMG_STAGE) {
    if (src.dev == JMG_STAGE || dst.unit != lane || c->open[lane] ||
        lane != (c->last_lane + 1) % c->nlanes)
      c->stage_misuse = 1;
    c->open[lane] = 1;
    c->last_lane = lane;
  } else if (src.dev == JMG_STAGE) {
    if (src.unit != lane || !c->open[lane]) c->stage_misuse = 1;
    c->open[lane] = 0;
  } else if (!c->open[lane]) {
    c->stage_misuse = 1; /* a device-to-device copy outside any cycle */
  }
  if (c->deferred) {
    struct queued_copy *q =
        realloc(c->queue[lane], (size_t)(c->queued[lane] + 1) * sizeof *q);
    if (q == NULL) abort();
    q[c->queued[lane]].dst = d;
    q[c->queued[lane]].src = s;
    c->queue[lane] = q;
    c->queued[lane]++;
    return 0;
  }
  memcpy(d, s, (size_t)(c->unit * c->col_len) * sizeof *d);
  return 0;
}

/* Runs the deferred copies: lanes from the last to the first, each in order. */
static void run_deferred(copy_ctx *c) {
  for (int l = c->nlanes - 1; l >= 0; --l) {
    for (int64_t i = 0; i < c->queued[l]; ++i)
      memcpy(c->queue[l][i].dst, c->queue[l][i].src,
             (size_t)(c->unit * c->col_len) * sizeof(int32_t));
    free(c->queue[l]);
    c->queue[l] = NULL;
    c->queued[l] = 0;
  }
}

static int copy_ctx_init(copy_ctx *c, const jmg_cyclic_plan *p,
                         int64_t col_len) {
  memset(c, 0, sizeof *c);
  c->ndev = p->ndev;
  c->col_len = col_len;
  c->unit = p->unit;
  c->per_dev = p->local_cols / p->unit;
  c->dev = calloc((size_t)p->ndev, sizeof *c->dev);
  if (c->dev == NULL) return -1;
  for (int d = 0; d < p->ndev; ++d) {
    c->dev[d] = malloc((size_t)(p->local_cols * col_len) * sizeof(int32_t));
    if (c->dev[d] == NULL) return -1;
    /* Contiguous layout: device d holds global columns d*lc ... */
    for (int64_t j = 0; j < p->local_cols; ++j)
      for (int64_t i = 0; i < col_len; ++i)
        c->dev[d][j * col_len + i] =
            (int32_t)(((int64_t)d * p->local_cols + j) * col_len + i);
  }
  c->nlanes = 1;
  c->last_lane = -1;
  for (int k = 0; k < MAX_LANES; ++k) {
    c->stage[k] = malloc((size_t)(p->unit * col_len) * sizeof(int32_t));
    if (c->stage[k] == NULL) return -1;
  }
  return 0;
}

static void copy_ctx_free(copy_ctx *c) {
  if (c->dev != NULL)
    for (int d = 0; d < c->ndev; ++d) free(c->dev[d]);
  free(c->dev);
  for (int k = 0; k < MAX_LANES; ++k) free(c->stage[k]);
  memset(c, 0, sizeof *c);
}

static void copy_ctx_reset_counters(copy_ctx *c) {
  c->calls = 0;
  c->bad = c->stage_misuse = 0;
  memset(c->open, 0, sizeof c->open);
  c->last_lane = -1;
}

/* Every element where the layout puts it: the reference cyclic placement, or
 * the contiguous one. */
static int check_placement(const copy_ctx *c, const jmg_cyclic_plan *p,
                           int cyclic, char *why, size_t len) {
  for (int64_t col = 0; col < p->n; ++col) {
    int dev;
    int64_t lcol;
    if (cyclic) {
      ref_locate(col, p->ndev, p->tile, &dev, &lcol);
    } else {
      dev = (int)(col / p->local_cols);
      lcol = col % p->local_cols;
    }
    if (dev < 0 || dev >= p->ndev || lcol < 0 || lcol >= p->local_cols)
      return fail(why, len, "reference puts column %lld at %d/%lld",
                  (long long)col, dev, (long long)lcol);
    for (int64_t i = 0; i < c->col_len; ++i) {
      int32_t got = c->dev[dev][lcol * c->col_len + i];
      int32_t want = (int32_t)(col * c->col_len + i);
      if (got != want)
        return fail(why, len,
                    "%s layout: device %d column %lld element %lld is %d, "
                    "expected %d (global column %lld)",
                    cyclic ? "cyclic" : "contiguous", dev, (long long)lcol,
                    (long long)i, (int)got, (int)want, (long long)col);
    }
  }
  return 0;
}

static int64_t expected_copies(const jmg_cyclic_plan *p) {
  int64_t total = 0;
  for (int64_t c = 0; c < p->ncycles; ++c)
    total += p->cycle_start[c + 1] - p->cycle_start[c] + 1;
  return total;
}

/* One direction of the apply, checked. */
static int apply_checked(copy_ctx *c, const jmg_cyclic_plan *p,
                         jmg_cyclic_direction dir, char *why, size_t len) {
  jmg_error err;
  jmg_error_clear(&err);
  copy_ctx_reset_counters(c);
  int rc = jmg_cyclic_apply(p, dir, c->nlanes, memcpy_unit, c, &err);
  run_deferred(c);
  const char *name = dir == JMG_TO_CYCLIC ? "to cyclic" : "from cyclic";
  if (rc != 0) return fail(why, len, "%s: apply failed: %s", name, err.msg);
  if (c->bad) return fail(why, len, "%s: a copy went out of range", name);
  if (c->stage_misuse)
    return fail(why, len, "%s: staging buffers misused", name);
  for (int l = 0; l < c->nlanes; ++l)
    if (c->open[l])
      return fail(why, len, "%s: lane %d: a cycle was never closed", name, l);
  if (c->calls != expected_copies(p))
    return fail(why, len, "%s: %lld copies, expected %lld", name,
                (long long)c->calls, (long long)expected_copies(p));
  return check_placement(c, p, dir == JMG_TO_CYCLIC, why, len);
}

/* One case end to end: the planner's verdict against the reference, and for a
 * valid plan its invariants and both directions of the apply. */
static int run_case(int64_t n, int ndev, int64_t tile, int64_t col_len,
                    char *why, size_t len) {
  jmg_cyclic_plan plan;
  jmg_error err;
  jmg_error_clear(&err);
  const int fits = ref_layout_fits(n, ndev, tile);
  int rc = jmg_cyclic_plan_init(&plan, n, ndev, tile, &err);
  if (!fits) {
    int bad = 0;
    if (rc != -JMG_EINVAL)
      bad =
          fail(why, len, "layout does not fit, but plan_init returned %d", rc);
    else if (err.code != JMG_EINVAL || err.msg[0] == '\0' ||
             plan.dest != NULL || plan.cycle_slots != NULL ||
             plan.cycle_start != NULL)
      bad = fail(why, len, "failed plan_init left code %d, msg \"%s\"",
                 (int)err.code, err.msg);
    if (rc == 0) jmg_cyclic_plan_free(&plan);
    return bad;
  }
  if (rc != 0)
    return fail(why, len, "layout fits, but plan_init failed: %s", err.msg);
  copy_ctx c;
  int bad = check_plan(&plan, n, ndev, tile, why, len);
  if (copy_ctx_init(&c, &plan, col_len) != 0) abort();
  /* One lane, then several with the lanes' copies run out of order (deferred):
   * each round trip ends in the contiguous layout the next one starts from. */
  static const int lanes[][2] = {{1, 0}, {2, 1}, {3, 1}, {4, 1}, {8, 1}};
  for (size_t k = 0; !bad && k < sizeof lanes / sizeof lanes[0]; ++k) {
    c.nlanes = lanes[k][0];
    c.deferred = lanes[k][1];
    bad = apply_checked(&c, &plan, JMG_TO_CYCLIC, why, len);
    if (!bad) bad = apply_checked(&c, &plan, JMG_FROM_CYCLIC, why, len);
    if (bad) {
      size_t used = strlen(why);
      snprintf(why + used, len - used, " (%d lanes%s)", c.nlanes,
               c.deferred ? ", run out of order" : "");
    }
  }
  copy_ctx_free(&c);
  jmg_cyclic_plan_free(&plan);
  return bad;
}

/* ---- tests ----------------------------------------------------------------
 */

TEST(layout_locate_matches_direct_formula) {
  for (int ndev = 1; ndev <= 8; ++ndev)
    for (int64_t tile = 1; tile <= 9; ++tile)
      for (int64_t col = 0; col < 200; ++col) {
        int dev = -1, rdev = -2;
        int64_t lc = -1, rlc = -2;
        jmg_cyclic_locate(col, ndev, tile, &dev, &lc);
        ref_locate(col, ndev, tile, &rdev, &rlc);
        CHECK_EQ(dev, rdev);
        CHECK_EQ(lc, rlc);
      }
  /* Spot values: T_A = 2 over 3 devices, column 7 is in tile 3 -> device 0,
   * its second tile, second column. */
  int dev;
  int64_t lc;
  jmg_cyclic_locate(7, 3, 2, &dev, &lc);
  CHECK_EQ(dev, 0);
  CHECK_EQ(lc, 3);
}

TEST(layout_exhaustive_small_cases_match_reference) {
  char why[512];
  int valid = 0, invalid = 0;
  for (int64_t n = 1; n <= 64; ++n)
    for (int ndev = 1; ndev <= 8; ++ndev)
      for (int64_t tile = 1; tile <= 9; ++tile) {
        if (run_case(n, ndev, tile, 3, why, sizeof why) != 0) {
          TEST_FAIL_AT("N=%lld ndev=%d T_A=%lld: %s", (long long)n, ndev,
                       (long long)tile, why);
          return;
        }
        if (ref_layout_fits(n, ndev, tile))
          ++valid;
        else
          ++invalid;
      }
  /* Both verdicts are well represented. */
  CHECK(valid > 500);
  CHECK(invalid > 500);
}

TEST(layout_random_large_cases_match_reference) {
  char why[512];
  uint64_t seed = 0x9E3779B97F4A7C15ULL;
  int valid = 0, invalid = 0;
  for (int i = 0; i < 48; ++i) {
    int ndev = (int)rng_range(&seed, 1, 16);
    int64_t lc = rng_range(&seed, 1, 20000 / ndev);
    int64_t n = lc * ndev, tile;
    switch (i % 4) {
      case 0:
      case 1: { /* a divisor of the shard size: always fits */
        int64_t t = rng_range(&seed, 1, lc);
        while (lc % t != 0) --t;
        tile = t;
        break;
      }
      case 2: /* anything up to twice the shard size: mostly does not fit */
        tile = rng_range(&seed, 1, 2 * lc);
        break;
      default: /* N not divisible by ndev (when ndev > 1) */
        n = n + (ndev > 1 ? rng_range(&seed, 1, ndev - 1) : 0);
        tile = rng_range(&seed, 1, 64);
        break;
    }
    if (run_case(n, ndev, tile, 1, why, sizeof why) != 0) {
      TEST_FAIL_AT("N=%lld ndev=%d T_A=%lld: %s", (long long)n, ndev,
                   (long long)tile, why);
      return;
    }
    if (ref_layout_fits(n, ndev, tile))
      ++valid;
    else
      ++invalid;
  }
  /* Fixed large cases: many small units, and a tile of a few columns. */
  static const int64_t fixed[][3] = {
      {20000, 16, 1},  {19998, 3, 3},  {20000, 8, 50},
      {16384, 16, 64}, {18000, 12, 7}, /* 1500 % 7 != 0: must fail */
  };
  for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; ++k) {
    if (run_case(fixed[k][0], (int)fixed[k][1], fixed[k][2], 1, why,
                 sizeof why) != 0) {
      TEST_FAIL_AT("N=%lld ndev=%lld T_A=%lld: %s", (long long)fixed[k][0],
                   (long long)fixed[k][1], (long long)fixed[k][2], why);
      return;
    }
  }
  CHECK(!ref_layout_fits(18000, 12, 7));
  CHECK(valid >= 24);
  CHECK(invalid >= 12);
}

TEST(layout_failing_copy_stops_apply_with_its_error) {
  jmg_cyclic_plan plan;
  jmg_error err;
  jmg_error_clear(&err);
  /* 24 columns over 4 devices, T_A = 1: 6 columns each, several cycles. */
  CHECK_EQ(jmg_cyclic_plan_init(&plan, 24, 4, 1, &err), 0);
  const int64_t total = expected_copies(&plan);
  CHECK(plan.ncycles >= 2);
  int failed_cases = 0;
  for (int dir = 0; dir < 2 && !failed_cases; ++dir) {
    for (int64_t k = 1; k <= total + 1; ++k) {
      copy_ctx c;
      if (copy_ctx_init(&c, &plan, 2) != 0) abort();
      c.fail_at = k;
      jmg_error_clear(&err);
      int rc = jmg_cyclic_apply(&plan, (jmg_cyclic_direction)dir, 1,
                                memcpy_unit, &c, &err);
      int64_t calls = c.calls;
      copy_ctx_free(&c);
      if (k <= total) {
        /* The k-th copy failed: its error comes back and nothing follows. */
        char want[64];
        snprintf(want, sizeof want, "injected failure on copy %lld",
                 (long long)k);
        if (rc != -JMG_ECUDA || calls != k || strstr(err.msg, want) == NULL ||
            strcmp(err.call, "cudaMemcpyPeerAsync") != 0) {
          TEST_FAIL_AT("dir=%d k=%lld: rc=%d calls=%lld msg=\"%s\"", dir,
                       (long long)k, rc, (long long)calls, err.msg);
          failed_cases = 1;
          break;
        }
      } else if (rc != 0 || calls != total) {
        TEST_FAIL_AT("dir=%d: no failure expected, rc=%d calls=%lld", dir, rc,
                     (long long)calls);
        failed_cases = 1;
        break;
      }
    }
  }
  jmg_cyclic_plan_free(&plan);
  CHECK(!failed_cases);
}

TEST(layout_plan_rejects_bad_arguments) {
  jmg_cyclic_plan plan;
  jmg_error err;
  static const struct {
    int64_t n;
    int ndev;
    int64_t tile;
    const char *says;
  } bad[] = {
      {0, 1, 1, "need n >= 1"},
      {-8, 2, 1, "need n >= 1"},
      {8, 0, 1, "need n >= 1"},
      {8, -2, 1, "need n >= 1"},
      {8, 2, 0, "need n >= 1"},
      {8, 2, -4, "need n >= 1"},
      {10, 4, 1, "N=10 is not divisible by the 4 devices"},
      {7, 2, 7, "not divisible"},
      /* divisible, but the layout does not fit: 3 columns each, T_A = 2 */
      {6, 2, 2, "T_A=2 does not fit the shard size 3"},
      {16, 4, 8, "pad the shard to a multiple of T_A"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    jmg_error_clear(&err);
    int rc =
        jmg_cyclic_plan_init(&plan, bad[i].n, bad[i].ndev, bad[i].tile, &err);
    if (rc != -JMG_EINVAL) {
      TEST_FAIL_AT("case %zu: rc=%d", i, rc);
      if (rc == 0) jmg_cyclic_plan_free(&plan);
      return;
    }
    CHECK_EQ(err.code, JMG_EINVAL);
    CHECK_CONTAINS(err.call, "layout");
    CHECK_CONTAINS(err.msg, bad[i].says);
    /* A failed plan owns nothing; freeing it (twice) is harmless. */
    CHECK(plan.dest == NULL && plan.cycle_start == NULL &&
          plan.cycle_slots == NULL);
    jmg_cyclic_plan_free(&plan);
    jmg_cyclic_plan_free(&plan);
  }
  jmg_cyclic_plan_free(NULL);
}

TEST(layout_trivial_plans_move_nothing) {
  jmg_cyclic_plan plan;
  jmg_error err;
  /* One device, or T_A equal to the shard size: no cycles, no copies. */
  static const int64_t cases[][3] = {
      {12, 1, 5}, {12, 3, 4}, {1, 1, 1}, {64, 8, 8}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    CHECK_EQ(jmg_cyclic_plan_init(&plan, cases[i][0], (int)cases[i][1],
                                  cases[i][2], &err),
             0);
    int64_t ncycles = plan.ncycles;
    copy_ctx c;
    if (copy_ctx_init(&c, &plan, 1) != 0) abort();
    int rc = jmg_cyclic_apply(&plan, JMG_TO_CYCLIC, 1, memcpy_unit, &c, &err);
    int64_t calls = c.calls;
    copy_ctx_free(&c);
    jmg_cyclic_plan_free(&plan);
    CHECK_EQ(ncycles, 0);
    CHECK_EQ(rc, 0);
    CHECK_EQ(calls, 0);
  }
  /* 4 columns over 2 devices, T_A = 1: columns 1 and 2 swap. */
  CHECK_EQ(jmg_cyclic_plan_init(&plan, 4, 2, 1, &err), 0);
  int64_t ncycles = plan.ncycles, unit = plan.unit;
  int64_t d0 = plan.dest[0], d1 = plan.dest[1], d2 = plan.dest[2],
          d3 = plan.dest[3];
  jmg_cyclic_plan_free(&plan);
  CHECK_EQ(unit, 1);
  CHECK_EQ(ncycles, 1);
  CHECK_EQ(d0, 0);
  CHECK_EQ(d1, 2);
  CHECK_EQ(d2, 1);
  CHECK_EQ(d3, 3);
}
