/* The gather engine's mixed-precision solves (engine.h's potrs_mixed and
 * lu_solve_mixed) and its workspace query; internal to engine/gather/,
 * beside gather.h. The solves: A gathered onto participant 0's GPU,
 * cuSOLVERDn's mixed routine on the copy (engine/cusolverdn/mixed.c: the
 * lower-precision factor, the refinement of engine/refine.h against the
 * gathered A, its own exact fallback), and where the gathered copy or the
 * mixed routine's workspace cannot be had, the distributed engine's EXACT
 * routine on the shards (cuSOLVERMg has no mixed one), by gather.h's
 * fall-back rule. */
#ifndef JMG_ENGINE_GATHER_MIXED_H
#define JMG_ENGINE_GATHER_MIXED_H

#include <stddef.h>

#include "engine/engine.h"

int jmg_gather_potrs_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                           void *b, int64_t nrhs, int *info, jmg_error *err);
int jmg_gather_lu_solve_mixed(const jmg_engine *e, const jmg_dist_matrix *a,
                              void *b, int64_t nrhs, int transpose, int *info,
                              jmg_error *err);

/* The engine's `prefers` (thresholds.c's jmg_gather_prefers) with one
 * exception: a mixed-precision potrs or lu_solve is preferred wherever the
 * engine supports it, since no other engine of several GPUs has a mixed
 * routine (without it such a call would fail above the table's sizes). */
int jmg_gather_prefers_precision(const jmg_engine *e, const jmg_problem *p,
                                 char *why, size_t why_len);

/* The engine's `workspace` (workspace.c): the gathered copy (copies)
 * plus cuSOLVERDn's workspace for the problem on one GPU. */
int jmg_gather_workspace(const jmg_engine *e, const jmg_problem *p,
                         const jmg_workspace_query *q, size_t *bytes,
                         jmg_error *err);

#endif
