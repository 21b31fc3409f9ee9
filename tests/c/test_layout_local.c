/* The local model's planners (layout/local.h), checked against direct
 * definitions written here: the block-cyclic maps by counting, Π by
 * src(s P + r) = r q + s, and the redistribution by simulating the sends and
 * receives with one FIFO per pair of ranks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout/local.h"
#include "mem/mem.h"
#include "test.h"

/* (n, P, T_A) with T_A dividing n / P. */
static const int64_t g_cases[][3] = {
    {1, 1, 1},  {4, 1, 2},  {6, 2, 3},   {8, 2, 2},  {8, 2, 4},
    {12, 3, 2}, {12, 2, 2}, {16, 4, 2},  {24, 4, 3}, {24, 2, 4},
    {30, 3, 5}, {32, 8, 2}, {36, 3, 3},  {48, 4, 4}, {60, 5, 3},
    {64, 4, 8}, {72, 6, 4}, {96, 8, 3}};
#define NCASES ((int)(sizeof g_cases / sizeof g_cases[0]))

/* The tile of M that is tile k of H, directly. */
static int64_t ref_src(int64_t k, int P, int64_t q) {
  return (k % P) * q + k / P;
}
/* The index of M that is index i of H. */
static int64_t ref_sigma(int64_t i, int P, int64_t T, int64_t q) {
  return ref_src(i / T, P, q) * T + i % T;
}

static int host_copy2d(void *ctx, void *dst, size_t dp, const void *src,
                       size_t sp, size_t width, size_t height, jmg_error *err) {
  (void)err;
  int *calls = ctx;
  if (calls) ++*calls;
  for (size_t r = 0; r < height; ++r)
    memmove((char *)dst + r * dp, (const char *)src + r * sp, width);
  return 0;
}

TEST(local_layout_block_cyclic_maps_match_counting) {
  for (int64_t n = 1; n <= 40; ++n)
    for (int64_t b = 1; b <= 7; ++b)
      for (int p = 1; p <= 5; ++p) {
        int64_t count[5] = {0};
        for (int64_t g = 0; g < n; ++g) {
          const int owner = jmg_bc_owner(g, b, p);
          CHECK_EQ(owner, (g / b) % p);
          const int64_t l = jmg_bc_local(g, b, p);
          /* Local indices fill 0, 1, ... in global order on each process. */
          CHECK_EQ(l, count[owner]);
          ++count[owner];
          CHECK_EQ(jmg_bc_global(l, b, owner, p), g);
        }
        for (int q = 0; q < p; ++q) CHECK_EQ(jmg_bc_count(n, b, q, p), count[q]);
      }
}

TEST(local_layout_perm_rejects_what_the_model_cannot_hold) {
  jmg_local_perm p;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_local_perm_init(&p, 12, 2, 4, "potrs", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.msg, "T_A");
  CHECK_CONTAINS(err.op, "potrs");
  CHECK_EQ(jmg_local_perm_init(&p, 10, 3, 1, "potrs", &err), -JMG_EINVAL);
  CHECK_EQ(jmg_local_perm_init(&p, 8, 2, 4, "potrs", &err), 0);
  CHECK_EQ(p.plan.unit, 4);
  jmg_local_perm_free(&p);
  /* One rank: the identity, whatever T_A. */
  CHECK_EQ(jmg_local_perm_init(&p, 10, 1, 4, "potrs", &err), 0);
  CHECK_EQ(p.plan.ncycles, 0);
  CHECK_EQ(p.tile, 10);
  jmg_local_perm_free(&p);
}

/* Π A Πᵀ's parts: every rank's shard, its row tiles reordered in place,
 * is its part of the 1 x P block-cyclic layout of H = Π M Πᵀ; Πᵀ undoes it;
 * the out-of-place gather agrees; and H (Π x) = Π (M x). */
TEST(local_layout_row_permutation_gives_the_parts_of_pi_a_pi_t) {
  for (int c = 0; c < NCASES; ++c) {
    const int64_t n = g_cases[c][0], T = g_cases[c][2];
    const int P = (int)g_cases[c][1];
    const int64_t L = n / P, q = L / T;
    jmg_local_perm p;
    jmg_error err;
    jmg_error_clear(&err);
    CHECK_EQ(jmg_local_perm_init(&p, n, P, T, "test", &err), 0);
    double *m = malloc((size_t)(n * n) * sizeof *m);
    double *part = malloc((size_t)(n * L) * sizeof *part);
    double *gath = malloc((size_t)(n * L) * sizeof *gath);
    double *stage = malloc((size_t)(T * L) * sizeof *stage);
    double *h = malloc((size_t)(n * n) * sizeof *h); /* H, assembled */
    CHECK(m && part && gath && stage && h);
    for (int64_t i = 0; i < n * n; ++i) m[i] = (double)(i * 7 % 1009) + 0.25;
    for (int r = 0; r < P; ++r) {
      const double *shard = m + (size_t)(r * L * n);
      memcpy(part, shard, (size_t)(n * L) * sizeof *part);
      CHECK_EQ(jmg_local_rows_permute(&p, JMG_LOCAL_APPLY, part, n, L,
                                      sizeof(double), stage, host_copy2d, NULL,
                                      &err),
               0);
      for (int64_t lc = 0; lc < L; ++lc) {
        const int64_t j = jmg_bc_global(lc, T, r, P); /* H's column */
        for (int64_t i = 0; i < n; ++i) {
          const double want =
              m[ref_sigma(i, P, T, q) + ref_sigma(j, P, T, q) * n];
          if (part[i + lc * n] != want) {
            TEST_FAIL_AT("n=%lld P=%d T=%lld rank %d: H(%lld,%lld) wrong",
                         (long long)n, P, (long long)T, r, (long long)i,
                         (long long)j);
            return;
          }
          h[i + j * n] = part[i + lc * n];
        }
      }
      /* The gather gives the same part. */
      CHECK_EQ(jmg_local_rows_gather(&p, JMG_LOCAL_APPLY, gath, shard, n, L,
                                     sizeof(double), host_copy2d, NULL, &err),
               0);
      CHECK(memcmp(gath, part, (size_t)(n * L) * sizeof *part) == 0);
      /* Πᵀ brings the shard back, in place and out of place. */
      CHECK_EQ(jmg_local_rows_gather(&p, JMG_LOCAL_UNDO, gath, part, n, L,
                                     sizeof(double), host_copy2d, NULL, &err),
               0);
      CHECK(memcmp(gath, shard, (size_t)(n * L) * sizeof *part) == 0);
      CHECK_EQ(jmg_local_rows_permute(&p, JMG_LOCAL_UNDO, part, n, L,
                                      sizeof(double), stage, host_copy2d, NULL,
                                      &err),
               0);
      CHECK(memcmp(part, shard, (size_t)(n * L) * sizeof *part) == 0);
    }
    /* H (Π x) = Π (M x), with Π x made by the planner (B of 2 columns, ld
     * n + 3: the rows past n stay as they are). */
    const int64_t ld = n + 3, nrhs = 2;
    double *x = malloc((size_t)(ld * nrhs) * sizeof *x);
    double *px = malloc((size_t)(ld * nrhs) * sizeof *px);
    double *bstage = malloc((size_t)(T * nrhs) * sizeof *bstage);
    CHECK(x && px && bstage);
    for (int64_t i = 0; i < ld * nrhs; ++i) x[i] = (double)((i * 13) % 17) - 8;
    memcpy(px, x, (size_t)(ld * nrhs) * sizeof *x);
    CHECK_EQ(jmg_local_rows_permute(&p, JMG_LOCAL_APPLY, px, ld, nrhs,
                                    sizeof(double), bstage, host_copy2d, NULL,
                                    &err),
             0);
    for (int64_t k = 0; k < nrhs; ++k) {
      for (int64_t i = n; i < ld; ++i) CHECK(px[i + k * ld] == x[i + k * ld]);
      for (int64_t i = 0; i < n; ++i) {
        double hpx = 0, mx = 0;
        const int64_t si = ref_sigma(i, P, T, q);
        for (int64_t j = 0; j < n; ++j) {
          hpx += h[i + j * n] * px[j + k * ld];
          mx += m[si + j * n] * x[j + k * ld];
        }
        CHECK(hpx == mx); /* quarters, far below 2^53: exact in any order */
      }
    }
    free(x), free(px), free(bstage);
    free(m), free(part), free(gath), free(stage), free(h);
    jmg_local_perm_free(&p);
  }
}

TEST(local_layout_identity_permutation_copies_once) {
  jmg_local_perm p;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_local_perm_init(&p, 12, 1, 3, "test", &err), 0);
  CHECK_EQ(p.plan.ncycles, 0);
  double a[36], b[36];
  for (int i = 0; i < 36; ++i) a[i] = i;
  int calls = 0;
  CHECK_EQ(jmg_local_rows_permute(&p, JMG_LOCAL_APPLY, a, 12, 3, sizeof(double),
                                  NULL, host_copy2d, &calls, &err),
           0);
  CHECK_EQ(calls, 0);
  CHECK_EQ(jmg_local_rows_gather(&p, JMG_LOCAL_APPLY, b, a, 12, 3,
                                 sizeof(double), host_copy2d, &calls, &err),
           0);
  CHECK_EQ(calls, 1);
  CHECK(memcmp(a, b, sizeof a) == 0);
  jmg_local_perm_free(&p);
}

/* A solver's info about H, numbered as M's rows: a diagonal M whose only
 * non-positive entry is row j has, as H = Π M Πᵀ, its failing leading minor
 * at the row of H where Π moved row j; jmg_local_perm_info names j + 1
 * (what an engine factoring M itself reports). 2 ranks, N = 8, T_A = 2
 * (tests/python/mpmd_worker.py's status check): H's minor 4 is M's 6. */
TEST(local_layout_info_of_h_is_numbered_as_m_rows) {
  static const int cases[][3] = {{8, 2, 2}, {8, 1, 2}, {16, 4, 2},
                                 {12, 2, 3}, {24, 3, 4}, {32, 2, 4}};
  jmg_error err;
  jmg_error_clear(&err);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const int n = cases[c][0], P = cases[c][1], T = cases[c][2];
    jmg_local_perm p;
    CHECK_EQ(jmg_local_perm_init(&p, n, P, T, "test", &err), 0);
    for (int j = 0; j < n; ++j) {
      double d[32], h[32];
      for (int i = 0; i < n; ++i) d[i] = i == j ? -1.0 : 1.0;
      int calls = 0;
      CHECK_EQ(jmg_local_rows_gather(&p, JMG_LOCAL_APPLY, h, d, n, 1,
                                     sizeof(double), host_copy2d, &calls,
                                     &err),
               0);
      int at = -1;
      for (int i = 0; i < n; ++i)
        if (h[i] < 0) at = i;
      CHECK(at >= 0);
      CHECK_EQ(jmg_local_perm_info(&p, at + 1), j + 1);
    }
    CHECK_EQ(jmg_local_perm_info(&p, 0), 0);
    CHECK_EQ(jmg_local_perm_info(&p, -3), -3);
    CHECK_EQ(jmg_local_perm_info(&p, n + 1), n + 1);
    jmg_local_perm_free(&p);
  }
  jmg_local_perm p;
  CHECK_EQ(jmg_local_perm_init(&p, 8, 2, 2, "test", &err), 0);
  CHECK_EQ(jmg_local_perm_info(&p, 4), 6);
  jmg_local_perm_free(&p);
}

static int failing_copy2d(void *ctx, void *dst, size_t dp, const void *src,
                          size_t sp, size_t width, size_t height,
                          jmg_error *err) {
  (void)ctx, (void)dst, (void)dp, (void)src, (void)sp, (void)width,
      (void)height;
  return jmg_error_set(err, JMG_ECUDA, "test", "copy2d", "refused");
}

TEST(local_layout_failing_copy_stops_with_its_error) {
  jmg_local_perm p;
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(jmg_local_perm_init(&p, 16, 4, 2, "test", &err), 0);
  double a[64], st[8];
  CHECK_EQ(jmg_local_rows_permute(&p, JMG_LOCAL_APPLY, a, 16, 4, sizeof(double),
                                  st, failing_copy2d, NULL, &err),
           -JMG_ECUDA);
  CHECK_CONTAINS(err.msg, "refused");
  jmg_local_perm_free(&p);
}

/* Sends and receives match one to one and in order per pair of ranks, and
 * running them on small matrices moves the eigenvectors from the
 * block-cyclic column order to the contiguous one. */
TEST(local_layout_redistribution_is_a_matching_bijection) {
  for (int c = 0; c < NCASES; ++c) {
    const int64_t n = g_cases[c][0];
    const int P = (int)g_cases[c][1];
    jmg_local_perm p;
    jmg_error err;
    jmg_error_clear(&err);
    CHECK_EQ(jmg_local_perm_init(&p, n, P, g_cases[c][2], "test", &err), 0);
    const int64_t T = p.tile; /* n on one rank */
    const int64_t L = n / P, q = L / T;
    jmg_local_redist *r = calloc((size_t)P, sizeof *r);
    CHECK(r != NULL);
    for (int k = 0; k < P; ++k)
      CHECK_EQ(jmg_local_redist_init(&r[k], &p, k, "test", &err), 0);
    /* Every (rank, tile) is the target of exactly one send, and the target's
     * receive names the sender. */
    unsigned char *hit = calloc((size_t)(P * q), 1);
    CHECK(hit != NULL);
    for (int a = 0; a < P; ++a) {
      CHECK_EQ(r[a].ntiles, q);
      for (int64_t s = 0; s < q; ++s) {
        const jmg_local_move m = r[a].send[s];
        CHECK(m.peer >= 0 && m.peer < P && m.tile >= 0 && m.tile < q);
        CHECK(!hit[m.peer * q + m.tile]);
        hit[m.peer * q + m.tile] = 1;
        CHECK_EQ(r[m.peer].recv[m.tile].peer, a);
        CHECK_EQ(r[m.peer].recv[m.tile].tile, s);
      }
    }
    free(hit);
    /* Simulate: the data of local tile s of rank a is a column tile of V;
     * for each pair (a, b) a FIFO of sends in issue order, received in
     * issue order. */
    double *v = malloc((size_t)(n * n) * sizeof *v);
    double *out = malloc((size_t)(n * n) * sizeof *out);
    int64_t *fifo = malloc((size_t)(P * P * (q + 1)) * sizeof *fifo);
    int64_t *head = calloc((size_t)(P * P), sizeof *head);
    int64_t *tail = calloc((size_t)(P * P), sizeof *tail);
    CHECK(v && out && fifo && head && tail);
    for (int64_t i = 0; i < n * n; ++i) v[i] = (double)i;
    for (int a = 0; a < P; ++a)
      for (int64_t s = 0; s < q; ++s) { /* sends, in order */
        const int b = r[a].send[s].peer;
        fifo[(a * P + b) * (q + 1) + tail[a * P + b]++] = s;
      }
    for (int b = 0; b < P; ++b)
      for (int64_t s = 0; s < q; ++s) { /* receives, in order */
        const int a = r[b].recv[s].peer;
        CHECK(head[a * P + b] < tail[a * P + b]);
        const int64_t sent = fifo[(a * P + b) * (q + 1) + head[a * P + b]++];
        /* Rank a's block-cyclic local tile `sent` is V's column tile
         * sent * P + a; it lands in rank b's contiguous local tile s. */
        memcpy(out + (size_t)((b * L + s * T) * n),
               v + (size_t)(((sent * P + a) * T) * n),
               (size_t)(T * n) * sizeof *v);
      }
    for (int a = 0; a < P * P; ++a) CHECK_EQ(head[a], tail[a]);
    CHECK(memcmp(out, v, (size_t)(n * n) * sizeof *v) == 0);
    free(v), free(out), free(fifo), free(head), free(tail);
    for (int k = 0; k < P; ++k) jmg_local_redist_free(&r[k]);
    free(r);
    jmg_local_perm_free(&p);
  }
}

/* The host's copy2d (mem/mem.h): pitched rows, nothing past the width. */
/* (n, P, grid rows, T_A): every grid shape of 1, 2, 4, 6 and 8 ranks. */
static const int64_t g_grids[][4] = {
    {4, 1, 1, 2},   {8, 2, 2, 2},  {8, 2, 1, 4},  {16, 4, 2, 2}, {16, 4, 4, 1},
    {24, 4, 2, 3},  {32, 4, 1, 2}, {24, 6, 2, 2}, {24, 6, 3, 2}, {48, 6, 3, 4},
    {32, 8, 2, 2},  {32, 8, 4, 2}, {64, 8, 8, 2}, {48, 8, 2, 3}};

/* Moves every rank's line part of H onto the grid and back, simulating the
 * messages: rank a's message to b is its packed tiles for b, which b
 * unpacks from where its plan expects a's. Checks the grid parts against
 * the 2D block-cyclic map and the round trip against the start. */
TEST(local_layout_grid_moves_are_the_2d_block_cyclic_layout_and_back) {
  for (size_t c = 0; c < sizeof g_grids / sizeof g_grids[0]; ++c) {
    const int64_t n = g_grids[c][0], T = g_grids[c][3];
    const int P = (int)g_grids[c][1], R = (int)g_grids[c][2], C = P / R;
    const int64_t L = n / P, part = n * L;
    jmg_local_regrid g[8];
    double *h = malloc((size_t)(n * n) * sizeof *h);
    double *line = malloc((size_t)(n * n) * sizeof *line);
    double *back = malloc((size_t)(n * n) * sizeof *back);
    double *grid = malloc((size_t)(n * n) * sizeof *grid);
    double *out = malloc((size_t)(n * n) * sizeof *out);
    double *in = malloc((size_t)(n * n) * sizeof *in);
    CHECK(h && line && back && grid && out && in);
    for (int64_t i = 0; i < n * n; ++i) h[i] = (double)i + 0.25;
    for (int r = 0; r < P; ++r) {
      jmg_error err;
      CHECK_EQ(jmg_local_regrid_init(&g[r], n, T, P, R, r, "syevd", &err), 0);
      CHECK_EQ(g[r].rows * g[r].cols, part);
      for (int64_t lc = 0; lc < L; ++lc) /* the line: column tiles mod P */
        memcpy(line + r * part + lc * n, h + jmg_bc_global(lc, T, r, P) * n,
               (size_t)n * sizeof *h);
    }
    for (int dir = 0; dir < 2; ++dir) {
      const jmg_local_grid_dir d = dir ? JMG_LOCAL_FROM_GRID : JMG_LOCAL_TO_GRID;
      for (int r = 0; r < P; ++r) {
        jmg_error err;
        CHECK_EQ(jmg_local_regrid_pack(&g[r], d, out + r * part,
                                       (dir ? grid : line) + r * part,
                                       sizeof(double), host_copy2d, NULL, &err),
                 0);
      }
      for (int a = 0; a < P; ++a)
        for (int b = 0; b < P; ++b) {
          int64_t so, ro;
          const int64_t sent = jmg_local_regrid_sends(&g[a], d, b, &so);
          const int64_t got = jmg_local_regrid_recvs(&g[b], d, a, &ro);
          CHECK_EQ(sent, got);
          memcpy(in + b * part + ro * T * T, out + a * part + so * T * T,
                 (size_t)(sent * T * T) * sizeof *in);
        }
      for (int r = 0; r < P; ++r) {
        jmg_error err;
        CHECK_EQ(jmg_local_regrid_unpack(&g[r], d, (dir ? back : grid) + r * part,
                                         in + r * part, sizeof(double),
                                         host_copy2d, NULL, &err),
                 0);
      }
    }
    for (int r = 0; r < P; ++r) {
      const int row = r % R, col = r / R;
      const double *gp = grid + r * part;
      for (int64_t lj = 0; lj < n / C; ++lj)
        for (int64_t li = 0; li < n / R; ++li) {
          const int64_t i = jmg_bc_global(li, T, row, R);
          const int64_t j = jmg_bc_global(lj, T, col, C);
          if (gp[li + lj * (n / R)] != h[i + j * n]) {
            TEST_FAIL_AT("n=%lld P=%d R=%d T=%lld: rank %d (%lld, %lld) is "
                         "not H(%lld, %lld)",
                         (long long)n, P, R, (long long)T, r, (long long)li,
                         (long long)lj, (long long)i, (long long)j);
            return;
          }
        }
    }
    CHECK(memcmp(back, line, (size_t)(n * n) * sizeof *line) == 0);
    for (int r = 0; r < P; ++r) jmg_local_regrid_free(&g[r]);
    free(h), free(line), free(back), free(grid), free(out), free(in);
  }
}

TEST(local_layout_grid_rejects_rows_that_do_not_divide_the_ranks) {
  jmg_local_regrid g;
  jmg_error err;
  CHECK_EQ(jmg_local_regrid_init(&g, 24, 2, 6, 4, 0, "potrs", &err), -JMG_EINVAL);
  CHECK_CONTAINS(err.op, "potrs");
  CHECK_CONTAINS(err.msg, "4-row grid of 6 ranks");
  CHECK_EQ(jmg_local_regrid_init(&g, 24, 5, 4, 2, 0, "potrs", &err), -JMG_EINVAL);
}

TEST(host_mem_copy2d_copies_pitched_rows) {
  const jmg_mem *m = jmg_host_mem();
  void *ctx = NULL;
  const jmg_mem_group g = {1, &ctx};
  jmg_error err;
  jmg_error_clear(&err);
  double src[5 * 3], dst[4 * 3];
  for (int i = 0; i < 15; ++i) src[i] = i;
  for (int i = 0; i < 12; ++i) dst[i] = -1;
  /* A 2 x 3 block at row 1 of a 5-row matrix, to row 2 of a 4-row one. */
  CHECK_EQ(m->copy2d(&g, 0, dst + 2, 4 * sizeof(double), src + 1,
                     5 * sizeof(double), 2 * sizeof(double), 3, &err),
           0);
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < 4; ++r)
      CHECK(dst[r + 4 * c] == (r >= 2 ? src[r - 1 + 5 * c] : -1));
}

/* The power-of-two blocks (cusolverMpSyevd's): the largest power of two at
 * most T_A dividing the shard; on one rank any, at most min(T_A, n). Checked
 * against a direct search. */
TEST(local_layout_pow2_block_divides_the_shard) {
  static const int64_t ns[] = {1, 7, 16, 24, 3000, 4096, 6000, 12288};
  static const int ranks[] = {1, 2, 3, 4};
  static const int64_t tiles[] = {1, 3, 64, 750, 1024, 1500, 2048, 4096};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; ++i)
    for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; ++r)
      for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; ++t) {
        const int64_t n = ns[i], tile = tiles[t];
        const int P = ranks[r];
        if (n % P != 0) continue;
        int64_t want = 1;
        for (int64_t b = 1; b <= tile && b <= n; b *= 2)
          if (P == 1 || (n / P) % b == 0) want = b;
        CHECK_EQ(jmg_local_pow2_block(n, P, tile), want);
      }
  CHECK_EQ(jmg_local_pow2_block(3000, 1, 1500), 1024);
  CHECK_EQ(jmg_local_pow2_block(3000, 2, 1500), 4);
  CHECK_EQ(jmg_local_pow2_block(6144, 2, 3072), 1024);
}
