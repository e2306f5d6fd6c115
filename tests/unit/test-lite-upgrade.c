/* Unit tests for nz-lite-upgrade, the worker upgrade both namzu-exec programs speak: the
 * request's bytes, the sans-IO reading of the response head however it is cut into reads,
 * and the exact words of each refusal. */
#include <stdlib.h>
#include <string.h>

#include "nz-lite-upgrade.h"
#include "../nz-test.h"

#define UPGRADED_HEAD                                                                              \
  "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: namzu-agent/2\r\n\r\n"

/* Feeds @len bytes of @text to the parser @piece bytes at a time (0: all at once), as reads
 * would, and returns the first step that is not MORE (or MORE). @eof: the peer closes after the
 * last byte. */
static NzLiteUpgradeStep
feed (const char *text, size_t len, size_t piece, bool eof, NzLiteUpgradeHead *h)
{
  size_t got = piece == 0 || piece > len ? len : piece;

  for (;;)
    {
      NzLiteUpgradeStep step = nz_lite_upgrade_parse (text, got, eof && got == len, h);

      ck_assert_int_eq (step, h->step);
      if (step != NZ_LITE_UPGRADE_MORE || got == len)
        return step;
      got = got + piece > len ? len : got + piece;
    }
}

/* The words for the whole reply @text (@len bytes), to the op "execute". */
static char *
words (const char *text, size_t len, NzLiteUpgradeStep want, NzLiteUpgradeErrKind want_kind)
{
  NzLiteUpgradeHead h;
  NzLiteBuf out = { 0 };

  ck_assert_int_eq (feed (text, len, 0, true, &h), want);
  ck_assert_int_eq (nz_lite_upgrade_words (&h, text, len, "execute", &out), want_kind);
  return out.data;
}

static void
assert_words (const char *reply, NzLiteUpgradeStep step, NzLiteUpgradeErrKind kind,
              const char *want)
{
  char *got = words (reply, strlen (reply), step, kind);

  ck_assert_str_eq (got, want);
  free (got);
}

START_TEST (test_request)
{
  NzLiteBuf b = { 0 };

  nz_lite_upgrade_request (&b, "127.0.0.1", 8080, "s3cret");
  ck_assert_str_eq (b.data, "GET /v1/agent HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                            "User-Agent: namzu\r\nConnection: Upgrade\r\n"
                            "Upgrade: namzu-agent/2\r\nAuthorization: Bearer s3cret\r\n\r\n");
  free (b.data);
  /* No token, or an empty one: no header at all. */
  b = (NzLiteBuf){ 0 };
  nz_lite_upgrade_request (&b, "::1", 80, "");
  ck_assert_str_eq (b.data, "GET /v1/agent HTTP/1.1\r\nHost: [::1]:80\r\nUser-Agent: namzu\r\n"
                            "Connection: Upgrade\r\nUpgrade: namzu-agent/2\r\n\r\n");
  free (b.data);
  b = (NzLiteBuf){ 0 };
  nz_lite_upgrade_request (&b, "worker.example", 1, NULL);
  ck_assert (strstr (b.data, "\r\nHost: worker.example:1\r\n") != NULL);
  ck_assert (strstr (b.data, "Authorization") == NULL);
  free (b.data);
}
END_TEST

/* The 101, and where the agent's framing starts, however the bytes arrive. */
START_TEST (test_upgraded)
{
  const char reply[] = UPGRADED_HEAD "00000002\n{}";
  const char listed[] = "HTTP/1.0 101 x\r\nupgrade:  websocket ,Namzu-Agent/2 \r\n\r\n0000";

  for (size_t piece = 0; piece < 9; piece++)
    {
      NzLiteUpgradeHead h;

      ck_assert_int_eq (feed (reply, strlen (reply), piece, false, &h), NZ_LITE_UPGRADE_UPGRADED);
      ck_assert_uint_eq (h.status, 101);
      ck_assert_uint_eq (h.head_len, strlen (UPGRADED_HEAD));
      ck_assert_str_eq (reply + h.head_len, "00000002\n{}");
    }
  {
    NzLiteUpgradeHead h;

    /* The header's name in any case, the protocol among others, in any case. */
    ck_assert_int_eq (feed (listed, strlen (listed), 0, false, &h), NZ_LITE_UPGRADE_UPGRADED);
    ck_assert_str_eq (listed + h.head_len, "0000");
  }
}
END_TEST

/* A head split over many reads asks for more until its blank line, then reads like one read. */
START_TEST (test_split_head)
{
  const char *reply = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 24\r\n\r\n"
                      "{\"error\":\"unauthorized\"}";
  size_t head = strstr (reply, "\r\n\r\n") + 4 - reply;
  NzLiteUpgradeHead h;

  for (size_t got = 0; got < head; got++)
    ck_assert_int_eq (nz_lite_upgrade_parse (reply, got, false, &h), NZ_LITE_UPGRADE_MORE);
  ck_assert_int_eq (nz_lite_upgrade_parse (reply, head, false, &h), NZ_LITE_UPGRADE_REFUSED);
  ck_assert_uint_eq (h.status, 401);
  ck_assert_uint_eq (h.head_len, head);
  ck_assert (h.body_sized);
  ck_assert_uint_eq (h.body_len, 24);
  ck_assert_int_eq (feed (reply, strlen (reply), 3, false, &h), NZ_LITE_UPGRADE_REFUSED);
  ck_assert_uint_eq (h.head_len, head);
  /* Closed before the head ended. */
  ck_assert_int_eq (nz_lite_upgrade_parse (reply, head - 1, true, &h), NZ_LITE_UPGRADE_CLOSED);
  ck_assert_int_eq (nz_lite_upgrade_parse ("", 0, true, &h), NZ_LITE_UPGRADE_CLOSED);
  assert_words ("HTTP/1.1 200 OK\r\n", NZ_LITE_UPGRADE_CLOSED, NZ_LITE_UPGRADE_ERR_FAILED,
                "the peer closed the connection before a complete HTTP response");
}
END_TEST

/* Each refusal in the words both programs print. */
START_TEST (test_refusals)
{
  assert_words (
      "HTTP/1.1 401 Unauthorized\r\nContent-Length: 24\r\n\r\n{\"error\":\"unauthorized\"}",
      NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_PERMISSION_DENIED,
      "execute failed: HTTP 401 {\"error\":\"unauthorized\"} (the worker refused the "
      "credential: the token given (NAMZU_TOKEN or the sandbox handle's) is not the "
      "NAMZU_SANDBOX_TOKEN this worker was started with)");
  assert_words ("HTTP/1.1 404 Not Found\r\nContent-Length: 21\r\n\r\n{\"error\":\"not_found\"}",
                NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_UNSUPPORTED,
                "execute is not available: the worker has no GET /v1/agent upgrade route (HTTP "
                "404 {\"error\":\"not_found\"}); run a namzu-worker from the same namzu release");
  assert_words ("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 27\r\n\r\n"
                "{\"error\":\"worker_retiring\"}",
                NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_FAILED,
                "execute failed: HTTP 503 worker_retiring: the worker fenced itself after a "
                "process-group shutdown could not be confirmed, so the sandbox must be recreated");
  /* Another 503 is an ordinary failure. */
  assert_words ("HTTP/1.1 503 Service Unavailable\r\n\r\n{\"error\":\"busy\"}",
                NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_FAILED,
                "execute failed: HTTP 503 {\"error\":\"busy\"}");
  /* The body ends at its Content-Length; on one line. */
  assert_words ("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 11\r\n\r\noops\r\nline\tXYZ",
                NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_FAILED,
                "execute failed: HTTP 500 oops  line ");
  assert_words ("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", NZ_LITE_UPGRADE_REFUSED,
                NZ_LITE_UPGRADE_ERR_FAILED, "execute failed: HTTP 502 ");
  assert_words ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                "\r\n",
                NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_PROTOCOL,
                "execute: the worker switched to a protocol other than namzu-agent/2");
  assert_words ("HTTP/1.1 101 Switching Protocols\r\nUpgrade-X: namzu-agent/2\r\n\r\n",
                NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_PROTOCOL,
                "execute: the worker switched to a protocol other than namzu-agent/2");
}
END_TEST

/* What of a body a message shows: 256 bytes, what GLib's client made of it. */
START_TEST (test_shown_body)
{
  static const char *const bodies[] = {
    "plain",
    "a\r\nb\tc\nd",
    "bad \xff byte",
    "cut \xe2\x82",
    "\xc0\xaf overlong",
    "\xed\xa0\x80 surrogate",
    "\xf4\x90\x80\x80 over U+10FFFF",
    "\xe2\x82\xac euro",
  };
  g_autoptr (GString) big = g_string_new (NULL);
  NzLiteUpgradeHead h;

  for (gsize i = 0; i < G_N_ELEMENTS (bodies); i++)
    {
      g_autofree char *cut = g_strndup (bodies[i], 256);
      g_autofree char *want = g_strdelimit (g_utf8_make_valid (cut, -1), "\r\n\t", ' ');
      NzLiteBuf got = { 0 };

      nz_lite_upgrade_shown (&got, bodies[i], strlen (bodies[i]));
      ck_assert_str_eq (got.data, want);
      free (got.data);
    }
  {
    NzLiteBuf got = { 0 };

    /* GLib's copy of the body ended at a NUL. */
    nz_lite_upgrade_shown (&got, "nul\0after", 9);
    ck_assert_str_eq (got.data, "nul");
    free (got.data);
  }
  /* Past 256 bytes, and no Content-Length: what arrived, cut at 256 (a euro sign split). */
  g_string_append (big, "HTTP/1.1 500 Oops\r\n\r\n");
  for (int i = 0; i < 86; i++)
    g_string_append (big, "\xe2\x82\xac");
  ck_assert_int_eq (nz_lite_upgrade_parse (big->str, big->len, false, &h), NZ_LITE_UPGRADE_REFUSED);
  ck_assert (!h.body_sized);
  ck_assert_uint_eq (h.body_len, NZ_LITE_UPGRADE_BODY_LIMIT);
  {
    char *got = words (big->str, big->len, NZ_LITE_UPGRADE_REFUSED, NZ_LITE_UPGRADE_ERR_FAILED);
    g_autoptr (GString) want = g_string_new ("execute failed: HTTP 500 ");

    for (int i = 0; i < 85; i++)
      g_string_append (want, "\xe2\x82\xac");
    g_string_append (want, "\xef\xbf\xbd");
    ck_assert_str_eq (got, want->str);
    free (got);
  }
  /* A Content-Length past the bound, or not a number. */
  ck_assert_int_eq (nz_lite_upgrade_parse ("HTTP/1.1 500 x\r\nContent-Length: 99999999999999\r\n"
                                           "\r\n",
                                           50, false, &h),
                    NZ_LITE_UPGRADE_REFUSED);
  ck_assert (h.body_sized);
  ck_assert_uint_eq (h.body_len, NZ_LITE_UPGRADE_BODY_LIMIT);
  ck_assert_int_eq (
      nz_lite_upgrade_parse ("HTTP/1.1 500 x\r\nContent-Length: +3\r\n\r\n", 38, false, &h),
      NZ_LITE_UPGRADE_REFUSED);
  ck_assert (!h.body_sized);
}
END_TEST

/* The head's bound: 16384 bytes before the blank line, however the head arrives. */
START_TEST (test_head_limit)
{
  g_autoptr (GString) head = g_string_new ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: "
                                           "namzu-agent/2\r\nX-Pad: ");
  NzLiteUpgradeHead h;

  while (head->len < NZ_LITE_UPGRADE_HEAD_LIMIT)
    g_string_append_c (head, 'p');
  g_string_append (head, "\r\n\r\n");
  ck_assert_int_eq (feed (head->str, head->len, 0, false, &h), NZ_LITE_UPGRADE_UPGRADED);
  ck_assert_int_eq (feed (head->str, head->len, 1000, false, &h), NZ_LITE_UPGRADE_UPGRADED);
  /* One byte more. */
  g_string_insert_c (head, (gssize)head->len - 4, 'p');
  ck_assert_int_eq (feed (head->str, head->len, 0, false, &h), NZ_LITE_UPGRADE_HEAD_TOO_LARGE);
  ck_assert_int_eq (feed (head->str, head->len, 1000, false, &h), NZ_LITE_UPGRADE_HEAD_TOO_LARGE);
  /* No blank line yet: too large once none could still end the head within the bound. */
  g_string_truncate (head, head->len - 4);
  g_string_append (head, "ppppp");
  ck_assert_int_eq (nz_lite_upgrade_parse (head->str, NZ_LITE_UPGRADE_HEAD_LIMIT + 3, false, &h),
                    NZ_LITE_UPGRADE_MORE);
  ck_assert_int_eq (nz_lite_upgrade_parse (head->str, NZ_LITE_UPGRADE_HEAD_LIMIT + 4, false, &h),
                    NZ_LITE_UPGRADE_HEAD_TOO_LARGE);
  {
    char *got = words (head->str, head->len, NZ_LITE_UPGRADE_HEAD_TOO_LARGE,
                       NZ_LITE_UPGRADE_ERR_PROTOCOL);

    ck_assert_str_eq (got, "the peer's response head exceeds 16384 bytes: not a namzu-worker");
    free (got);
  }
}
END_TEST

/* What is not an HTTP response, nor a worker's. */
START_TEST (test_not_http)
{
  const char nul[]
      = "HTTP/1.1 101 Switching Protocols\r\nX: a\0b\r\nUpgrade: namzu-agent/2\r\n\r\n";
  NzLiteUpgradeHead h;
  char *got;

  assert_words ("SSH-2.0-OpenSSH\r\n\r\n", NZ_LITE_UPGRADE_NOT_HTTP, NZ_LITE_UPGRADE_ERR_PROTOCOL,
                "not an HTTP response: \"SSH-2.0-OpenSSH\"");
  assert_words ("HTTP/1.1 2000 OK\r\n\r\n", NZ_LITE_UPGRADE_NOT_HTTP, NZ_LITE_UPGRADE_ERR_PROTOCOL,
                "not an HTTP response: \"HTTP/1.1 2000 OK\"");
  assert_words ("HTTP/1.1 099 Low\r\n\r\n", NZ_LITE_UPGRADE_NOT_HTTP, NZ_LITE_UPGRADE_ERR_PROTOCOL,
                "not an HTTP response: \"HTTP/1.1 099 Low\"");
  assert_words ("HTTP/2.0 101 x\r\nUpgrade: namzu-agent/2\r\n\r\n", NZ_LITE_UPGRADE_NOT_HTTP,
                NZ_LITE_UPGRADE_ERR_PROTOCOL, "not an HTTP response: \"HTTP/2.0 101 x\"");
  /* A bare status line, and a status without a reason. */
  ck_assert_int_eq (feed ("HTTP/1.1 404\r\n\r\n", 16, 0, false, &h), NZ_LITE_UPGRADE_REFUSED);
  ck_assert_uint_eq (h.status, 404);
  /* A NUL anywhere in the head, seen before the blank line arrives. */
  ck_assert_int_eq (nz_lite_upgrade_parse (nul, 42, false, &h), NZ_LITE_UPGRADE_NOT_HTTP);
  ck_assert_int_eq (feed (nul, sizeof nul - 1, 1, false, &h), NZ_LITE_UPGRADE_NOT_HTTP);
  got = words (nul, sizeof nul - 1, NZ_LITE_UPGRADE_NOT_HTTP, NZ_LITE_UPGRADE_ERR_PROTOCOL);
  ck_assert_str_eq (got, "not an HTTP response: a NUL byte in its head");
  free (got);
  /* After the head it is the agent's business. */
  ck_assert_int_eq (feed (UPGRADED_HEAD "\0\0", strlen (UPGRADED_HEAD) + 2, 0, false, &h),
                    NZ_LITE_UPGRADE_UPGRADED);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("lite-upgrade");
  TCase *tc = tcase_create ("lite-upgrade");

  tcase_add_test (tc, test_request);
  tcase_add_test (tc, test_upgraded);
  tcase_add_test (tc, test_split_head);
  tcase_add_test (tc, test_refusals);
  tcase_add_test (tc, test_shown_body);
  tcase_add_test (tc, test_head_limit);
  tcase_add_test (tc, test_not_http);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
