/* Integration tests for retained output and attach-execution (spec A.6.2-A.6.5, C.5, C.6)
 * against the real agent, over unix and over TCP + token. */
#include "agent-harness.h"

#include "nz-token.h"

static char *
new_exec_id (void)
{
  g_autofree char *uuid = nz_uuid_v4 ();

  return g_strconcat ("exec_", uuid, NULL);
}

static void
reserve_id (Agent *a, const char *id)
{
  g_autofree char *body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  g_autoptr (JsonObject) r = reply (a, "reserve-execution", body);

  ck_assert (nz_json_get_bool (r, "ok", FALSE));
  ck_assert_str_eq (member_str (r, "state"), "reserved");
}

typedef struct
{
  GString *bytes; /* deltas concatenated, stdout and stderr interleaved */
  guint64 first_offset;
  guint64 next_offset; /* last nextOffset seen */
  JsonObject *last;    /* result, attach_result or error */
  gboolean terminated;
  guint deltas;
} Collected;

static void
collected_free (Collected *c)
{
  g_string_free (c->bytes, TRUE);
  if (c->last != NULL)
    json_object_unref (c->last);
  g_free (c);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Collected, collected_free)

/* Reads deltas until a result / attach_result / error and the terminator; every delta must
 * carry offsets that continue where the previous one ended. */
static Collected *
collect (Stream *s, gboolean retained)
{
  Collected *c = g_new0 (Collected, 1);

  c->bytes = g_string_new (NULL);
  for (;;)
    {
      g_autofree char *f = stream_next (s, 20000);
      g_autoptr (JsonObject) obj = NULL;
      const char *type;

      ck_assert_msg (f != NULL, "closed before the terminator");
      if (*f == '\0')
        {
          c->terminated = TRUE;
          break;
        }
      obj = parse (f);
      type = member_str (obj, "type");
      if (g_str_has_suffix (type, "_delta"))
        {
          const char *data = member_str (obj, "data");

          if (retained)
            {
              gint64 off = member_int (obj, "offset"), next = member_int (obj, "nextOffset");

              if (c->deltas == 0)
                c->first_offset = (guint64)off;
              else
                ck_assert_int_eq (off, (gint64)c->next_offset);
              /* ASCII output: the raw span equals the decoded length. */
              ck_assert_int_eq (next - off, (gint64)strlen (data));
              c->next_offset = (guint64)next;
            }
          else
            ck_assert_uint_eq (json_object_get_size (obj), 2);
          g_string_append (c->bytes, data);
          c->deltas++;
          continue;
        }
      ck_assert_ptr_null (c->last);
      c->last = g_steal_pointer (&obj);
    }
  return c;
}

static Collected *
run_retained (Agent *a, const char *id, const char *script)
{
  g_autofree char *body = g_strdup_printf (
      "{\"command\":\"sh\",\"args\":[\"-c\",\"%s\"],\"executionId\":\"%s\",\"retainOutput\":true}",
      script, id);
  g_autoptr (Stream) s = stream_op (a, "execute", body);

  return collect (s, TRUE);
}

static Collected *
attach (Agent *a, const char *id, const char *from_json, JsonObject **out_attached)
{
  g_autofree char *body
      = from_json != NULL
            ? g_strdup_printf ("{\"executionId\":\"%s\",\"fromOffset\":%s}", id, from_json)
            : g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  g_autoptr (Stream) s = stream_op (a, "attach-execution", body);
  JsonObject *attached = stream_next_object (s, 20000);

  ck_assert_str_eq (member_str (attached, "type"), "attached");
  *out_attached = attached;
  return collect (s, TRUE);
}

static void
assert_attach_error (Agent *a, const char *body, const char *error, const char *state)
{
  g_autoptr (Stream) s = stream_op (a, "attach-execution", body);
  g_autoptr (JsonObject) f = stream_next_object (s, 20000);

  ck_assert_str_eq (member_str (f, "type"), "error");
  ck_assert_str_eq (member_str (f, "error"), error);
  if (state != NULL)
    ck_assert_str_eq (member_str (f, "state"), state);
  else
    ck_assert (!json_object_has_member (f, "state"));
  stream_expect_terminator (s);
  stream_expect_eof (s, 5000);
}

/* Retained execute: offsets on every delta; re-reserve reports the ring; attach replays the
 * same bytes and the real result; attach from the middle; every refusal. */
static void
check_retained_and_attach (gboolean tcp)
{
  Agent *a = agent_start (tcp);
  g_autofree char *id = new_exec_id ();
  g_autofree char *plain = new_exec_id ();
  g_autofree char *never = new_exec_id ();
  g_autoptr (Collected) run = NULL;
  g_autoptr (Collected) full = NULL;
  g_autoptr (Collected) tail = NULL;
  g_autoptr (JsonObject) attached = NULL;
  g_autoptr (JsonObject) attached2 = NULL;
  g_autoptr (JsonObject) again = NULL;
  g_autoptr (JsonObject) result = NULL;
  g_autofree char *body = NULL;
  JsonObject *res;

  reserve_id (a, id);
  run = run_retained (a, id, "printf one; printf two >&2; printf three; exit 4");
  ck_assert (run->terminated);
  ck_assert_str_eq (member_str (run->last, "type"), "result");
  ck_assert_int_eq (member_int (run->last, "exitCode"), 4);
  ck_assert_uint_eq (run->first_offset, 0);
  ck_assert_uint_eq (run->next_offset, 11);
  ck_assert_uint_eq (run->bytes->len, 11);

  /* Re-reserving a held id reports what it holds. */
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  again = reply (a, "reserve-execution", body);
  ck_assert (nz_json_get_bool (again, "ok", FALSE));
  ck_assert_str_eq (member_str (again, "state"), "terminal");
  ck_assert (nz_json_get_bool (again, "retainedOutput", FALSE));
  ck_assert_int_eq (member_int (again, "outputOffset"), 11);
  ck_assert_ptr_nonnull (nz_json_get_string (again, "guestBootId"));

  full = attach (a, id, NULL, &attached);
  ck_assert_str_eq (member_str (attached, "executionId"), id);
  ck_assert_str_eq (member_str (attached, "state"), "terminal");
  ck_assert_int_eq (member_int (attached, "fromOffset"), 0);
  ck_assert_int_eq (member_int (attached, "droppedBytes"), 0);
  ck_assert (!json_object_has_member (attached, "guestBootId"));
  ck_assert_str_eq (full->bytes->str, run->bytes->str);
  ck_assert_str_eq (member_str (full->last, "type"), "attach_result");
  ck_assert_str_eq (member_str (full->last, "outcome"), "completed");
  ck_assert (nz_json_get_bool (full->last, "started", FALSE));
  ck_assert_int_eq (member_int (full->last, "nextOffset"), 11);
  res = nz_json_get_object (full->last, "result");
  ck_assert_ptr_nonnull (res);
  ck_assert_int_eq (member_int (res, "exitCode"), 4);
  ck_assert (full->terminated);

  /* From the middle of a chunk: the first replayed delta is sliced. */
  tail = attach (a, id, "5", &attached2);
  ck_assert_int_eq (member_int (attached2, "fromOffset"), 5);
  ck_assert_uint_eq (tail->first_offset, 5);
  ck_assert_str_eq (tail->bytes->str, run->bytes->str + 5);

  /* Refusals, in the stream shape. */
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\",\"fromOffset\":12}", id);
  assert_attach_error (a, body, "invalid_offset", NULL);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\",\"fromOffset\":-1}", id);
  assert_attach_error (a, body, "invalid_offset", NULL);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\",\"fromOffset\":1.5}", id);
  assert_attach_error (a, body, "invalid_offset", NULL);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\",\"fromOffset\":\"3\"}", id);
  assert_attach_error (a, body, "invalid_offset", NULL);
  assert_attach_error (a, "{\"executionId\":\"exec_nope\"}", "invalid_execution_id", NULL);
  assert_attach_error (a, "{}", "invalid_execution_id", NULL);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", never);
  assert_attach_error (a, body, "unknown_execution", NULL);
  /* Reserved but never started: no log. */
  reserve_id (a, never);
  assert_attach_error (a, body, "output_not_retained", "reserved");
  /* Started without retention: no log either. */
  reserve_id (a, plain);
  {
    g_autofree char *eb
        = g_strdup_printf ("{\"command\":\"echo\",\"args\":[\"x\"],\"executionId\":\"%s\"}", plain);
    g_autoptr (Stream) s = stream_op (a, "execute", eb);
    g_autoptr (Collected) c = collect (s, FALSE);

    ck_assert_str_eq (member_str (c->last, "type"), "result");
  }
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", plain);
  assert_attach_error (a, body, "output_not_retained", "terminal");
  agent_stop (a);
}

START_TEST (test_retained_attach_unix)
{
  check_retained_and_attach (FALSE);
}
END_TEST

START_TEST (test_retained_attach_tcp)
{
  check_retained_and_attach (TRUE);
}
END_TEST

/* A small ring keeps the tail; attach reports the gap. */
START_TEST (test_ring_drops)
{
  Agent *a = agent_start_full (FALSE,
                               (const char *const[]){ "NAMZU_AGENT_EXECUTION_LOG_BYTES=16", NULL });
  g_autofree char *id = new_exec_id ();
  g_autoptr (Collected) run = NULL;
  g_autoptr (Collected) replay = NULL;
  g_autoptr (JsonObject) attached = NULL;

  reserve_id (a, id);
  run = run_retained (a, id, "printf 0123456789; printf abcdefghij; printf KLMNOPQRST");
  /* The live stream is complete; only the ring is bounded. */
  ck_assert_str_eq (run->bytes->str, "0123456789abcdefghijKLMNOPQRST");
  replay = attach (a, id, "0", &attached);
  ck_assert_int_eq (member_int (attached, "droppedBytes"), 14);
  ck_assert_int_eq (member_int (attached, "fromOffset"), 14);
  ck_assert_str_eq (replay->bytes->str, "efghijKLMNOPQRST");
  agent_stop (a);
}
END_TEST

typedef struct
{
  Agent *a;
  char *id;
  Collected *run;
} BgRun;

static gpointer
bg_execute (gpointer data)
{
  BgRun *b = data;

  b->run = run_retained (b->a, b->id, "echo first; sleep 1; echo second");
  return NULL;
}

/* Live follow: replay, then live deltas, then exactly one attach_result. Closing an attachment
 * never signals the process. */
START_TEST (test_live_follow)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *id = new_exec_id ();
  g_autofree char *body = NULL;
  BgRun b = { a, id, NULL };
  GThread *th;
  g_autoptr (Collected) follow = NULL;
  g_autoptr (JsonObject) attached = NULL;

  reserve_id (a, id);
  th = g_thread_new ("exec", bg_execute, &b);
  g_usleep (300000);
  /* A throwaway attachment that hangs up at once. */
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  {
    g_autoptr (Stream) quitter = stream_op (a, "attach-execution", body);
    g_autoptr (JsonObject) f = stream_next_object (quitter, 5000);

    ck_assert_str_eq (member_str (f, "state"), "running");
  }
  follow = attach (a, id, "0", &attached);
  g_thread_join (th);
  ck_assert_str_eq (follow->bytes->str, "first\nsecond\n");
  ck_assert_str_eq (member_str (follow->last, "type"), "attach_result");
  ck_assert_int_eq (member_int (nz_json_get_object (follow->last, "result"), "exitCode"), 0);
  ck_assert_int_eq (member_int (follow->last, "nextOffset"), 13);
  ck_assert_str_eq (b.run->bytes->str, "first\nsecond\n");
  ck_assert_int_eq (member_int (b.run->last, "exitCode"), 0);
  collected_free (b.run);
  agent_stop (a);
}
END_TEST

/* Any frame from the client ends the attachment (socket destroyed, no attach_result); the
 * execution goes on. */
START_TEST (test_client_frame_ends_attachment)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *id = new_exec_id ();
  g_autofree char *body = NULL;
  BgRun b = { a, id, NULL };
  GThread *th;

  reserve_id (a, id);
  th = g_thread_new ("exec", bg_execute, &b);
  g_usleep (300000);
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  {
    g_autoptr (Stream) s = stream_op (a, "attach-execution", body);
    g_autoptr (JsonObject) f = stream_next_object (s, 5000);
    g_autoptr (JsonObject) d = stream_next_object (s, 5000);

    ck_assert_str_eq (member_str (f, "type"), "attached");
    ck_assert_str_eq (member_str (d, "data"), "first\n");
    send_event (s, "{\"type\":\"input\",\"data\":\"x\"}");
    stream_expect_eof (s, 5000);
  }
  g_thread_join (th);
  ck_assert_str_eq (b.run->bytes->str, "first\nsecond\n");
  ck_assert_int_eq (member_int (b.run->last, "exitCode"), 0);
  collected_free (b.run);
  agent_stop (a);
}
END_TEST

/* MAX_RETAINED_OUTPUT_LOGS: running records hold the slots (refused before anything runs, the
 * reservation intact); a terminal record's log is discarded to make room, and attaching to it
 * still works and reports every byte dropped. */
START_TEST (test_retained_capacity)
{
  Agent *a = agent_start_full (
      FALSE, (const char *const[]){ "NAMZU_AGENT_MAX_RETAINED_OUTPUT_LOGS=1", NULL });
  g_autofree char *first = new_exec_id ();
  g_autofree char *second = new_exec_id ();
  g_autofree char *body = NULL;
  BgRun b = { a, first, NULL };
  GThread *th;
  g_autoptr (Collected) refused = NULL;
  g_autoptr (Collected) ok = NULL;
  g_autoptr (Collected) gone = NULL;
  g_autoptr (JsonObject) attached = NULL;
  g_autoptr (JsonObject) still = NULL;

  reserve_id (a, first);
  reserve_id (a, second);
  th = g_thread_new ("exec", bg_execute, &b);
  g_usleep (300000);
  refused = run_retained (a, second, "echo no");
  ck_assert_str_eq (member_str (refused->last, "error"),
                    "retained_output_capacity: limit 1 (NAMZU_AGENT_MAX_RETAINED_OUTPUT_LOGS)");
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", second);
  still = reply (a, "reserve-execution", body);
  ck_assert_str_eq (member_str (still, "state"), "reserved");
  ck_assert (!json_object_has_member (still, "retainedOutput"));
  g_thread_join (th);
  collected_free (b.run);

  ok = run_retained (a, second, "echo yes");
  ck_assert_str_eq (ok->bytes->str, "yes\n");
  gone = attach (a, first, "0", &attached);
  ck_assert_int_eq (member_int (attached, "droppedBytes"), 13);
  ck_assert_uint_eq (gone->deltas, 0);
  ck_assert_int_eq (member_int (nz_json_get_object (gone->last, "result"), "exitCode"), 0);
  agent_stop (a);
}
END_TEST

/* A reader that does not read while more than EXECUTION_LOG_BYTES piles up is removed and
 * destroyed; the execution is unaffected. */
START_TEST (test_slow_reader)
{
  Agent *a = agent_start_full (
      FALSE, (const char *const[]){ "NAMZU_AGENT_EXECUTION_LOG_BYTES=4096", NULL });
  g_autofree char *id = new_exec_id ();
  g_autofree char *body = NULL;
  g_autofree char *eb = NULL;
  g_autoptr (Stream) slow = NULL;
  g_autoptr (Stream) exec = NULL;
  g_autoptr (Collected) run = NULL;
  g_autoptr (JsonObject) attached = NULL;
  gboolean saw_result = FALSE;
  int rcvbuf = 4096;

  reserve_id (a, id);
  eb = g_strdup_printf (
      "{\"command\":\"sh\",\"args\":[\"-c\",\"sleep 0.5; yes x | head -c 8000000\"],"
      "\"executionId\":\"%s\",\"retainOutput\":true}",
      id);
  exec = stream_op (a, "execute", eb);
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  slow = stream_new (agent_connect (a));
  slow->lenient = TRUE;
  setsockopt (slow->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  {
    g_autofree char *json = envelope (a, "attach-execution", body);

    send_frame (slow->fd, json);
  }
  run = collect (exec, TRUE);
  ck_assert_int_eq (member_int (run->last, "exitCode"), 0);
  ck_assert_uint_eq (run->bytes->len, 8000000);
  /* Now drain the slow one: it was cut off, so no attach_result and no terminator. */
  for (;;)
    {
      g_autofree char *f = stream_next (slow, 20000);
      g_autoptr (JsonObject) obj = NULL;

      if (f == NULL)
        break;
      ck_assert_msg (*f != '\0', "the slow reader got a terminator");
      obj = parse (f);
      if (g_strcmp0 (nz_json_get_string (obj, "type"), "attach_result") == 0)
        saw_result = TRUE;
    }
  ck_assert (!saw_result);
  agent_stop (a);
}
END_TEST

/* Runs a built tool against @a's socket; returns its exit status; output in @out and @err. */
static int
tool_run (Agent *a, char **out, char **err, const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  int status = 0;

  g_ptr_array_add (argv, nz_test_tool (args[0]));
  g_ptr_array_add (argv, g_strdup_printf ("--endpoint=unix:%s", a->sock_path));
  for (guint i = 1; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);
  ck_assert_msg (g_spawn_sync (NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out,
                               err, &status, &error),
                 "%s", error ? error->message : "");
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* namzu-exec --detach, then namzu-attach from another process: the output the ring still
 * holds, the gap reported on stderr (never skipped silently), the command's exit status. */
START_TEST (test_tools_detach_attach_gap)
{
  Agent *a = agent_start_full (FALSE,
                               (const char *const[]){ "NAMZU_AGENT_EXECUTION_LOG_BYTES=16", NULL });
  g_autofree char *id = new_exec_id ();
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  g_autoptr (JsonObject) started = NULL;
  int rc;

  rc = tool_run (a, &out, &err,
                 (const char *const[]){ "namzu-exec", "--detach", "--id", id, "--", "sh", "-c",
                                        "sleep 0.3; printf 0123456789abcdefghij; exit 2", NULL });
  ck_assert_msg (rc == 0, "%s", err);
  started = parse (out);
  ck_assert_str_eq (member_str (started, "executionId"), id);
  ck_assert_str_eq (member_str (started, "state"), "running");
  /* Attach only once it is over, so the ring has already lost its head. */
  for (int i = 0; i < 250; i++)
    {
      g_autofree char *body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
      g_autoptr (JsonObject) r = reply (a, "reserve-execution", body);

      if (g_strcmp0 (nz_json_get_string (r, "state"), "terminal") == 0)
        break;
      g_usleep (20000);
    }
  rc = tool_run (a, &out2, &err2, (const char *const[]){ "namzu-attach", "--execution", id, NULL });
  ck_assert_int_eq (rc, 2);
  ck_assert_str_eq (out2, "456789abcdefghij");
  ck_assert_msg (strstr (err2, "4 bytes of output were dropped before offset 4") != NULL, "%s",
                 err2);
  agent_stop (a);
}
END_TEST

/* namzu-attach's session verbs: start a detached program, follow it from another process
 * (its status is ours), list, and the JSON error of an unknown session. */
START_TEST (test_tools_sessions)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  g_autofree char *out3 = NULL, *out4 = NULL, *err4 = NULL;
  g_autoptr (JsonObject) started = NULL;
  g_autoptr (JsonObject) list = NULL;
  g_autoptr (JsonObject) refused = NULL;
  JsonObject *first;
  int rc;

  rc = tool_run (a, &out, &err,
                 (const char *const[]){ "namzu-attach", "--start-detached", "job", "--", "sh", "-c",
                                        "sleep 0.3; echo from-job; echo oops >&2; exit 3", NULL });
  ck_assert_msg (rc == 0, "%s", err);
  started = parse (out);
  ck_assert_str_eq (member_str (started, "sessionId"), "job");
  ck_assert_str_eq (member_str (started, "kind"), "detached");
  ck_assert_int_gt (member_int (started, "pid"), 1);
  rc = tool_run (a, &out2, &err2,
                 (const char *const[]){ "namzu-attach", "--session", "job", NULL });
  ck_assert_int_eq (rc, 3);
  ck_assert_str_eq (out2, "from-job\n");
  ck_assert_str_eq (err2, "oops\n");
  rc = tool_run (a, &out3, NULL, (const char *const[]){ "namzu-attach", "--list", NULL });
  ck_assert_int_eq (rc, 0);
  list = parse (out3);
  first = json_array_get_object_element (nz_json_get_array (list, "sessions"), 0);
  ck_assert_str_eq (member_str (first, "state"), "exited");
  rc = tool_run (a, &out4, &err4, (const char *const[]){ "namzu-attach", "--kill", "nope", NULL });
  ck_assert_int_eq (rc, 1);
  refused = parse (out4);
  ck_assert_str_eq (member_str (nz_json_get_object (refused, "error"), "code"), "unknown_session");
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-attach");
  TCase *tc = tcase_create ("attach");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_retained_attach_unix);
  tcase_add_test (tc, test_retained_attach_tcp);
  tcase_add_test (tc, test_ring_drops);
  tcase_add_test (tc, test_live_follow);
  tcase_add_test (tc, test_client_frame_ends_attachment);
  tcase_add_test (tc, test_retained_capacity);
  tcase_add_test (tc, test_slow_reader);
  tcase_add_test (tc, test_tools_detach_attach_gap);
  tcase_add_test (tc, test_tools_sessions);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
