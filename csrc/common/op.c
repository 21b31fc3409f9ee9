/* The ops' names (op.h). */
#include "common/op.h"

#include <stddef.h>
#include <string.h>

static const char *const g_names[JMG_NUM_OPS] = {
    [JMG_OP_POTRS] = "potrs", [JMG_OP_POTRI] = "potri",
    [JMG_OP_SYEVD] = "syevd", [JMG_OP_LU_SOLVE] = "lu_solve",
    [JMG_OP_GESVD] = "gesvd", [JMG_OP_SYGVD] = "sygvd",
    [JMG_OP_QR] = "qr",
};

const char *jmg_op_name(jmg_op op) {
  return (int)op >= 0 && op < JMG_NUM_OPS ? g_names[op] : "?";
}

int jmg_op_by_name(const char *name, jmg_op *out) {
  for (int i = 0; name != NULL && i < JMG_NUM_OPS; ++i)
    if (strcmp(name, g_names[i]) == 0) {
      *out = (jmg_op)i;
      return 0;
    }
  return -1;
}

int jmg_op_is_rectangular(jmg_op op) {
  return op == JMG_OP_GESVD || op == JMG_OP_QR;
}

int jmg_op_is_eigensolver(jmg_op op) {
  return op == JMG_OP_SYEVD || op == JMG_OP_SYGVD;
}

const char *jmg_precision_name(int precision) {
  switch (precision) {
    case JMG_PRECISION_EXACT:
      return "exact";
    case JMG_PRECISION_MIXED:
      return "mixed";
    default:
      return "?";
  }
}
