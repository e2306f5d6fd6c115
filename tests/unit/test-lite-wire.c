/* Unit tests for lib/lite's pure pieces beyond the JSON reader: nz-lite-wire's frame header
 * and endpoint parsing, nz-lite-exec's timeout parsing and request body. */
#include <stdlib.h>
#include <string.h>

#include "nz-lite-exec.h"
#include "nz-lite-wire.h"
#include "../nz-test.h"

static NzLiteFrameHeader
header (const char *text, size_t limit, size_t *len, NzLiteErr *e)
{
  return nz_lite_wire_frame_header_parse (text, strlen (text), limit, "unix:/x", len, e);
}

START_TEST (test_frame_header_round_trip)
{
  const size_t lens[] = { 0, 1, 0xabc, 0x10000000, 0xffffffff };
  char out[NZ_LITE_WIRE_FRAME_HEADER_LEN + 1] = "";

  for (size_t i = 0; i < G_N_ELEMENTS (lens); i++)
    {
      NzLiteErr e = { 0 };
      size_t len = 1;

      nz_lite_wire_frame_header_write (out, lens[i]);
      ck_assert_int_eq (out[8], '\n');
      ck_assert_int_eq (header (out, SIZE_MAX, &len, &e), NZ_LITE_FRAME_HEADER_OK);
      ck_assert_uint_eq (len, lens[i]);
    }
  nz_lite_wire_frame_header_write (out, 26);
  ck_assert_str_eq (out, "0000001a\n");
}
END_TEST

START_TEST (test_frame_header_refusals)
{
  NzLiteErr e = { 0 };
  size_t len = 0;

  /* Fewer than nine bytes and no newline yet: wait for more. */
  ck_assert_int_eq (header ("", 100, &len, &e), NZ_LITE_FRAME_HEADER_PARTIAL);
  ck_assert_int_eq (header ("0000000", 100, &len, &e), NZ_LITE_FRAME_HEADER_PARTIAL);
  ck_assert_int_eq (header ("0000000A\n", 100, &len, &e), NZ_LITE_FRAME_HEADER_OK);
  ck_assert_uint_eq (len, 10);
  ck_assert_int_eq (header ("000\n", 100, &len, &e), NZ_LITE_FRAME_HEADER_BAD);
  ck_assert_int_eq (e.kind, NZ_LITE_ERR_PROTOCOL);
  ck_assert_str_eq (e.msg, "agent unix:/x: malformed frame header (newline at 3)");
  ck_assert_int_eq (header ("000000000", 100, &len, &e), NZ_LITE_FRAME_HEADER_BAD);
  ck_assert (strstr (e.msg, "no newline in the first 9 bytes") != NULL);
  ck_assert_int_eq (header ("0000x000\n", 100, &len, &e), NZ_LITE_FRAME_HEADER_BAD);
  ck_assert (strstr (e.msg, "invalid frame length header \"0000x000\"") != NULL);
  /* The limit itself is allowed; one byte more is not. */
  ck_assert_int_eq (header ("00000064\n", 100, &len, &e), NZ_LITE_FRAME_HEADER_OK);
  ck_assert_int_eq (header ("00000065\n", 100, &len, &e), NZ_LITE_FRAME_HEADER_BAD);
  ck_assert (strstr (e.msg, "frame announces 101 bytes, over the 100-byte limit") != NULL);
}
END_TEST

START_TEST (test_endpoints)
{
  const char *plain[] = { "unix:/run/a.sock", "tcp:127.0.0.1:7", "http://10.0.0.1:8080/",
                          "HTTP://10.0.0.1:80" };
  const char *descs[] = { "unix:/run/a.sock", "tcp:127.0.0.1:7", "http://10.0.0.1:8080",
                          "http://10.0.0.1:80" };
  /* Names need NSS and IPv6 and vsock the GLib implementation: not the plain case. */
  const char *other[] = { "unix:rel", "tcp:localhost:7", "tcp:[::1]:7", "tcp:1.2.3.4",
                          "tcp:1.2.3.4:0", "tcp:1.2.3.4:65536", "http://1.2.3.4:80/v1",
                          "http://u@1.2.3.4:80", "vsock:3:1024", "" };

  for (size_t i = 0; i < G_N_ELEMENTS (plain); i++)
    {
      NzLiteEndpoint ep;

      ck_assert_msg (nz_lite_wire_parse_endpoint (plain[i], &ep), "refused: %s", plain[i]);
      ck_assert_str_eq (ep.desc, descs[i]);
      nz_lite_endpoint_clear (&ep);
    }
  for (size_t i = 0; i < G_N_ELEMENTS (other); i++)
    {
      NzLiteEndpoint ep;

      ck_assert_msg (!nz_lite_wire_parse_endpoint (other[i], &ep), "accepted: %s", other[i]);
      nz_lite_endpoint_clear (&ep);
    }
}
END_TEST

START_TEST (test_timeouts)
{
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("250"), 250);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("500ms"), 500);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("2s"), 2000);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("3m"), 180000);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("1h"), 3600000);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("0"), -1);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("s"), -1);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("-1s"), -1);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("1.5s"), -1);
  ck_assert_int_eq (nz_lite_exec_parse_timeout_ms ("99999999999999999999"), -1);
}
END_TEST

START_TEST (test_body)
{
  char *command[] = { "sh", "-c", "echo \"$A\"", NULL };
  const char *env[] = { "A=1", "B=x\ty", "A=2" };
  const char *no_key[] = { "=1" };
  NzLiteBuf b = { 0 };

  ck_assert (nz_lite_exec_build_body (command, "/tmp", env, 3, "2s", &b));
  /* A repeated key stays where it first appeared, with the last value (json-glib's way). */
  ck_assert_str_eq (b.data, "{\"command\":\"sh\",\"args\":[\"-c\",\"echo \\\"$A\\\"\"],"
                            "\"cwd\":\"/tmp\",\"env\":{\"A\":\"2\",\"B\":\"x\\u0009y\"},"
                            "\"timeoutMs\":2000");
  free (b.data);
  b = (NzLiteBuf){ 0 };
  ck_assert (!nz_lite_exec_build_body (command, NULL, no_key, 1, NULL, &b));
  free (b.data);
  b = (NzLiteBuf){ 0 };
  ck_assert (!nz_lite_exec_build_body (command, NULL, NULL, 0, "soon", &b));
  free (b.data);
  b = (NzLiteBuf){ 0 };
  command[0] = "\xff";
  ck_assert (!nz_lite_exec_build_body (command, NULL, NULL, 0, NULL, &b));
  free (b.data);
}
END_TEST

/* The one exit-status rule (lib/client, the front and namzu-attach all call it): timeout
 * first, then a signal 1..64, then an integral code 0..255; anything else is unusable. */
START_TEST (test_exit_status_rule)
{
  ck_assert_int_eq (nz_lite_exit_status (true, 9, true, 0), 124);
  ck_assert_int_eq (nz_lite_exit_status (false, 15, true, 3), 128 + 15);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, true, 3), 3);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, true, 0), 0);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, true, 255), 255);
  ck_assert_int_eq (nz_lite_exit_status (false, 65, true, 1), 1);
  ck_assert_int_eq (nz_lite_exit_status (false, -1, false, 0), -1);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, true, 256), -1);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, true, -1), -1);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, true, 1.5), -1);
  ck_assert_int_eq (nz_lite_exit_status (false, 0, false, 7), -1);
}
END_TEST

/* How a read ended, in the reference's words (spec D.2.4), as both namzu-exec programs say it. */
START_TEST (test_read_end_words)
{
  static const struct
  {
    NzLiteAwait await;
    NzLiteReadStatus st;
    bool partial;
    const char *what;
    const char *words; /* NULL: not a failure */
    bool timed_out;
  } cases[] = {
    { NZ_LITE_AWAIT_REPLY, NZ_LITE_READ_FRAME, false, "control reply", NULL },
    { NZ_LITE_AWAIT_REPLY, NZ_LITE_READ_ERROR, false, "control reply", NULL },
    { NZ_LITE_AWAIT_REPLY, NZ_LITE_READ_EOF, false, "control reply", "socket closed before reply" },
    { NZ_LITE_AWAIT_REPLY, NZ_LITE_READ_EOF, true, "control reply",
      "control reply has trailing partial data" },
    { NZ_LITE_AWAIT_REPLY, NZ_LITE_READ_TIMEOUT, true, "control reply",
      "read idle timeout after 250ms", true },
    { NZ_LITE_AWAIT_FRAME, NZ_LITE_READ_FRAME, true, "exec stream", NULL },
    { NZ_LITE_AWAIT_FRAME, NZ_LITE_READ_EOF, false, "exec stream",
      "socket closed before exec stream terminator" },
    { NZ_LITE_AWAIT_FRAME, NZ_LITE_READ_EOF, true, "exec stream",
      "exec stream has trailing partial data" },
    { NZ_LITE_AWAIT_FRAME, NZ_LITE_READ_TIMEOUT, true, "exec stream",
      "exec stream observation exceeded 250ms", true },
    { NZ_LITE_AWAIT_CLOSE, NZ_LITE_READ_EOF, false, "stream", NULL },
    { NZ_LITE_AWAIT_CLOSE, NZ_LITE_READ_EOF, true, "stream", "stream has trailing partial data" },
    { NZ_LITE_AWAIT_CLOSE, NZ_LITE_READ_TIMEOUT, true, "stream",
      "stream has trailing partial data" },
    { NZ_LITE_AWAIT_CLOSE, NZ_LITE_READ_FRAME, false, "stream",
      "stream emitted data after its terminator" },
    { NZ_LITE_AWAIT_CLOSE, NZ_LITE_READ_TIMEOUT, false, "stream",
      "stream peer did not close after terminator" },
    { NZ_LITE_AWAIT_CLOSE_CONTROL, NZ_LITE_READ_FRAME, false, "control reply",
      "control reply emitted multiple frames" },
    { NZ_LITE_AWAIT_CLOSE_CONTROL, NZ_LITE_READ_TIMEOUT, false, "control reply",
      "control peer did not close after reply" },
    { NZ_LITE_AWAIT_CLOSE_CONTROL, NZ_LITE_READ_ERROR, false, "control reply", NULL },
  };

  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      char words[256] = "";
      bool timed_out = !cases[i].timed_out;
      bool failed = nz_lite_frame_read_failed (cases[i].await, cases[i].st, cases[i].partial,
                                               cases[i].what, 250, &timed_out, words,
                                               sizeof words);

      ck_assert_msg (failed == (cases[i].words != NULL), "case %zu: %s", i, words);
      if (!failed)
        continue;
      ck_assert_str_eq (words, cases[i].words);
      ck_assert_msg (timed_out == cases[i].timed_out, "case %zu", i);
    }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("lite-wire");
  TCase *tc = tcase_create ("lite-wire");

  tcase_add_test (tc, test_frame_header_round_trip);
  tcase_add_test (tc, test_exit_status_rule);
  tcase_add_test (tc, test_frame_header_refusals);
  tcase_add_test (tc, test_endpoints);
  tcase_add_test (tc, test_timeouts);
  tcase_add_test (tc, test_body);
  tcase_add_test (tc, test_read_end_words);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
