#define _POSIX_C_SOURCE 200809L /* the XSI strerror_r */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void copy_field(char *dst, size_t cap, const char *src) {
  if (src == NULL) {
    dst[0] = '\0';
    return;
  }
  snprintf(dst, cap, "%s", src);
}

void jmg_error_clear(jmg_error *err) {
  if (err == NULL) return;
  err->code = JMG_OK;
  err->op[0] = '\0';
  err->call[0] = '\0';
  err->msg[0] = '\0';
}

int jmg_error_set(jmg_error *err, jmg_status code, const char *op,
                  const char *call, const char *fmt, ...) {
  if (err != NULL) {
    err->code = code;
    copy_field(err->op, sizeof err->op, op);
    copy_field(err->call, sizeof err->call, call);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return -(int)code;
}

void jmg_error_name_op(jmg_error *err, const char *op) {
  if (err != NULL && op != NULL && err->op[0] == '\0')
    copy_field(err->op, sizeof err->op, op);
}

int jmg_error_sys(jmg_error *err, jmg_status code, const char *op,
                  const char *call, int errnum, const char *what) {
  char b[128];
  if (strerror_r(errnum, b, sizeof b) != 0)
    snprintf(b, sizeof b, "errno %d", errnum);
  return jmg_error_set(err, code, op, call, "%s: %s", what, b);
}

jmg_status jmg_errno_status(int errnum) {
  return errnum == ENOMEM || errnum == ENOSPC ? JMG_ENOMEM : JMG_EINTERNAL;
}

void jmg_error_copy(jmg_error *dst, const jmg_error *src) {
  if (dst == NULL || src == NULL || dst == src) return;
  memcpy(dst, src, sizeof *dst);
}

const char *jmg_status_name(int code) {
  if (code < 0) code = -code;
  switch (code) {
#define JMG_STATUS_NAME(name, value, text) \
  case value:                              \
    return #name;
    JMG_STATUS_TABLE(JMG_STATUS_NAME)
#undef JMG_STATUS_NAME
    default:
      return "JMG_E?";
  }
}

const char *jmg_status_text(int code) {
  if (code < 0) code = -code;
  switch (code) {
#define JMG_STATUS_TEXT(name, value, text) \
  case value:                              \
    return text;
    JMG_STATUS_TABLE(JMG_STATUS_TEXT)
#undef JMG_STATUS_TEXT
    default:
      return "unknown status";
  }
}

char *jmg_error_format(const jmg_error *err, char *buf, size_t len) {
  if (buf == NULL || len == 0) return buf;
  if (err == NULL) {
    snprintf(buf, len, "jaxmg: unknown error");
    return buf;
  }
  const char *op = err->op[0] ? err->op : "?";
  if (err->call[0]) {
    snprintf(buf, len, "jaxmg.%s: %s: %s [%s]", op, err->call, err->msg,
             jmg_status_name(err->code));
  } else {
    snprintf(buf, len, "jaxmg.%s: %s [%s]", op, err->msg,
             jmg_status_name(err->code));
  }
  return buf;
}
