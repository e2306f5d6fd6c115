/* Unit tests for the exec core both namzu-exec programs drive (lib/lite/nz-lite-core), fed by
 * hand: reserve replies, stream frames, failures and the clock, asserting the actions and the
 * words and exit statuses that come out; and for the shared framing (nz-lite-frame). */
#include <stdlib.h>
#include <string.h>

#include "nz-lite-core.h"
#include "nz-lite-exec.h"
#include "nz-lite-frame.h"
#include "../nz-test.h"

#define DESC "unix:/a"
#define BODY "{\"command\":\"true\",\"args\":[]"
#define RESERVED "{\"ok\":true,\"executionId\":\"exec_1\",\"protocolVersion\":2}"

static NzLiteCoreAction
feed (NzLiteCore *c, const char *frame)
{
  return nz_lite_core_frame (c, frame, strlen (frame), 0);
}

/* A core whose execution exec_1 is reserved; the execute request is to be sent. */
static void
reserved_core (NzLiteCore *c)
{
  nz_lite_core_init (c, DESC, BODY, strlen (BODY));
  ck_assert_int_eq (nz_lite_core_reserved (c, RESERVED, strlen (RESERVED), 0),
                    NZ_LITE_CORE_EXECUTE);
}

START_TEST (test_happy_path)
{
  NzLiteCore c;

  reserved_core (&c);
  ck_assert_str_eq (c.id, "exec_1");
  ck_assert_str_eq (c.request.data, BODY ",\"executionId\":\"exec_1\"}");
  ck_assert_str_eq (c.cancel_body.data, "{\"executionId\":\"exec_1\"}");
  ck_assert_int_eq (feed (&c, "{\"type\":\"stdout_delta\",\"data\":\"h\\u0000i\"}"),
                    NZ_LITE_CORE_OUTPUT);
  ck_assert_int_eq (c.out_stream, 1);
  ck_assert_uint_eq (c.out_len, 3);
  ck_assert_mem_eq (c.out, "h\0i", 3);
  ck_assert_int_eq (feed (&c, "{\"type\":\"stderr_delta\",\"data\":\"e\"}"), NZ_LITE_CORE_OUTPUT);
  ck_assert_int_eq (c.out_stream, 2);
  /* Empty output, data that is no string and unknown types are passed over. */
  ck_assert_int_eq (feed (&c, "{\"type\":\"stdout_delta\",\"data\":\"\"}"), NZ_LITE_CORE_READ);
  ck_assert_int_eq (feed (&c, "{\"type\":\"stdout_delta\",\"data\":7}"), NZ_LITE_CORE_READ);
  ck_assert_int_eq (feed (&c, "{\"type\":\"heartbeat\"}"), NZ_LITE_CORE_READ);
  ck_assert_int_eq (feed (&c, "{\"type\":\"result\",\"exitCode\":3}"), NZ_LITE_CORE_READ);
  ck_assert_int_eq (nz_lite_core_frame (&c, "", 0, 0), NZ_LITE_CORE_CLOSE);
  ck_assert_int_eq (nz_lite_core_closed (&c), NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_RESULT);
  ck_assert_str_eq (c.result, "{\"type\":\"result\",\"exitCode\":3}");
  nz_lite_core_clear (&c);

  /* A body with no member yet takes the id without a comma. */
  nz_lite_core_init (&c, DESC, "{", 1);
  ck_assert_int_eq (nz_lite_core_reserved (&c, RESERVED, strlen (RESERVED), 0),
                    NZ_LITE_CORE_EXECUTE);
  ck_assert_str_eq (c.request.data, "{\"executionId\":\"exec_1\"}");
  nz_lite_core_clear (&c);

  /* A stream the caller started has no body and no id: frames only (UBSan saw a NULL). */
  nz_lite_core_init (&c, DESC, NULL, 0);
  nz_lite_core_stream (&c);
  ck_assert_int_eq (feed (&c, "{\"type\":\"result\",\"exitCode\":0}"), NZ_LITE_CORE_READ);
  ck_assert_int_eq (nz_lite_core_failed (&c, NZ_LITE_ERR_CANCELLED, "cancelled", 0),
                    NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_IO_FAILED);
  nz_lite_core_clear (&c);
}
END_TEST

START_TEST (test_reserve_refusals)
{
  static const struct
  {
    const char *reply;
    NzLiteErrKind kind;
    const char *msg;
  } rows[] = {
    { "{\"ok\":false,\"error\":\"agent_retiring\"}", NZ_LITE_ERR_FAILED,
      "agent unix:/a: agent is retiring: it fenced itself after a process-group shutdown could "
      "not be confirmed, so the sandbox must be recreated" },
    { "{\"ok\":false,\"error\":\"busy\",\"message\":\"later\"}", NZ_LITE_ERR_FAILED,
      "reserve-execution refused: busy (later)" },
    { "{\"ok\":false}", NZ_LITE_ERR_FAILED, "reserve-execution refused: unknown error" },
    { "{\"ok\":true}", NZ_LITE_ERR_PROTOCOL,
      "agent unix:/a: reserve-execution reply has no executionId" },
    { "{\"ok\":true,\"executionId\":5}", NZ_LITE_ERR_PROTOCOL,
      "agent unix:/a: reserve-execution reply has no executionId" },
    { "[1]", NZ_LITE_ERR_PROTOCOL, "agent unix:/a: reserve-execution reply: not a JSON object" },
    { "{\"ok\":", NZ_LITE_ERR_PROTOCOL,
      "agent unix:/a: reserve-execution reply: not a JSON object" },
  };

  for (size_t i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      NzLiteCore c;

      nz_lite_core_init (&c, DESC, BODY, strlen (BODY));
      /* A cancel wish changes nothing when no id was reserved: nothing can run. */
      nz_lite_core_want_cancel (&c);
      ck_assert_int_eq (nz_lite_core_reserved (&c, rows[i].reply, strlen (rows[i].reply), 0),
                        NZ_LITE_CORE_DONE);
      ck_assert_int_eq (c.end, NZ_LITE_CORE_FAILED);
      ck_assert_int_eq (c.err.kind, rows[i].kind);
      ck_assert_str_eq (c.err.msg, rows[i].msg);
      nz_lite_core_clear (&c);
    }
}
END_TEST

/* The refusal -> exit status table, end to end: the error frame, the core's words, the
 * outcome's line and status. */
START_TEST (test_refusal_statuses)
{
  static const struct
  {
    const char *frame;
    int status;
    const char *line;
  } rows[] = {
    { "{\"type\":\"error\",\"error\":\"spawn nosuch ENOENT\"}", 127,
      "nosuch: command not found in the sandbox (spawn nosuch ENOENT)" },
    { "{\"type\":\"error\",\"error\":\"spawn ./x EACCES\",\"message\":\"m\"}", 126,
      "nosuch: cannot execute (spawn ./x EACCES (m))" },
    { "{\"type\":\"error\",\"error\":\"spawn ./x ENOEXEC\"}", 126,
      "nosuch: cannot execute (spawn ./x ENOEXEC)" },
    { "{\"type\":\"error\",\"error\":\"invalid_cwd\"}", 125, "execute refused: invalid_cwd" },
    { "{\"type\":\"error\",\"error\":\"unknown_op:execute\"}", 125,
      "agent unix:/a: the agent does not implement guest agent protocol 2 (unknown_op:execute); "
      "run a namzu-agent from the same namzu release as this host" },
    { "{\"type\":\"error\",\"error\":\"boom\"}", 125,
      "execute refused: boom; the command's outcome in sandbox nz-1 is unknown (check it with "
      "namzu-ls)" },
    { "{\"type\":\"error\"}", 125,
      "execute refused: unknown error; the command's outcome in sandbox nz-1 is unknown (check "
      "it with namzu-ls)" },
  };

  for (size_t i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      NzLiteCore c;
      char line[2048];
      const char *code = NULL;

      reserved_core (&c);
      ck_assert_int_eq (feed (&c, rows[i].frame), NZ_LITE_CORE_READ);
      ck_assert_int_eq (nz_lite_core_frame (&c, "", 0, 0), NZ_LITE_CORE_CLOSE);
      ck_assert_int_eq (nz_lite_core_closed (&c), NZ_LITE_CORE_DONE);
      ck_assert_int_eq (c.end, NZ_LITE_CORE_FAILED);
      ck_assert_int_eq (nz_lite_core_outcome (c.err.kind, c.err.msg, NULL, "nosuch", "sandbox nz-1",
                                              true, line, sizeof line, &code),
                        rows[i].status);
      ck_assert_str_eq (line, rows[i].line);
      nz_lite_core_clear (&c);
    }
}
END_TEST

START_TEST (test_hostile_frames)
{
  NzLiteCore c;

  reserved_core (&c);
  ck_assert_int_eq (feed (&c, "not json"), NZ_LITE_CORE_DONE);
  ck_assert (c.bad_frame);
  ck_assert_int_eq (c.err.kind, NZ_LITE_ERR_PROTOCOL);
  ck_assert_str_eq (c.err.msg, "agent unix:/a: exec stream frame: not a JSON object");
  nz_lite_core_clear (&c);

  reserved_core (&c);
  ck_assert_int_eq (feed (&c, "{\"type\":\"result\",\"exitCode\":0}"), NZ_LITE_CORE_READ);
  ck_assert_int_eq (feed (&c, "{\"type\":\"stdout_delta\",\"data\":\"late\"}"), NZ_LITE_CORE_DONE);
  ck_assert_str_eq (c.err.msg, "agent unix:/a: exec stream sent a frame after its result");
  nz_lite_core_clear (&c);

  /* A reply-shaped refusal ends the stream at once: no terminator follows it (spec A.5). */
  reserved_core (&c);
  ck_assert_int_eq (feed (&c, "{\"ok\":false,\"error\":\"agent_retiring\"}"), NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_FAILED);
  ck_assert (strstr (c.err.msg, "agent is retiring") != NULL);
  nz_lite_core_clear (&c);

  reserved_core (&c);
  ck_assert_int_eq (nz_lite_core_frame (&c, "", 0, 0), NZ_LITE_CORE_CLOSE);
  ck_assert_int_eq (nz_lite_core_closed (&c), NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.err.kind, NZ_LITE_ERR_PROTOCOL);
  ck_assert_str_eq (c.err.msg, "agent unix:/a: exec stream ended without a result event");
  nz_lite_core_clear (&c);
}
END_TEST

/* A timeout with no wish to cancel stands as the driver worded it; the outcome says the
 * command's fate is unknown. */
START_TEST (test_timeout_stands)
{
  NzLiteCore c;
  char line[2048];

  reserved_core (&c);
  ck_assert_int_eq (nz_lite_core_failed (&c, NZ_LITE_ERR_TIMED_OUT,
                                         "agent unix:/a: exec stream observation exceeded 11000ms",
                                         0),
                    NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_IO_FAILED);
  ck_assert_int_eq (c.err.kind, NZ_LITE_ERR_TIMED_OUT);
  ck_assert_int_eq (nz_lite_core_outcome (c.err.kind, c.err.msg, NULL, "true", NULL, true, line,
                                          sizeof line, NULL),
                    NZ_LITE_EXIT_NAMZU);
  ck_assert_str_eq (line, "agent unix:/a: exec stream observation exceeded 11000ms");
  nz_lite_core_clear (&c);
}
END_TEST

/* A signal mid-stream: cancel by id, attempts lost and retried within the 8 s budget, then
 * unconfirmed at its end with the last attempt's words. */
START_TEST (test_cancel_budget)
{
  NzLiteCore c;
  int64_t t = 1000;

  reserved_core (&c);
  ck_assert_int_eq (feed (&c, "{\"type\":\"stdout_delta\",\"data\":\"x\"}"), NZ_LITE_CORE_OUTPUT);
  ck_assert_int_eq (nz_lite_core_failed (&c, NZ_LITE_ERR_CANCELLED, "Operation was cancelled", t),
                    NZ_LITE_CORE_CANCEL);
  ck_assert_uint_eq (c.attempt_ms, 2000);
  for (int i = 0; i < 3; i++)
    {
      t += 2000;
      ck_assert_int_eq (nz_lite_core_failed (&c, NZ_LITE_ERR_DIAL, "refused", t),
                        NZ_LITE_CORE_PAUSE);
      t += 100;
      ck_assert_int_eq (nz_lite_core_tick (&c, t), NZ_LITE_CORE_CANCEL);
    }
  /* 6300 ms spent: the last attempt gets what is left of the budget. */
  ck_assert_uint_eq (c.attempt_ms, 1700);
  ck_assert_int_eq (nz_lite_core_failed (&c, NZ_LITE_ERR_TIMED_OUT, "read idle timeout", t + 1700),
                    NZ_LITE_CORE_PAUSE);
  ck_assert_int_eq (nz_lite_core_tick (&c, t + 1800), NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_UNCONFIRMED);
  ck_assert_str_eq (c.err.msg, "could not confirm that execution exec_1 stopped within 8000ms: "
                               "read idle timeout");
  nz_lite_core_clear (&c);
}
END_TEST

START_TEST (test_cancel_answers)
{
  NzLiteCore c;
  const char *no = "{\"ok\":false,\"error\":\"unconfirmed\",\"message\":\"stuck\"}";
  const char *yes = "{\"ok\":true}";

  /* Cancel wanted while reserving: the reserved record is cancelled, never executed. */
  nz_lite_core_init (&c, DESC, BODY, strlen (BODY));
  nz_lite_core_want_cancel (&c);
  ck_assert_int_eq (nz_lite_core_reserved (&c, RESERVED, strlen (RESERVED), 0),
                    NZ_LITE_CORE_CANCEL);
  /* A garbled answer is a lost attempt. */
  ck_assert_int_eq (nz_lite_core_cancel_reply (&c, "[", 1, 10), NZ_LITE_CORE_PAUSE);
  ck_assert_int_eq (nz_lite_core_tick (&c, 110), NZ_LITE_CORE_CANCEL);
  ck_assert_int_eq (nz_lite_core_cancel_reply (&c, yes, strlen (yes), 120), NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_CANCELLED);
  ck_assert_int_eq (c.err.kind, NZ_LITE_ERR_CANCELLED);
  ck_assert_str_eq (c.err.msg, "execution exec_1 cancelled; the agent confirmed it stopped");
  nz_lite_core_clear (&c);

  /* The agent answered no: asking again would not change it. */
  reserved_core (&c);
  nz_lite_core_want_cancel (&c);
  ck_assert_int_eq (nz_lite_core_failed (&c, NZ_LITE_ERR_FAILED, "output closed", 0),
                    NZ_LITE_CORE_CANCEL);
  ck_assert_int_eq (nz_lite_core_cancel_reply (&c, no, strlen (no), 5), NZ_LITE_CORE_DONE);
  ck_assert_int_eq (c.end, NZ_LITE_CORE_UNCONFIRMED);
  ck_assert_str_eq (c.err.msg, "agent unix:/a: could not confirm that execution exec_1 stopped "
                               "(unconfirmed: stuck); treat the sandbox as unusable and recreate "
                               "it");
  nz_lite_core_clear (&c);
}
END_TEST

START_TEST (test_outcome_rows)
{
  char line[2048];
  const char *code = "x";

  ck_assert_int_eq (nz_lite_core_outcome (NZ_LITE_ERR_DIAL, "Could not connect: refused", DESC,
                                          "true", NULL, false, line, sizeof line, &code),
                    125);
  ck_assert_str_eq (code, "unreachable");
  ck_assert_str_eq (line, "cannot reach agent unix:/a: Could not connect: refused; is "
                          "namzu-agent running there? (namzu-ls lists the sandboxes)");
  ck_assert_int_eq (nz_lite_core_outcome (NZ_LITE_ERR_DIAL, "agent unix:/a: refused", NULL, "true",
                                          "sandbox nz-1", false, line, sizeof line, &code),
                    125);
  ck_assert_str_eq (line, "cannot reach sandbox nz-1 (agent unix:/a: refused); it may have "
                          "stopped: check namzu-ls, or create a new sandbox with namzu-create");
  /* Nothing reserved: nothing can have run. */
  ck_assert_int_eq (nz_lite_core_outcome (NZ_LITE_ERR_FAILED, "oops", NULL, "true", "sandbox nz-1",
                                          false, line, sizeof line, &code),
                    125);
  ck_assert_ptr_null (code);
  ck_assert_str_eq (line, "oops (sandbox nz-1; check it with namzu-ls)");
  ck_assert_int_eq (nz_lite_core_outcome (NZ_LITE_ERR_INVALID, "bad", NULL, "true", "sandbox nz-1",
                                          true, line, sizeof line, &code),
                    125);
  ck_assert_str_eq (code, "invalid_args");
  ck_assert_str_eq (line, "bad");
}
END_TEST

START_TEST (test_observation)
{
  ck_assert_uint_eq (nz_lite_core_observation_ms (0), 310000);
  ck_assert_uint_eq (nz_lite_core_observation_ms (-5), 310000);
  ck_assert_uint_eq (nz_lite_core_observation_ms (1000), 11000);
  ck_assert_uint_eq (nz_lite_core_observation_ms (1e20), 310000);
  ck_assert_uint_eq (nz_lite_core_observation_ms (3e9), INT32_MAX);
}
END_TEST

/* ---- framing ------------------------------------------------------------------------------ */

START_TEST (test_envelope)
{
  NzLiteBuf b = { 0 };

  ck_assert (nz_lite_frame_envelope (&b, "execute", "{\"a\":1}", 7, "t\"k"));
  ck_assert_str_eq (b.data,
                    "0000002e\n{\"op\":\"execute\",\"body\":{\"a\":1},\"token\":\"t\\\"k\"}");
  ck_assert_uint_eq (b.len - NZ_LITE_FRAME_HEADER_LEN, 0x2e);
  free (b.data);
  b = (NzLiteBuf){ 0 };
  ck_assert (nz_lite_frame_envelope (&b, "reserve-execution", NULL, 0, NULL));
  ck_assert_str_eq (b.data + NZ_LITE_FRAME_HEADER_LEN, "{\"op\":\"reserve-execution\"}");
  free (b.data);
  b = (NzLiteBuf){ 0 };
  /* A token that is not UTF-8 is refused (the caller words it), never sent mangled. */
  ck_assert (!nz_lite_frame_envelope (&b, "healthz", NULL, 0, "\xff"));
  free (b.data);
}
END_TEST

START_TEST (test_header_check)
{
  char why[160] = "";
  uint64_t len = 0;

  ck_assert_int_eq (nz_lite_frame_header_check ("0000000a\n", 9, 10, &len, why, sizeof why),
                    NZ_LITE_FRAME_HEADER_OK);
  ck_assert_uint_eq (len, 10);
  /* Over the limit is its own answer, with the length, so a reader can raise its cap. */
  ck_assert_int_eq (nz_lite_frame_header_check ("0000000b\n", 9, 10, &len, why, sizeof why),
                    NZ_LITE_FRAME_HEADER_OVER);
  ck_assert_uint_eq (len, 11);
  ck_assert_str_eq (why, "frame announces 11 bytes, over the 10-byte limit");
  /* The words name no peer: each side adds its own. */
  ck_assert_int_eq (nz_lite_frame_header_check ("00\n", 3, 10, &len, why, sizeof why),
                    NZ_LITE_FRAME_HEADER_BAD);
  ck_assert_str_eq (why, "malformed frame header (newline at 2)");
  ck_assert_int_eq (nz_lite_frame_header_check ("0000zz00\n", 9, 10, &len, NULL, 0),
                    NZ_LITE_FRAME_HEADER_BAD);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("lite-core");
  TCase *tc = tcase_create ("core");
  TCase *frame = tcase_create ("frame");

  tcase_add_test (tc, test_happy_path);
  tcase_add_test (tc, test_reserve_refusals);
  tcase_add_test (tc, test_refusal_statuses);
  tcase_add_test (tc, test_hostile_frames);
  tcase_add_test (tc, test_timeout_stands);
  tcase_add_test (tc, test_cancel_budget);
  tcase_add_test (tc, test_cancel_answers);
  tcase_add_test (tc, test_outcome_rows);
  tcase_add_test (tc, test_observation);
  tcase_add_test (frame, test_envelope);
  tcase_add_test (frame, test_header_check);
  suite_add_tcase (s, tc);
  suite_add_tcase (s, frame);
  return nz_test_run (s);
}
