#include "common/error.h"
#include "test.h"

TEST(error_format_names_op_call_and_code) {
  jmg_error err;
  jmg_error_clear(&err);
  CHECK_EQ(err.code, JMG_OK);
  int rc = jmg_error_set(&err, JMG_ELAPACK, "potrs", "dpotrf",
                         "argument %d was rejected", 4);
  CHECK_EQ(rc, -JMG_ELAPACK);
  char buf[600];
  jmg_error_format(&err, buf, sizeof buf);
  CHECK_CONTAINS(buf, "jaxmg.potrs: dpotrf: argument 4 was rejected");
  CHECK_CONTAINS(buf, "JMG_ELAPACK");
  CHECK_CONTAINS(jmg_status_text(-JMG_ETIMEDOUT), "timed out");
  CHECK_CONTAINS(jmg_status_name(12345), "JMG_E?");
}
