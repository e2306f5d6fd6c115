/* test-agent-preauth: the credential gate's pre-authentication bounds against the real agent
 * over TCP + token (spec A.2, A.4): pre-auth frame cap, the pool and its eviction of the
 * oldest, the shared buffer budget, idle timeout and deadline, refusal mechanics, the 9th-byte
 * newline rule; slow-loris and connection floods keep the agent's memory bounded and healthz
 * answering. No gate (unix) means none of it. */
#include <poll.h>

#include "agent-harness.h"

static Agent *
start_tcp (const char *const *extra)
{
  return agent_start_full (TRUE, extra);
}

/* Reads to EOF within @timeout_ms; returns the frames, *@elapsed_ms the time it took. */
static GPtrArray *
read_frames_timed (int fd, gint64 *elapsed_ms)
{
  gint64 t0 = g_get_monotonic_time ();
  GPtrArray *frames = read_frames (fd);

  *elapsed_ms = (g_get_monotonic_time () - t0) / 1000;
  return frames;
}

static void
assert_single_refusal (GPtrArray *frames, const char *error)
{
  g_autoptr (JsonObject) r = NULL;

  ck_assert_msg (frames->len == 1, "%u frames", frames->len);
  r = parse (frames->pdata[0]);
  ck_assert (!nz_json_get_bool (r, "ok", TRUE));
  ck_assert_str_eq (nz_json_get_string (r, "error"), error);
}

static gint64
agent_rchar (Agent *a)
{
  return proc_number (a->pid, "io", "rchar");
}

START_TEST (test_preauth_frame_cap)
{
  Agent *a = start_tcp (NULL);
  int fd = agent_connect (a);
  g_autoptr (GPtrArray) frames = NULL;

  send_all (fd, "ffffff00\n", 9);
  frames = read_frames (fd);
  assert_single_refusal (frames, "frame_too_large: announced 4294967040 bytes, limit 8388608 "
                                 "(NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES)");
  close (fd);
  /* Clamped to the full cap. */
  agent_stop (a);
  a = start_tcp ((const char *const[]){ "NAMZU_AGENT_MAX_FRAME_BYTES=1000",
                                        "NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES=5000", NULL });
  fd = agent_connect (a);
  send_all (fd, "00000fa0\n", 9);
  g_clear_pointer (&frames, g_ptr_array_unref);
  frames = read_frames (fd);
  assert_single_refusal (frames, "frame_too_large: announced 4000 bytes, limit 1000 "
                                 "(NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES)");
  close (fd);
  agent_stop (a);
  /* No gate: no pre-auth cap, the full one names its own knob. */
  a = agent_start_full (FALSE, NULL);
  fd = agent_connect (a);
  send_all (fd, "ffffff00\n", 9);
  g_clear_pointer (&frames, g_ptr_array_unref);
  frames = read_frames (fd);
  assert_single_refusal (frames, "frame_too_large: announced 4294967040 bytes, limit 268435456 "
                                 "(NAMZU_AGENT_MAX_FRAME_BYTES)");
  close (fd);
  agent_stop (a);
}
END_TEST

/* The header is decided on its 9th byte: no newline there -> destroyed with no reply. */
START_TEST (test_ninth_byte)
{
  Agent *a = start_tcp (NULL);
  g_autoptr (GPtrArray) f1 = NULL;
  g_autoptr (GPtrArray) f2 = NULL;
  int fd = agent_connect (a);

  send_all (fd, "0000000ax", 9);
  f1 = read_frames (fd);
  ck_assert_uint_eq (f1->len, 0);
  close (fd);
  /* An early newline is refused at once, without waiting for 9 bytes. */
  fd = agent_connect (a);
  send_all (fd, "000\n", 4);
  f2 = read_frames (fd);
  ck_assert_uint_eq (f2->len, 0);
  close (fd);
  assert_healthy (a);
  agent_stop (a);
}
END_TEST

START_TEST (test_pool_evicts_oldest)
{
  Agent *a = start_tcp ((const char *const[]){ "NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS=2", NULL });
  int c1 = agent_connect (a), c2, c3;
  g_autoptr (GPtrArray) f1 = NULL;
  g_autoptr (JsonObject) r = NULL;
  g_autofree char *json = envelope (a, "reserve-execution", NULL);
  struct pollfd pfd;

  g_usleep (100000);
  c2 = agent_connect (a);
  g_usleep (100000);
  c3 = agent_connect (a);
  /* The oldest is told why and destroyed. */
  f1 = read_frames (c1);
  assert_single_refusal (f1, "too_many_unauthenticated_connections: limit 2 "
                             "(NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS)");
  /* The second oldest is still there (nothing to read, not closed). */
  pfd = (struct pollfd){ .fd = c2, .events = POLLIN };
  ck_assert_int_eq (poll (&pfd, 1, 200), 0);
  /* The newcomer is served. */
  send_frame (c3, json);
  {
    g_autoptr (GPtrArray) f3 = read_frames (c3);

    ck_assert_uint_eq (f3->len, 1);
    r = parse (f3->pdata[0]);
    ck_assert (nz_json_get_bool (r, "ok", FALSE));
  }
  close (c1);
  close (c2);
  close (c3);
  agent_stop (a);
}
END_TEST

START_TEST (test_buffer_budget)
{
  Agent *a = start_tcp ((const char *const[]){ "NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES=1000",
                                               "NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES=1500",
                                               NULL });
  int c1 = agent_connect (a), c2 = agent_connect (a);
  char junk[800];
  g_autoptr (GPtrArray) f2 = NULL;
  struct pollfd pfd;

  memset (junk, ' ', sizeof junk);
  send_all (c1, "00000384\n", 9);
  send_all (c1, junk, sizeof junk);
  g_usleep (100000);
  /* The connection that pushes the shared total over is the one refused. */
  send_all (c2, "00000384\n", 9);
  send_all (c2, junk, sizeof junk);
  f2 = read_frames (c2);
  assert_single_refusal (f2, "preauth_buffer_exhausted: limit 1500 bytes "
                             "(NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES)");
  pfd = (struct pollfd){ .fd = c1, .events = POLLIN };
  ck_assert_int_eq (poll (&pfd, 1, 200), 0);
  close (c1);
  close (c2);
  agent_stop (a);
  /* The budget is at least one pre-auth frame. */
  a = start_tcp ((const char *const[]){ "NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES=1000",
                                        "NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES=10", NULL });
  c1 = agent_connect (a);
  send_all (c1, "00000384\n", 9);
  send_all (c1, junk, sizeof junk);
  c2 = agent_connect (a);
  send_all (c2, "00000384\n", 9);
  send_all (c2, junk, 300);
  g_clear_pointer (&f2, g_ptr_array_unref);
  f2 = read_frames (c2);
  assert_single_refusal (f2, "preauth_buffer_exhausted: limit 1000 bytes "
                             "(NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES)");
  close (c1);
  close (c2);
  agent_stop (a);
}
END_TEST

START_TEST (test_idle_and_deadline)
{
  Agent *a = start_tcp ((const char *const[]){ "NAMZU_AGENT_PREAUTH_IDLE_TIMEOUT_MS=300",
                                               "NAMZU_AGENT_PREAUTH_DEADLINE_MS=1500", NULL });
  int fd = agent_connect (a);
  gint64 ms = 0;
  g_autoptr (GPtrArray) f = NULL;
  g_autofree char *exec = NULL;

  /* Silent: the idle timeout, no reply. */
  f = read_frames_timed (fd, &ms);
  ck_assert_uint_eq (f->len, 0);
  ck_assert_msg (ms >= 250 && ms < 1200, "idle expiry after %" G_GINT64_FORMAT " ms", ms);
  close (fd);
  /* Trickling resets the idle clock, but not the deadline (from accept). */
  fd = agent_connect (a);
  {
    gint64 t0 = g_get_monotonic_time ();
    gint64 closed_at = -1;

    /* A valid header, then the payload one byte at a time. */
    send_all (fd, "00000100\n", 9);
    for (int k = 0; k < 40 && closed_at < 0; k++)
      {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };

        if (send (fd, " ", 1, MSG_NOSIGNAL) < 0 || poll (&pfd, 1, 100) != 0)
          closed_at = (g_get_monotonic_time () - t0) / 1000;
      }
    /* Not the 300 ms idle timeout (each byte reset it), but the 1500 ms deadline. */
    ck_assert_msg (closed_at >= 1300 && closed_at < 3500, "closed after %" G_GINT64_FORMAT " ms",
                   closed_at);
  }
  close (fd);
  /* Authenticated connections leave the pool: never timed out by it. */
  exec = envelope (a, "execute", "{\"command\":\"sleep\",\"args\":[\"2\"]}");
  fd = agent_connect (a);
  send_frame (fd, exec);
  g_clear_pointer (&f, g_ptr_array_unref);
  f = read_frames_timed (fd, &ms);
  ck_assert_uint_eq (f->len, 2);
  ck_assert (strstr (f->pdata[0], "\"type\":\"result\"") != NULL);
  ck_assert_int_ge (ms, 1900);
  close (fd);
  agent_stop (a);
}
END_TEST

/* No gate: quiet connections are never aged out. */
START_TEST (test_no_gate_no_bounds)
{
  Agent *a = agent_start_full (FALSE, (const char *const[]){ "NAMZU_AGENT_PREAUTH_IDLE_TIMEOUT_MS=200",
                                                             "NAMZU_AGENT_PREAUTH_DEADLINE_MS=200",
                                                             "NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS=1",
                                                             NULL });
  int c1 = agent_connect (a), c2 = agent_connect (a);
  struct pollfd pfd[2] = { { .fd = c1, .events = POLLIN }, { .fd = c2, .events = POLLIN } };

  ck_assert_int_eq (poll (pfd, 2, 700), 0);
  close (c1);
  close (c2);
  agent_stop (a);
}
END_TEST

/* A refused peer flooding 4 MiB results in under 1 MiB read by the agent. */
START_TEST (test_refused_flood)
{
  Agent *a = start_tcp (NULL);
  int fd = agent_connect (a);
  g_autofree char *bad = g_strdup ("{\"op\":\"execute\",\"token\":\"wrong\",\"body\":{}}");
  g_autofree char *junk = g_malloc (65536);
  gint64 before, after;
  gsize sent = 0;

  memset (junk, 'j', 65536);
  before = agent_rchar (a);
  send_frame (fd, bad);
  fcntl (fd, F_SETFL, O_NONBLOCK);
  for (int k = 0; k < 400 && sent < 4 * 1024 * 1024; k++)
    {
      ssize_t n = send (fd, junk, 65536, MSG_NOSIGNAL);

      if (n > 0)
        sent += (gsize)n;
      else if (n < 0 && errno != EAGAIN)
        break;
      else
        g_usleep (5000);
    }
  g_usleep (300000);
  after = agent_rchar (a);
  ck_assert_msg (after - before < 1024 * 1024, "agent read %" G_GINT64_FORMAT " bytes",
                 after - before);
  close (fd);
  assert_healthy (a);
  agent_stop (a);
}
END_TEST

/* Many connections each holding a partial pre-auth frame, and slow-loris trickles: memory
 * stays bounded by the shared budget and healthz keeps answering. */
START_TEST (test_flood_memory_bounded)
{
  Agent *a = start_tcp ((const char *const[]){ "NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES=1048576",
                                               "NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES=4194304",
                                               "NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS=32",
                                               NULL });
  g_autofree char *junk = g_malloc (900 * 1024);
  int fds[120];
  gint64 rss0;

  memset (junk, 'k', 900 * 1024);
  assert_healthy (a);
  rss0 = vm_rss_kib (a->pid);
  for (int k = 0; k < 120; k++)
    {
      fds[k] = agent_connect (a);
      fcntl (fds[k], F_SETFL, O_NONBLOCK);
      send (fds[k], "000fffff\n", 9, MSG_NOSIGNAL);
      /* Up to 900 KiB each, as much as the kernel takes without blocking. */
      send (fds[k], junk, 900 * 1024, MSG_NOSIGNAL);
      if (k % 20 == 19)
        assert_healthy (a);
    }
  /* Slow-loris: trickle a byte on each still-open connection for a while. */
  for (int round = 0; round < 5; round++)
    {
      for (int k = 0; k < 120; k++)
        send (fds[k], "k", 1, MSG_NOSIGNAL);
      g_usleep (100000);
    }
  assert_healthy (a);
  /* 4 MiB budget + per-connection bookkeeping + allocator slack. */
  assert_rss_growth (a->pid, rss0, 24 * 1024);
  for (int k = 0; k < 120; k++)
    close (fds[k]);
  assert_healthy (a);
  agent_stop (a);
}
END_TEST

/* ---- parsing before authentication ---- */

/* Sends @json (any bytes) as one frame on a fresh connection and reads to EOF. */
static GPtrArray *
request_raw (Agent *a, const char *json, gsize len)
{
  g_autofree char *header = g_strdup_printf ("%08x\n", (unsigned)len);
  int fd = agent_connect (a);
  GPtrArray *frames;

  send_all (fd, header, 9);
  send_all (fd, json, len);
  frames = read_frames (fd);
  close (fd);
  return frames;
}

static char *
brackets (gsize n)
{
  return g_strnfill (n, '[');
}

/* ~512 KiB of '[' overflowed json-glib's recursion (the agent died on one unauthenticated
 * frame); now it is refused by name and the agent answers the next caller. Also inside an
 * authenticated envelope's body, and on an ungated agent. */
START_TEST (test_nesting_bound)
{
  const char *too_deep = "json_too_deep: nesting deeper than 64 levels";
  g_autofree char *flood = brackets (512 * 1024);
  g_autofree char *authed = g_strdup_printf ("{\"op\":\"execute\",\"token\":\"%s\",\"body\":%s}",
                                             TOKEN, flood);
  g_autofree char *health = g_strdup_printf ("{\"op\":\"healthz\",\"body\":%s}", flood);
  Agent *gated = start_tcp (NULL);
  Agent *open = agent_start_full (FALSE, NULL);
  Agent *both[] = { gated, open };

  for (guint i = 0; i < G_N_ELEMENTS (both); i++)
    {
      /* Bare, it is no envelope (not an object): destroyed with no reply (spec A.3). */
      {
        g_autoptr (GPtrArray) frames = request_raw (both[i], flood, strlen (flood));

        ck_assert_uint_eq (frames->len, 0);
        assert_healthy (both[i]);
      }

      const char *docs[] = { authed, health };

      for (guint d = 0; d < G_N_ELEMENTS (docs); d++)
        {
          g_autoptr (GPtrArray) frames = request_raw (both[i], docs[d], strlen (docs[d]));

          assert_single_refusal (frames, too_deep);
          assert_healthy (both[i]);
        }
    }
  agent_stop (gated);
  agent_stop (open);
}
END_TEST

/* The peak resident memory of @pid in KiB (VmHWM: what the OOM killer would have seen). */
static gint64
vm_hwm_kib (GPid pid)
{
  return proc_number (pid, "status", "VmHWM");
}

/* @head, then @unit as often as fits, then spaces and @tail: exactly @size bytes. */
static char *
sized_doc (gsize size, const char *head, const char *unit, const char *tail)
{
  GString *s = g_string_new (head);
  gsize unit_len = strlen (unit), tail_len = strlen (tail);

  while (s->len + unit_len + tail_len <= size)
    g_string_append (s, unit);
  while (s->len + tail_len < size)
    g_string_append_c (s, ' ');
  g_string_append (s, tail);
  ck_assert_uint_eq (s->len, size);
  return g_string_free (s, FALSE);
}

/* A pre-auth frame costs a small multiple of its size: the maximum-size (8 MiB, spec A.2)
 * healthz of small members grew the agent by hundreds of MiB (json-glib builds a node per
 * member) before its token, or lack of one, was looked at. Every shape here stays within
 * 16 MiB of peak growth, and all but the healthz ones are refused unauthorized. */
START_TEST (test_preauth_memory)
{
  const gsize max = 8388608;
  struct
  {
    const char *name, *head, *unit, *tail;
    const char *error; /* NULL: healthz answers ok */
  } shapes[] = {
    { "array of small numbers", "{\"op\":\"healthz\",\"body\":[0", ",0", "]}", NULL },
    { "object of small members", "{\"op\":\"healthz\",\"body\":{\"k\":0", ",\"k\":0", "}}",
      NULL },
    { "one huge string", "{\"op\":\"healthz\",\"body\":\"", "s", "\"}", NULL },
    { "one huge escaped key", "{\"op\":\"healthz\",\"\\u0061", "k", "\":1}", NULL },
    { "small nested members", "{\"op\":\"healthz\",\"body\":[[[[0]]]", ",[[[[0]]]]", "]}",
      NULL },
    { "huge token", "{\"op\":\"reserve-execution\",\"token\":\"", "t", "\"}", "unauthorized" },
    { "wrong token, many members", "{\"op\":\"execute\",\"token\":\"x\",\"body\":[0", ",0",
      "]}", "unauthorized" },
    { "no token, many strings", "{\"op\":\"execute\",\"body\":[\"\"", ",\"\"", "]}",
      "unauthorized" },
  };
  Agent *a = start_tcp (NULL);
  gint64 hwm0;

  assert_healthy (a);
  hwm0 = vm_hwm_kib (a->pid);
  for (guint i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      g_autofree char *doc
          = sized_doc (max, shapes[i].head, shapes[i].unit, shapes[i].tail);
      g_autoptr (GPtrArray) frames = request_raw (a, doc, max);
      g_autoptr (JsonObject) r = NULL;
      gint64 grown;

      ck_assert_msg (frames->len == 1, "%s: %u frames", shapes[i].name, frames->len);
      r = parse (frames->pdata[0]);
      if (shapes[i].error == NULL)
        ck_assert_msg (nz_json_get_bool (r, "ok", FALSE), "%s: not ok", shapes[i].name);
      else
        ck_assert_str_eq (nz_json_get_string (r, "error"), shapes[i].error);
      grown = vm_hwm_kib (a->pid) - hwm0;
      fprintf (stderr, "# pre-auth %s (8 MiB): agent VmHWM +%" G_GINT64_FORMAT " KiB\n",
               shapes[i].name, grown);
      if (!sanitized_build ())
        ck_assert_msg (grown <= 16 * 1024, "%s: agent peak grew %" G_GINT64_FORMAT " KiB",
                       shapes[i].name, grown);
    }
  assert_healthy (a);
  agent_stop (a);
}
END_TEST

/* Tokens compare as whole byte strings: the right token with bytes after an embedded NUL is
 * another token (json-glib's C strings stopped at the NUL and let it in). */
START_TEST (test_token_whole_bytes)
{
  Agent *a = start_tcp (NULL);
  const char *wrong[] = { "{\"op\":\"reserve-execution\",\"token\":\"" TOKEN "\\u0000x\"}",
                          "{\"op\":\"reserve-execution\",\"token\":\"" TOKEN "\\u0000\"}",
                          "{\"op\":\"reserve-execution\",\"token\":\"" TOKEN "x\"}",
                          "{\"op\":\"reserve-execution\",\"token\":\"per-instance\"}" };
  const char *right = "{\"op\":\"reserve-execution\",\"token\":\"per-instance-\\u0073ecret\"}";

  for (guint i = 0; i < G_N_ELEMENTS (wrong); i++)
    {
      g_autoptr (GPtrArray) frames = request_raw (a, wrong[i], strlen (wrong[i]));

      assert_single_refusal (frames, "unauthorized");
    }
  {
    g_autoptr (GPtrArray) frames = request_raw (a, right, strlen (right));
    g_autoptr (JsonObject) r = NULL;

    ck_assert_uint_eq (frames->len, 1);
    r = parse (frames->pdata[0]);
    ck_assert (nz_json_get_bool (r, "ok", FALSE));
  }
  agent_stop (a);
  /* Trust on first use binds the whole bytes too. */
  a = start_tcp ((const char *const[]){ "NAMZU_AGENT_REQUIRE_TOKEN=1", NULL });
  {
    const char *bind = "{\"op\":\"reserve-execution\",\"token\":\"ab\\u0000cd\"}";
    const char *prefix = "{\"op\":\"reserve-execution\",\"token\":\"ab\"}";
    g_autoptr (GPtrArray) f1 = request_raw (a, bind, strlen (bind));
    g_autoptr (GPtrArray) f2 = request_raw (a, prefix, strlen (prefix));
    g_autoptr (GPtrArray) f3 = request_raw (a, bind, strlen (bind));
    g_autoptr (JsonObject) r1 = NULL, r3 = NULL;

    ck_assert_uint_eq (f1->len, 1);
    r1 = parse (f1->pdata[0]);
    ck_assert (nz_json_get_bool (r1, "ok", FALSE));
    assert_single_refusal (f2, "unauthorized");
    ck_assert_uint_eq (f3->len, 1);
    r3 = parse (f3->pdata[0]);
    ck_assert (nz_json_get_bool (r3, "ok", FALSE));
  }
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-preauth");
  TCase *tc = tcase_create ("preauth");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_preauth_frame_cap);
  tcase_add_test (tc, test_ninth_byte);
  tcase_add_test (tc, test_pool_evicts_oldest);
  tcase_add_test (tc, test_buffer_budget);
  tcase_add_test (tc, test_idle_and_deadline);
  tcase_add_test (tc, test_no_gate_no_bounds);
  tcase_add_test (tc, test_refused_flood);
  tcase_add_test (tc, test_flood_memory_bounded);
  tcase_add_test (tc, test_nesting_bound);
  tcase_add_test (tc, test_preauth_memory);
  tcase_add_test (tc, test_token_whole_bytes);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
