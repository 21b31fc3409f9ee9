/* The ops, known by number.
 *
 * Every layer below the FFI tells the ops apart by jmg_op: the op
 * descriptions (exec/op_desc.h), the problem an engine is chosen for
 * (engine/engine.h) and the engines' own limits. An op's name string is for
 * messages, the rendezvous key and the Python layer's queries, which name
 * the op (jmg_op_by_name reads it there, once). */
#ifndef JMG_COMMON_OP_H
#define JMG_COMMON_OP_H

typedef enum {
  JMG_OP_POTRS,
  JMG_OP_POTRI,
  JMG_OP_SYEVD,
  JMG_OP_LU_SOLVE,
  JMG_OP_GESVD,
  JMG_OP_SYGVD,
  JMG_OP_QR,
  JMG_NUM_OPS
} jmg_op;

/* The precision a solve (potrs, lu_solve) runs in: the attribute
 * "precision" of its FFI call (absent: exact), the jmg_problem's precision
 * an engine is chosen for (engine/engine.h), and the routine the ops layer
 * calls (the engine's potrs or potrs_mixed, ...).
 *   JMG_PRECISION_EXACT  factor and solve in A's own dtype (the default);
 *   JMG_PRECISION_MIXED  factor in the next lower precision (float32 for
 *                        float64, complex64 for complex128), refine the
 *                        solution in A's dtype against A kept intact, and
 *                        fall back to the exact path where refinement does
 *                        not converge (engine/refine.h). */
typedef enum { JMG_PRECISION_EXACT = 0, JMG_PRECISION_MIXED = 1 } jmg_precision;
#define JMG_NUM_PRECISIONS 2

/* "exact", "mixed"; "?" for a value that is none. */
const char *jmg_precision_name(int precision);

/* "potrs", ...; "?" for a value that is no op. */
const char *jmg_op_name(jmg_op op);

/* The op called name: 0 and *out, or -1 for no op of that name. */
int jmg_op_by_name(const char *name, jmg_op *out);

/* Whether op's A is M x N (gesvd, qr) rather than square. */
int jmg_op_is_rectangular(jmg_op op);

/* Whether op is an eigensolver through a tridiagonal matrix (syevd, and
 * sygvd, which reduces to syevd's standard problem): the ops whose block
 * sizes some libraries restrict. */
int jmg_op_is_eigensolver(jmg_op op);

#endif
