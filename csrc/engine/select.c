/* The one place that decides which engine runs a call (the rule is in
 * engine/engine.h). */
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"

int jmg_engine_has(const jmg_engine *e, jmg_op op) {
  const int leader = e->model == JMG_MODEL_LEADER;
  switch (op) {
    case JMG_OP_POTRS:
      return leader ? e->leader.potrs != NULL : e->local.potrs != NULL;
    case JMG_OP_POTRI:
      return leader ? e->leader.potri != NULL : e->local.potri != NULL;
    case JMG_OP_SYEVD:
      return leader ? e->leader.syevd != NULL : e->local.syevd != NULL;
    case JMG_OP_LU_SOLVE:
      return leader ? e->leader.lu_solve != NULL : e->local.lu_solve != NULL;
    case JMG_OP_SYGVD:
      return leader ? e->leader.sygvd != NULL : e->local.sygvd != NULL;
    /* No engine of the local model has gesvd (engine/cusolvermp/ says
     * why). */
    case JMG_OP_GESVD:
      return leader && e->leader.gesvd != NULL;
    case JMG_OP_QR:
      return leader ? e->leader.qr != NULL : e->local.qr != NULL;
    case JMG_NUM_OPS:
      break;
  }
  return 0;
}

int jmg_engine_has_precision(const jmg_engine *e, jmg_op op, int precision) {
  if (precision == JMG_PRECISION_EXACT) return jmg_engine_has(e, op);
  if (precision != JMG_PRECISION_MIXED) return 0;
  const int leader = e->model == JMG_MODEL_LEADER;
  if (op == JMG_OP_POTRS)
    return leader ? e->leader.potrs_mixed != NULL
                  : e->local.potrs_mixed != NULL;
  if (op == JMG_OP_LU_SOLVE)
    return leader ? e->leader.lu_solve_mixed != NULL
                  : e->local.lu_solve_mixed != NULL;
  return 0;
}

/* "qr float32 M=40000 N=1024 T_A=1024" (M only for an M x N A; the
 * precision only where it is not exact), for messages. */
static void describe(const jmg_problem *p, char *out, size_t len) {
  char prec[32] = "";
  if (p->precision != JMG_PRECISION_EXACT)
    snprintf(prec, sizeof prec, " precision=\"%s\"",
             jmg_precision_name(p->precision));
  if (jmg_op_is_rectangular(p->op))
    snprintf(out, len, "%s %s M=%lld N=%lld T_A=%lld%s", jmg_op_name(p->op),
             jmg_dtype_name(p->dtype), (long long)jmg_problem_rows(p),
             (long long)p->n, (long long)p->tile, prec);
  else
    snprintf(out, len, "%s %s N=%lld T_A=%lld%s", jmg_op_name(p->op),
             jmg_dtype_name(p->dtype), (long long)p->n, (long long)p->tile,
             prec);
}

/* Whether e runs p (by_default: and prefers it, when JAXMG_ENGINE names no
 * engine); else the reason in why. */
static int runs(const jmg_engine *e, const jmg_problem *p, int by_default,
                char *why, size_t len) {
  if (!jmg_engine_has(e, p->op)) {
    snprintf(why, len, "it has no %s", jmg_op_name(p->op));
    return 0;
  }
  if (!jmg_engine_has_precision(e, p->op, p->precision)) {
    snprintf(why, len,
             "it has no %s with precision=\"%s\" (pass precision=\"exact\", "
             "or let another engine run it)",
             jmg_op_name(p->op), jmg_precision_name(p->precision));
    return 0;
  }
  /* The leader reaches every shard's memory from one node (peer pointers,
   * shared memory): groups across nodes need the local model. */
  if (e->model == JMG_MODEL_LEADER && p->nodes > 1) {
    snprintf(why, len,
             "the group spans %d nodes and it drives the devices of one node",
             p->nodes);
    return 0;
  }
  if (e->supports != NULL && !e->supports(e, p, why, len)) return 0;
  if (by_default && e->prefers != NULL && !e->prefers(e, p, why, len)) return 0;
  return 1;
}

/* "lapack, cusolvermg": the names of the engines, for messages. */
static void engine_names(const jmg_engine *const *engines, char *out,
                         size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; engines[i] != NULL && used < len; ++i) {
    int w = snprintf(out + used, len - used, "%s%s", i ? ", " : "",
                     engines[i]->name);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* The engine of engines named name, or NULL. */
static const jmg_engine *by_name(const jmg_engine *const *engines,
                                 const char *name) {
  for (int i = 0; engines[i] != NULL; ++i)
    if (strcmp(engines[i]->name, name) == 0) return engines[i];
  return NULL;
}

int jmg_engine_select(const jmg_engine *const *engines, const jmg_problem *p,
                      const jmg_config *cfg, const jmg_engine **out,
                      jmg_error *err) {
  char names[128], why[320], what[160];
  engine_names(engines, names, sizeof names);
  describe(p, what, sizeof what);
  *out = NULL;
  if (cfg->engine[0] != '\0') {
    const jmg_engine *named = by_name(engines, cfg->engine);
    if (named != NULL) {
      if (!runs(named, p, 0, why, sizeof why))
        return jmg_error_set(err, JMG_EUNSUPPORTED, jmg_op_name(p->op),
                             "JAXMG_ENGINE",
                             "engine \"%s\" cannot run %s on %d devices: "
                             "%s (engines here: %s)",
                             cfg->engine, what, p->nparts, why, names);
      *out = named;
      return 0;
    }
    return jmg_error_set(err, JMG_EINVAL, jmg_op_name(p->op), "JAXMG_ENGINE",
                         "\"%s\" is not an engine of this platform (engines "
                         "here: %s)",
                         cfg->engine, names);
  }
  /* The reasons of every engine, for the error when none runs p. */
  char reasons[JMG_ERROR_MSG_LEN];
  size_t used = 0;
  reasons[0] = '\0';
  for (int i = 0; engines[i] != NULL; ++i) {
    if (runs(engines[i], p, 1, why, sizeof why)) {
      *out = engines[i];
      return 0;
    }
    if (used < sizeof reasons) {
      int w = snprintf(reasons + used, sizeof reasons - used, "%s%s: %s",
                       used ? "; " : "", engines[i]->name, why);
      if (w > 0) used += (size_t)w;
    }
  }
  return jmg_error_set(err, JMG_EUNSUPPORTED, jmg_op_name(p->op),
                       "engine selection",
                       "no engine runs %s on %d devices (%s)", what, p->nparts,
                       used ? reasons : "no engines");
}

int jmg_engine_model_of(const jmg_engine *const *engines, const char *name) {
  if (engines == NULL || name == NULL) return -1;
  const jmg_engine *e = by_name(engines, name);
  return e != NULL ? (int)e->model : -1;
}

int64_t jmg_engine_block(const jmg_engine *e, const jmg_problem *p) {
  return e->block != NULL ? e->block(e, p) : p->tile;
}

/* The problem named by op and dtype, and the engine jmg_engine_select
 * chooses for it with the settings of now. Returns 1 (*chosen set), 0 (no
 * engine: why in out) or -1 (unknown op or dtype: out says so). */
static int check(const jmg_engine *const *engines, const char *op, int nparts,
                 int nodes, const char *dtype, int64_t m, int64_t n,
                 int64_t tile, int precision, jmg_problem *p,
                 const jmg_engine **chosen, char *out, size_t len) {
  if (out != NULL && len > 0) out[0] = '\0';
  if (op == NULL || dtype == NULL || out == NULL || len == 0) return -1;
  jmg_op known = JMG_OP_POTRS;
  const int op_found = jmg_op_by_name(op, &known) == 0;
  int t = -1;
  for (int i = 0; i < JMG_NUM_DTYPES; ++i)
    if (strcmp(dtype, jmg_dtype_name((jmg_dtype)i)) == 0) t = i;
  if (!op_found || t < 0) {
    snprintf(out, len, "unknown op \"%s\" or dtype \"%s\"", op, dtype);
    return -1;
  }
  if (precision < 0 || precision >= JMG_NUM_PRECISIONS) {
    snprintf(out, len, "unknown precision %d (0: exact, 1: mixed)", precision);
    return -1;
  }
  /* A square A has no rows of its own to name. */
  if (m < 0 || (!jmg_op_is_rectangular(known) && m != 0 && m != n)) {
    snprintf(out, len, "%s takes a square A: M=%lld for N=%lld", op,
             (long long)m, (long long)n);
    return -1;
  }
  *p = (jmg_problem){.op = known,
                     .nparts = nparts,
                     .nodes = nodes,
                     .dtype = (jmg_dtype)t,
                     .n = n,
                     .m = m > 0 ? m : n,
                     .tile = tile,
                     .precision = precision};
  jmg_config cfg;
  jmg_config_read(&cfg);
  jmg_error err;
  jmg_error_clear(&err);
  if (jmg_engine_select(engines, p, &cfg, chosen, &err) != 0) {
    /* "JAXMG_ENGINE: ..." or "engine selection: ...": what decided. */
    snprintf(out, len, "%s: %s", err.call, err.msg);
    return 0;
  }
  return 1;
}

int jmg_engine_check(const jmg_engine *const *engines, const char *op,
                     int nparts, int nodes, const char *dtype, int64_t m,
                     int64_t n, int64_t tile, int precision, char *out,
                     size_t len, int64_t *block) {
  if (block != NULL) *block = 0;
  jmg_problem p;
  const jmg_engine *e = NULL;
  int rc = check(engines, op, nparts, nodes, dtype, m, n, tile, precision, &p,
                 &e, out, len);
  if (rc == 1) {
    snprintf(out, len, "%s", e->name);
    if (block != NULL) *block = jmg_engine_block(e, &p);
  }
  return rc;
}

int jmg_engine_workspace(const jmg_engine *const *engines, const char *op,
                         int nparts, int nodes, const char *dtype, int64_t m,
                         int64_t n, int64_t tile, int precision,
                         const jmg_workspace_query *q, size_t *bytes, char *out,
                         size_t len) {
  jmg_problem p;
  const jmg_engine *e = NULL;
  int rc = check(engines, op, nparts, nodes, dtype, m, n, tile, precision, &p,
                 &e, out, len);
  if (rc != 1) return -1;
  if (e->workspace == NULL) {
    snprintf(out, len,
             "%s: the engine cannot tell its workspace ahead of a "
             "call (JAXMG_TRACE=1 prints what a call took)",
             e->name);
    return 0;
  }
  jmg_error err;
  jmg_error_clear(&err);
  *bytes = 0;
  if (e->workspace(e, &p, q, bytes, &err) != 0) {
    snprintf(out, len, "%s: %s: %s", e->name, err.call, err.msg);
    return err.code == JMG_EUNSUPPORTED ? 0 : -1;
  }
  snprintf(out, len, "%s", e->name);
  return 1;
}
