/* The gather engine's table of sizes (thresholds.h): on a group of several
 * GPUs of one node, the gather engine (A copied onto GPU 0, cuSOLVERDn
 * there, results copied back) is preferred to cuSOLVERMg when N < below.
 *
 * How the numbers were read. The measurements compare cuSOLVERMg on the
 * group (jaxmg's distributed engine, the permutation included) with one GPU
 * solving the whole matrix (JAX's solver, or jaxmg's cuSOLVERDn engine,
 * which runs at JAX's speed: bench/results/2026-11-23-h100x1-one-gpu). The
 * gather engine costs the one GPU's time plus the permutation (which both
 * pay) plus the copies to GPU 0 and back (N^2 elements over NVLink; an
 * estimate, not measured: about 5 ms for 2 GB at 400 GB/s, a few percent of
 * the solve at these sizes). A size is
 * "below" the first measured N where the distributed engine was as fast or
 * faster; between measured sizes the smaller is taken (the distributed
 * engine keeps what is in doubt: it is what ran before this table).
 *
 * Sources:
 *   [h200x4]   bench/results/2026-11-21-h200x4/table.txt (4 and 2 H200,
 *              cuSOLVERMg against one-GPU JAX, 2026-11-21)
 *   [design]   /work/shared/DESIGN.md, "Facts measured on 4 x H200"
 *   [h100x1]   bench/results/2026-11-23-h100x1-one-gpu (jaxmg's cuSOLVERDn
 *              engine and JAX on one H100; an H200 is no slower)
 *   [scaling]  bench/results/2026-11-27-h200x4-scaling (bench/scaling.py on
 *              4 H200: each engine on 1, 2 and 4 of them beside one-GPU JAX,
 *              float64, the default T_A; 2026-11-27)
 *   [s17]      bench/results/2026-11-27-s17-h200x4-scaling (the same on 1
 *              and 2 of 4 H200, N = 16384 and 32768, with JAXMG_TRACE's
 *              per-step times in raw/; 2026-11-27)
 *   [s20]      bench/results/2026-11-28-s20-h200x4-scaling (potri2/, potri4/:
 *              the tiled inverse of engine/cusolvermg/cuda_potri.c on 2
 *              and 4 H200 beside the gathered one GPU and JAX; 2026-11-28)
 * Rows with measured = 0 are guesses, to be replaced by the table of the
 * multi-GPU measurement issue (issue 20). Groups of more than 4 GPUs have no
 * row: nothing was measured there, and the distributed engine runs them. */
#include "engine/gather/thresholds.h"

#include <stdio.h>

const jmg_gather_row jmg_gather_rows[] = {
    {JMG_OP_POTRS, 0, 2, 4, 16384, 1,
     "[h200x4] float64 on 4 GPUs: N=8192 0.0137 s (T_A 2048) vs one GPU "
     "0.0101 s; N=16384 0.0458 s vs 0.0417 s (even once the copies are "
     "paid); N=32768 0.1855 s vs 0.2747 s. On 2 GPUs: 0.0150 / 0.0489 / "
     "0.2175 s. float32 alike (N=16384, 4 GPUs: 0.0424 s vs 0.0440 s); "
     "3 GPUs not measured",
     0},
    {JMG_OP_POTRS, 1, 2, 4, 8192, 0,
     "guess: complex not measured; 4x the flops of real at the same N, so "
     "the distributed engine catches up sooner: half the real size",
     0},
    {JMG_OP_POTRI, 1, 2, 4, 8192, 0,
     "guess: complex not measured since the tiled inverse (session 20); "
     "it has 4x real's flops at the same N, so several GPUs win no later "
     "than for real. The local model keeps the measured row of before "
     "([h200x4]: cuSOLVERMg's potri on 4 GPUs against one GPU [h100x1], "
     "one GPU faster below 32768)",
     32768},
    {JMG_OP_POTRI, 0, 2, 2, 8192, 1,
     "[s20] float64 on 2 GPUs, the tiled inverse (cusolvermg) against the "
     "gathered one GPU: N=8192 0.0263 s vs 0.0646 s, N=16384 0.0936 vs "
     "0.275 s, N=32768 0.492 vs 1.399 s (JAX 0.070 / 0.331 / 2.144 s); "
     "below 8192 not measured. The local model (cuSOLVERMp's potri) keeps "
     "[s17]'s 65536: one GPU faster at 32768",
     65536},
    {JMG_OP_POTRI, 0, 3, 4, 8192, 1,
     "[s20] float64 on 4 GPUs, the tiled inverse: N=16384 0.082 s vs the "
     "gathered one GPU 0.280 s, N=32768 0.340 s (JAX 0.332 / 2.137 s); "
     "N=8192 not measured on 4 (2 GPUs win there, [s20]: the distributed "
     "engine keeps the doubt); 3 GPUs not measured. The local model keeps "
     "[scaling]'s 32768",
     32768},
    {JMG_OP_SYEVD, 0, 3, 4, 32768, 1,
     "[h200x4] and [design], float64 on 4 GPUs: N=4096 0.797 s, 8192 1.76 s, "
     "16384 5.93 s, 32768 21.4 s vs one GPU 0.111, 0.555, 3.22, 22.5 s "
     "(about even at 32768); 3 GPUs not measured",
     0},
    {JMG_OP_SYEVD, 0, 2, 2, 32768, 0,
     "guess: measured at N=4096 only (2 GPUs 0.752 s vs one GPU 0.111 s "
     "[h200x4]); 2 GPUs catch up no sooner than 4: the 4-GPU size",
     0},
    {JMG_OP_SYEVD, 1, 2, 4, 16384, 0,
     "guess: complex not measured; half the real size",
     0},
    {JMG_OP_LU_SOLVE, 0, 2, 4, 32768, 1,
     "[scaling] float64, jaxmg's tiled LU on cuSOLVERMg: N=8192 0.0733 s "
     "(2 GPUs), 0.0694 s (4) vs one GPU 0.0419 s (JAX 0.0405 s); N=16384 "
     "0.185 / 0.183 s vs 0.144 s (JAX 0.141 s); N=32768 on 2 GPUs 0.625 s "
     "vs one GPU 0.715 s [s17]; 3 GPUs not measured",
     0},
    {JMG_OP_LU_SOLVE, 1, 2, 4, 32768, 0, "guess: not measured; as real",
     0},
    {JMG_NUM_OPS, 0, 0, 0, 0, 0, NULL, 0},
};

const jmg_gather_row *jmg_gather_row_of(jmg_op op, jmg_dtype dtype,
                                        int nparts) {
  const int complex = jmg_dtype_is_complex(dtype);
  for (const jmg_gather_row *r = jmg_gather_rows; r->op != JMG_NUM_OPS; ++r)
    if (r->op == op && r->complex == complex && nparts >= r->min_parts &&
        nparts <= r->max_parts)
      return r;
  return NULL;
}

int jmg_gather_prefers(const jmg_engine *e, const jmg_problem *p, char *why,
                       size_t why_len) {
  (void)e;
  if (p->nparts < 2) {
    snprintf(why, why_len, "one GPU: nothing to gather (cusolverdn runs it)");
    return 0;
  }
  /* gesvd, sygvd, qr: cuSOLVERMg has none of them, so within a node no
   * other leader engine runs them (no size to weigh; gesvd.c, sygvd.c and
   * qr.c say what happens where the copy does not fit). */
  if (p->op == JMG_OP_GESVD || p->op == JMG_OP_SYGVD || p->op == JMG_OP_QR)
    return 1;
  const jmg_gather_row *r = jmg_gather_row_of(p->op, p->dtype, p->nparts);
  if (r == NULL) {
    snprintf(why, why_len,
             "no size measured for %s %s on %d GPUs "
             "(engine/gather/thresholds.c)",
             jmg_op_name(p->op), jmg_dtype_name(p->dtype), p->nparts);
    return 0;
  }
  if (p->n >= r->below) {
    snprintf(why, why_len,
             "N=%lld >= %lld: the distributed engine is faster from there "
             "(engine/gather/thresholds.c)",
             (long long)p->n, (long long)r->below);
    return 0;
  }
  return 1;
}

/* The local model's rows: syevd's for sygvd too (it reduces to the
 * standard problem and runs the same eigensolver on one GPU as on
 * several); no row for qr (not measured: cuSOLVERMp runs it). */
int jmg_gather_local_prefers(const jmg_engine *e, const jmg_problem *p,
                             char *why, size_t why_len) {
  (void)e;
  if (p->nparts < 2) {
    snprintf(why, why_len,
             "one GPU: nothing to gather (cusolvermp runs cuSOLVERDn in "
             "place)");
    return 0;
  }
  const jmg_op op = p->op == JMG_OP_SYGVD ? JMG_OP_SYEVD : p->op;
  const jmg_gather_row *r = jmg_gather_row_of(op, p->dtype, p->nparts);
  if (r == NULL) {
    snprintf(why, why_len,
             "no size measured for %s %s on %d GPUs "
             "(engine/gather/thresholds.c): cuSOLVERMp runs it",
             jmg_op_name(p->op), jmg_dtype_name(p->dtype), p->nparts);
    return 0;
  }
  const int64_t below = r->local_below > 0 ? r->local_below : r->below;
  if (p->n >= below) {
    snprintf(why, why_len,
             "N=%lld >= %lld: several GPUs are faster from there "
             "(engine/gather/thresholds.c)",
             (long long)p->n, (long long)below);
    return 0;
  }
  return 1;
}
