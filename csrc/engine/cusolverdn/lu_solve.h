/* lu_solve with cuSOLVERDn on ONE GPU (the engine's other routines and its
 * table are engine/cusolverdn/'s; this routine goes in the table's
 * leader.lu_solve). The contract is engine.h's: the group is one GPU, whose
 * column-major n x n matrix (lda n) is where the block-cyclic and
 * contiguous layouts coincide. */
#ifndef JMG_ENGINE_CUSOLVERDN_LU_SOLVE_H
#define JMG_ENGINE_CUSOLVERDN_LU_SOLVE_H

#include "engine/engine.h"

int jmg_dn_lu_solve(const jmg_engine *e, const jmg_dist_matrix *a, void *b,
                    int64_t nrhs, int transpose, int *info, jmg_error *err);

#endif
