/* namzu-exec --json's result event carries "timing" (the phases of the exec, in whole ms):
 * checked the same way on every backend. Structural relations only, never speed. */
#pragma once

#include <check.h>
#include <json-glib/json-glib.h>

static inline gint64
nz_test_timing_ms (JsonObject *timing, const char *name)
{
  JsonNode *n = json_object_get_member (timing, name);

  ck_assert_msg (n != NULL && JSON_NODE_HOLDS_VALUE (n)
                     && json_node_get_value_type (n) == G_TYPE_INT64,
                 "timing.%s is not an integer", name);
  ck_assert_msg (json_node_get_int (n) >= 0, "timing.%s is negative", name);
  return json_node_get_int (n);
}

/* @result: the result event; @ran_ms: how long the command itself surely ran. */
static inline void
nz_test_check_exec_timing (JsonObject *result, gint64 ran_ms)
{
  JsonObject *t = json_object_get_object_member (result, "timing");
  gint64 reserve, dial, execute, drain, first, total;

  ck_assert_msg (t != NULL, "the result has no timing object");
  ck_assert_uint_eq (json_object_get_size (t), 6);
  reserve = nz_test_timing_ms (t, "reserveMs");
  dial = nz_test_timing_ms (t, "dialMs");
  execute = nz_test_timing_ms (t, "executeMs");
  drain = nz_test_timing_ms (t, "drainMs");
  first = nz_test_timing_ms (t, "firstFrameMs");
  total = nz_test_timing_ms (t, "totalMs");
  /* The phases follow one another inside the total (each is floored to whole ms). */
  ck_assert_int_le (reserve + dial + execute + drain, total + 4);
  ck_assert_int_le (first, execute);
  /* The command runs from the agent's receipt of execute to the result: inside dial (which
   * ends only after the request was sent, so a busy host may stamp it after the command
   * started) plus execute; each phase is floored to whole ms. */
  ck_assert_int_ge (dial + execute + 2, ran_ms);
  ck_assert_int_ge (total, ran_ms);
}
