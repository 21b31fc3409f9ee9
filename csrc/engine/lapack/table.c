#include "engine/lapack/table.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

/* Written once at import, read by every call: atomics keep a concurrent
 * registration (a second import in another thread) well defined. */
static jmg_lapack_routines g_routines[JMG_NUM_DTYPES];

static const char g_prefix[JMG_NUM_DTYPES] = {'s', 'd', 'c', 'z'};

static const char *family_name(jmg_dtype t, const char *family) {
  /* LAPACK calls the complex eigensolvers heevd and hegvd. */
  if (strcmp(family, "syevd") == 0 && jmg_dtype_is_complex(t)) return "heevd";
  if (strcmp(family, "sygvd") == 0 && jmg_dtype_is_complex(t)) return "hegvd";
  /* And the complex Q of a QR ungqr. */
  if (strcmp(family, "orgqr") == 0 && jmg_dtype_is_complex(t)) return "ungqr";
  return family;
}

int jmg_lapack_register(const char *name, void *fn) {
  if (name == NULL || fn == NULL || strlen(name) != 6) return -JMG_EINVAL;
  for (int t = 0; t < JMG_NUM_DTYPES; ++t) {
    if (name[0] != g_prefix[t]) continue;
    const char *rest = name + 1;
    jmg_lapack_routines *r = &g_routines[t];
    void **slot = NULL;
    if (strcmp(rest, "potrf") == 0) slot = (void **)&r->potrf;
    if (strcmp(rest, "potrs") == 0) slot = (void **)&r->potrs;
    if (strcmp(rest, "potri") == 0) slot = (void **)&r->potri;
    if (strcmp(rest, "getrf") == 0) slot = (void **)&r->getrf;
    if (strcmp(rest, "getrs") == 0) slot = (void **)&r->getrs;
    if (strcmp(rest, family_name((jmg_dtype)t, "syevd")) == 0) slot = &r->syevd;
    if (strcmp(rest, "gesdd") == 0) slot = &r->gesdd;
    if (strcmp(rest, "geqrf") == 0) slot = (void **)&r->geqrf;
    if (strcmp(rest, family_name((jmg_dtype)t, "orgqr")) == 0)
      slot = (void **)&r->orgqr;
    if (strcmp(rest, family_name((jmg_dtype)t, "sygvd")) == 0) slot = &r->sygvd;
    if (t == JMG_F64 && strcmp(rest, "sterf") == 0) slot = (void **)&r->sterf;
    if (t == JMG_F64 && strcmp(rest, "stemr") == 0) slot = (void **)&r->stemr;
    if (t == JMG_F64 && strcmp(rest, "stebz") == 0) slot = (void **)&r->stebz;
    if (t == JMG_F64 && strcmp(rest, "stein") == 0) slot = (void **)&r->stein;
    if (slot == NULL) return -JMG_EINVAL;
    *slot = fn;
    atomic_thread_fence(memory_order_release);
    return 0;
  }
  return -JMG_EINVAL;
}

const jmg_lapack_routines *jmg_lapack_routines_for(jmg_dtype dtype) {
  atomic_thread_fence(memory_order_acquire);
  return &g_routines[dtype];
}

int jmg_lapack_require(const void *fn, jmg_dtype dtype, const char *family,
                       const char *op, jmg_error *err) {
  if (fn != NULL) return 0;
  return jmg_error_set(err, JMG_EUNSUPPORTED, op, "LAPACK",
                       "LAPACK routine %c%s was not registered (jaxmg takes "
                       "it from scipy.linalg.cython_lapack at import)",
                       g_prefix[dtype], family_name(dtype, family));
}
