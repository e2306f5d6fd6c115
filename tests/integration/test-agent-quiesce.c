/* test-agent-quiesce: quiesce, its gate, flush, the SIGTERM drain, the reseed hook and the
 * advertised features, against the real namzu-agent over a unix socket and TCP + token
 * (spec A.5, A.6.15, A.6.16, C.13-C.15). In these tests the agent's parent is the test, not
 * an init, so the scope is owned-sessions: only what the agent started is stopped. */
#include <poll.h>

#include "agent-harness.h"

static Agent *
start (int i, const char *const *extra)
{
  return agent_start_full (i == 1, extra);
}

/* Opens an execute stream for a reserved id and leaves it running; returns the socket. */
static int
start_tracked (Agent *a, const char *command_json_args, char **out_id)
{
  g_autoptr (JsonObject) r = reply (a, "reserve-execution", NULL);
  g_autofree char *body = NULL;
  g_autofree char *json = NULL;
  int fd;

  *out_id = g_strdup (nz_json_get_string (r, "executionId"));
  body = g_strdup_printf ("{\"executionId\":\"%s\",%s}", *out_id, command_json_args);
  json = envelope (a, "execute", body);
  fd = agent_connect (a);
  send_frame (fd, json);
  return fd;
}

/* Waits until @path exists (the command has started). */
static void
wait_for_file (const char *path)
{
  for (int k = 0; k < 200 && g_access (path, F_OK) != 0; k++)
    g_usleep (20000);
  ck_assert_msg (g_access (path, F_OK) == 0, "%s never appeared", path);
  /* Let the short-lived helper that made it (touch) finish. */
  g_usleep (150000);
}

static JsonObject *
stream_result (int fd)
{
  g_autoptr (GPtrArray) frames = read_frames (fd);

  close (fd);
  ck_assert_uint_ge (frames->len, 2);
  ck_assert_str_eq (frames->pdata[frames->len - 1], "");
  return parse (frames->pdata[frames->len - 2]);
}

START_TEST (test_quiesce_stops_owned)
{
  Agent *a = start (_i, NULL);
  g_autofree char *id = NULL;
  g_autofree char *marker = ws_path (a, "started");
  g_autofree char *args = g_strdup_printf (
      "\"command\":\"sh\",\"args\":[\"-c\",\"sleep 30 & touch %s; wait\"]", marker);
  int fd = start_tracked (a, args, &id);
  g_autoptr (JsonObject) q = NULL;
  g_autoptr (JsonObject) result = NULL;
  JsonArray *stopped;

  wait_for_file (marker);
  q = reply (a, "quiesce", NULL);
  ck_assert_msg (nz_json_get_bool (q, "ok", FALSE), "%s", nz_json_get_string (q, "message"));
  ck_assert_str_eq (nz_json_get_string (q, "scope"), "owned-sessions");
  ck_assert_int_eq (member_int (q, "graceMs"), 1000);
  ck_assert_int_eq (member_int (q, "rounds"), 1);
  ck_assert (!json_object_has_member (q, "guestBootId"));
  stopped = nz_json_get_array (q, "stopped");
  ck_assert_uint_eq (json_array_get_length (stopped), 2); /* sh and sleep */
  for (guint k = 0; k < 2; k++)
    {
      JsonObject *s = json_array_get_object_element (stopped, k);

      ck_assert_int_gt (member_int (s, "pid"), 1);
      ck_assert_str_eq (nz_json_get_string (s, "signal"), "SIGTERM");
      ck_assert (g_str_equal (nz_json_get_string (s, "command"), "sh")
                 || g_str_equal (nz_json_get_string (s, "command"), "sleep"));
    }
  /* The stopped execution still ends with a result frame carrying the signal. */
  result = stream_result (fd);
  ck_assert_str_eq (nz_json_get_string (result, "type"), "result");
  ck_assert_int_eq (member_int (result, "exitCode"), -1);
  ck_assert_str_eq (nz_json_get_string (result, "signal"), "SIGTERM");
  ck_assert (!nz_json_get_bool (result, "timedOut", TRUE));
  /* Nothing left: rounds 0, stopped []. The agent did not fence itself. */
  {
    g_autoptr (JsonObject) q2 = reply (a, "quiesce", "{\"graceMs\":100}");

    ck_assert (nz_json_get_bool (q2, "ok", FALSE));
    ck_assert_int_eq (member_int (q2, "rounds"), 0);
    ck_assert_int_eq (member_int (q2, "graceMs"), 100);
    ck_assert_uint_eq (json_array_get_length (nz_json_get_array (q2, "stopped")), 0);
  }
  assert_healthy (a);
  /* The gate came down: executions start again. */
  {
    g_autoptr (GPtrArray) f = request (a, "execute", "{\"command\":\"true\"}");

    ck_assert (strstr (f->pdata[0], "\"type\":\"result\"") != NULL);
  }
  agent_stop (a);
}
END_TEST

/* A workload that ignores SIGTERM is SIGKILLed at the grace boundary. */
START_TEST (test_quiesce_sigkill)
{
  Agent *a = start (_i, NULL);
  g_autofree char *id = NULL;
  g_autofree char *marker = ws_path (a, "started");
  g_autofree char *args = g_strdup_printf (
      "\"command\":\"sh\",\"args\":[\"-c\",\"trap '' TERM; sleep 30 & touch %s; wait\"]", marker);
  int fd = start_tracked (a, args, &id);
  g_autoptr (JsonObject) q = NULL;
  g_autoptr (JsonObject) result = NULL;
  JsonArray *stopped;
  gint64 t0;

  wait_for_file (marker);
  t0 = g_get_monotonic_time ();
  q = reply (a, "quiesce", "{\"graceMs\":300}");
  ck_assert_msg (nz_json_get_bool (q, "ok", FALSE), "%s", nz_json_get_string (q, "message"));
  ck_assert_int_ge ((g_get_monotonic_time () - t0) / 1000, 280);
  stopped = nz_json_get_array (q, "stopped");
  ck_assert_uint_eq (json_array_get_length (stopped), 2);
  for (guint k = 0; k < 2; k++)
    ck_assert_str_eq (nz_json_get_string (json_array_get_object_element (stopped, k), "signal"),
                      "SIGKILL");
  result = stream_result (fd);
  ck_assert_str_eq (nz_json_get_string (result, "signal"), "SIGKILL");
  agent_stop (a);
}
END_TEST

START_TEST (test_quiesce_refusals)
{
  Agent *a = start (_i, NULL);
  static const char *const bad[] = { "0", "-1", "5000", "\"10\"", "1.5", "null", NULL };
  static const char *const shown[] = { "0", "-1", "5000", "10", "1.5", "null", NULL };

  for (guint k = 0; bad[k] != NULL; k++)
    {
      g_autofree char *body = g_strdup_printf ("{\"graceMs\":%s}", bad[k]);
      g_autofree char *msg
          = g_strdup_printf ("graceMs must be a positive integer of at most 4999ms "
                             "(NAMZU_AGENT_CANCEL_CONFIRM_TIMEOUT_MS minus one), got %s",
                             shown[k]);
      g_autoptr (JsonObject) r = assert_refused (a, "quiesce", body, "quiesce_invalid_grace");

      ck_assert_str_eq (nz_json_get_string (r, "message"), msg);
    }
  agent_stop (a);
}
END_TEST

/* While a quiesce runs, process-starting ops are refused in their shapes; reads, writes and
 * healthz are served (spec A.5 step 4). */
START_TEST (test_quiesce_gate)
{
  Agent *a = start (_i, NULL);
  g_autofree char *id = NULL;
  g_autofree char *marker = ws_path (a, "started");
  g_autofree char *args = g_strdup_printf (
      "\"command\":\"sh\",\"args\":[\"-c\",\"trap '' TERM; sleep 30 & touch %s; wait\"]", marker);
  int fd = start_tracked (a, args, &id);
  g_autofree char *qjson = envelope (a, "quiesce", "{\"graceMs\":1500}");
  int qfd;
  static const char *const stream_ops[]
      = { "execute", "terminal", "attach-execution", "attach-session", NULL };
  static const char *const reply_ops[]
      = { "reserve-execution", "start-detached", "kill-session", "quiesce", "flush", NULL };

  wait_for_file (marker);
  qfd = agent_connect (a);
  send_frame (qfd, qjson);
  g_usleep (200000);
  for (guint k = 0; stream_ops[k] != NULL; k++)
    assert_stream_error (a, stream_ops[k], "{\"command\":\"true\"}", "quiesce_in_progress");
  for (guint k = 0; reply_ops[k] != NULL; k++)
    assert_reply_error (a, reply_ops[k], NULL, "quiesce_in_progress");
  /* Served meanwhile. */
  assert_healthy (a);
  {
    g_autoptr (JsonObject) w
        = reply (a, "write-file", "{\"path\":\"during.txt\",\"content\":\"ok\"}");
    g_autoptr (JsonObject) r = reply (a, "read-file", "{\"path\":\"during.txt\"}");

    ck_assert (nz_json_get_bool (w, "ok", FALSE));
    ck_assert_str_eq (nz_json_get_string (r, "content"), "ok");
  }
  {
    g_autoptr (GPtrArray) f = request (a, "read-file-stream", "{\"path\":\"during.txt\"}");

    ck_assert (strstr (f->pdata[0], "\"type\":\"meta\"") != NULL);
  }
  {
    g_autofree char *cancel = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
    g_autoptr (GPtrArray) f = request (a, "cancel-execution", cancel);

    /* Cancel is always served (its outcome races the quiesce; either is fine here). */
    ck_assert_uint_eq (f->len, 1);
  }
  {
    g_autoptr (GPtrArray) f = read_frames (qfd);

    close (qfd);
    ck_assert_uint_eq (f->len, 1);
  }
  close (fd);
  agent_stop (a);
}
END_TEST

/* A workload that keeps starting processes during the grace exhausts the round budget. */
START_TEST (test_quiesce_rounds_and_deadline)
{
  Agent *a = start (_i, (const char *const[]){ "NAMZU_AGENT_QUIESCE_MAX_ROUNDS=1", NULL });
  g_autofree char *id = NULL;
  g_autofree char *marker = ws_path (a, "started");
  g_autofree char *args
      = g_strdup_printf ("\"command\":\"sh\",\"args\":[\"-c\",\"trap '' TERM; touch %s; "
                         "while :; do sleep 2 & sleep 0.02; done\"]",
                         marker);
  int fd = start_tracked (a, args, &id);
  g_autoptr (JsonObject) r = NULL;
  const char *msg;

  wait_for_file (marker);
  r = assert_refused (a, "quiesce", "{\"graceMs\":300}", "quiesce_unconfirmed");
  msg = nz_json_get_string (r, "message");
  ck_assert_msg (g_str_has_prefix (msg, "quiesce did not settle in 1 rounds; pid ")
                     && g_str_has_suffix (msg, "(sleep) was still starting processes"),
                 "%s", msg);
  /* What is left ignores SIGTERM and outlives its leader: the agent cannot vouch for it any
   * more (the reference fences in this case too); the sleeps end by themselves. */
  close (fd);
  agent_stop (a);

  /* The whole-op deadline: with 1 ms there is no time for even one round. */
  a = start (_i, (const char *const[]){ "NAMZU_AGENT_QUIESCE_DEADLINE_MS=1", NULL });
  g_clear_pointer (&id, g_free);
  fd = start_tracked (a, args, &id);
  wait_for_file (marker);
  g_clear_pointer (&r, json_object_unref);
  r = assert_refused (a, "quiesce", "{\"graceMs\":300}", "quiesce_unconfirmed");
  msg = nz_json_get_string (r, "message");
  ck_assert_msg (g_str_has_prefix (msg, "quiesce ran out of its 1ms deadline "
                                        "(NAMZU_AGENT_QUIESCE_DEADLINE_MS) with pid ")
                     || g_str_has_prefix (msg, "quiesce did not settle within 1ms "
                                               "(NAMZU_AGENT_QUIESCE_DEADLINE_MS); pid "),
                 "%s", msg);
  close (fd);
  agent_stop (a);
}
END_TEST

/* An untracked execute (no reservation) is not owned: a narrowed quiesce leaves it alone. */
START_TEST (test_quiesce_untracked_not_owned)
{
  Agent *a = start (_i, (const char *const[]){ "NAMZU_AGENT_QUIESCE_SCOPE=owned-sessions", NULL });
  g_autofree char *json = envelope (a, "execute", "{\"command\":\"sleep\",\"args\":[\"1\"]}");
  int fd = agent_connect (a);
  g_autoptr (JsonObject) q = NULL;
  g_autoptr (JsonObject) result = NULL;

  send_frame (fd, json);
  g_usleep (200000);
  q = reply (a, "quiesce", NULL);
  ck_assert_str_eq (nz_json_get_string (q, "scope"), "owned-sessions");
  ck_assert_uint_eq (json_array_get_length (nz_json_get_array (q, "stopped")), 0);
  result = stream_result (fd);
  ck_assert_int_eq (member_int (result, "exitCode"), 0);
  agent_stop (a);
}
END_TEST

static gboolean
features_have (JsonObject *h, const char *name)
{
  JsonArray *f = nz_json_get_array (h, "features");

  for (guint k = 0; k < json_array_get_length (f); k++)
    if (g_str_equal (json_array_get_string_element (f, k), name))
      return TRUE;
  return FALSE;
}

START_TEST (test_features_order)
{
  Agent *a = start (_i, NULL);
  g_autoptr (JsonObject) h = reply (a, "healthz", NULL);
  static const char *const order[] = { "write-file-parts",
                                       "execution-attach",
                                       "stream-heartbeat",
                                       "read-file-stream",
                                       "sessions",
                                       "quiesce",
                                       "flush",
                                       "guest-boot-id",
                                       "file-ops",
                                       "file-tree-ops",
                                       NULL };
  JsonArray *f = nz_json_get_array (h, "features");
  guint pos = 0;

  /* A subsequence of the spec's order, with this lane's four present. */
  for (guint k = 0; k < json_array_get_length (f); k++)
    {
      const char *name = json_array_get_string_element (f, k);

      while (order[pos] != NULL && !g_str_equal (order[pos], name))
        pos++;
      ck_assert_msg (order[pos] != NULL, "feature %s out of order", name);
    }
  ck_assert (features_have (h, "write-file-parts"));
  ck_assert (features_have (h, "read-file-stream"));
  ck_assert (features_have (h, "quiesce"));
  ck_assert (features_have (h, "flush"));
  agent_stop (a);
}
END_TEST

START_TEST (test_flush)
{
  Agent *a = start (_i, NULL);
  g_autoptr (JsonObject) r = reply (a, "flush", NULL);
  g_autoptr (JsonObject) r2 = NULL;

  ck_assert_msg (nz_json_get_bool (r, "ok", FALSE), "%s", nz_json_get_string (r, "message"));
  ck_assert_str_eq (nz_json_get_string (r, "workspace"), a->ws);
  ck_assert_int_ge (member_int (r, "durationMs"), 0);
  ck_assert (!json_object_has_member (r, "guestBootId"));
  r2 = reply (a, "flush", "{\"timeoutMs\":5000}");
  ck_assert (nz_json_get_bool (r2, "ok", FALSE));
  {
    g_autoptr (JsonObject) e
        = assert_refused (a, "flush", "{\"timeoutMs\":0}", "flush_invalid_timeout");

    ck_assert_str_eq (nz_json_get_string (e, "message"),
                      "timeoutMs must be a positive integer, got 0");
  }
  {
    g_autoptr (JsonObject) e
        = assert_refused (a, "flush", "{\"timeoutMs\":\"100\"}", "flush_invalid_timeout");

    ck_assert_str_eq (nz_json_get_string (e, "message"),
                      "timeoutMs must be a positive integer, got 100");
  }
  agent_stop (a);
}
END_TEST

/* NAMZU_AGENT_FLUSH_COMMAND: /bin/sh -c, the unscrubbed environment, every failure text. */
START_TEST (test_flush_command)
{
  g_autofree char *cmd = NULL;
  Agent *a;

  cmd = g_strdup ("NAMZU_AGENT_FLUSH_COMMAND=case \"$NAMZU_FLUSH_MODE\" in "
                  "ok) echo \"$NAMZU_SANDBOX_WORKSPACE\" > \"$NAMZU_SANDBOX_WORKSPACE/flushed\";; "
                  "fail) echo '  oops  ' >&2; exit 3;; kill) kill -9 $$;; "
                  "*) if test -e \"$NAMZU_SANDBOX_WORKSPACE/slow\"; then sleep 3; fi;; esac");
  a = start (_i, (const char *const[]){ cmd, "NAMZU_AGENT_FLUSH_TIMEOUT_MS=300", NULL });
  agent_stop (a);
  /* Each mode needs its own agent: the mode comes from the agent's environment. */
  {
    a = start (_i, (const char *const[]){ cmd, "NAMZU_FLUSH_MODE=ok", NULL });
    g_autoptr (JsonObject) r = reply (a, "flush", NULL);
    g_autofree char *flushed = ws_path (a, "flushed");
    g_autofree char *text = NULL;

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    /* The unscrubbed environment reached the command. */
    ck_assert (g_file_get_contents (flushed, &text, NULL, NULL));
    ck_assert_str_eq (g_strstrip (text), a->ws);
    agent_stop (a);
  }
  {
    a = start (_i, (const char *const[]){ cmd, "NAMZU_FLUSH_MODE=fail", NULL });
    g_autoptr (JsonObject) r = assert_refused (a, "flush", NULL, "flush_unconfirmed");

    ck_assert_str_eq (nz_json_get_string (r, "message"), "flush command '/bin/sh' exited 3: oops");
    agent_stop (a);
  }
  {
    a = start (_i, (const char *const[]){ cmd, "NAMZU_FLUSH_MODE=kill", NULL });
    g_autoptr (JsonObject) r = assert_refused (a, "flush", NULL, "flush_unconfirmed");

    ck_assert_str_eq (nz_json_get_string (r, "message"),
                      "flush command '/bin/sh' was killed by SIGKILL");
    agent_stop (a);
  }
  {
    a = start (_i, (const char *const[]){ cmd, "NAMZU_FLUSH_MODE=slow",
                                          "NAMZU_AGENT_FLUSH_TIMEOUT_MS=300", NULL });
    g_autofree char *slow = ws_path (a, "slow");
    g_autoptr (JsonObject) r1 = NULL;
    g_autoptr (JsonObject) r2 = NULL;

    ck_assert (g_file_set_contents (slow, "", 0, NULL));
    r1 = assert_refused (a, "flush", NULL, "flush_unconfirmed");
    ck_assert_str_eq (nz_json_get_string (r1, "message"),
                      "flush did not finish within 300ms (NAMZU_AGENT_FLUSH_TIMEOUT_MS); the "
                      "workspace filesystem may still hold unwritten pages");
    r2 = assert_refused (a, "flush", "{\"timeoutMs\":200}", "flush_unconfirmed");
    ck_assert_str_eq (nz_json_get_string (r2, "message"),
                      "flush did not finish within 200ms (the flush request's own timeoutMs); "
                      "the workspace filesystem may still hold unwritten pages");
    agent_stop (a);
  }
}
END_TEST

/* No flush program on PATH: not advertised, and the op says unsupported, not unconfirmed. */
START_TEST (test_flush_unsupported)
{
  Agent *a = start (_i, (const char *const[]){ "PATH=/nonexistent", NULL });
  g_autoptr (JsonObject) h = reply (a, "healthz", NULL);
  g_autoptr (JsonObject) r = NULL;
  g_autofree char *msg = NULL;

  ck_assert (!features_have (h, "flush"));
  ck_assert (features_have (h, "quiesce"));
  r = assert_refused (a, "flush", NULL, "flush_unsupported");
  msg = g_strdup_printf ("no 'sync' on this guest's PATH, so nothing here can run syncfs(2) over "
                         "%s; healthz does not advertise 'flush' for this image",
                         a->ws);
  ck_assert_str_eq (nz_json_get_string (r, "message"), msg);
  agent_stop (a);
}
END_TEST

static char *
read_all_fd (int fd)
{
  GString *s = g_string_new (NULL);
  char buf[4096];
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (s, buf, n);
  return g_string_free (s, FALSE);
}

/* SIGTERM: stop accepting, quiesce what we own, flush after that, exit 0. */
START_TEST (test_sigterm_drain)
{
  g_autofree char *cmd
      = g_strdup ("NAMZU_AGENT_FLUSH_COMMAND=p=$(cat \"$NAMZU_SANDBOX_WORKSPACE/pid\"); "
                  "if kill -0 $p 2>/dev/null; then echo alive; else echo gone; fi > "
                  "\"$NAMZU_SANDBOX_WORKSPACE/order\"");
  Agent *a = start (_i, (const char *const[]){ cmd, NULL });
  g_autofree char *id = NULL;
  g_autofree char *pidfile = ws_path (a, "pid");
  g_autofree char *order = ws_path (a, "order");
  g_autofree char *args = g_strdup_printf (
      "\"command\":\"sh\",\"args\":[\"-c\",\"echo $$ > %s; exec sleep 30\"]", pidfile);
  int fd = start_tracked (a, args, &id);
  g_autofree char *text = NULL;
  g_autoptr (JsonObject) result = NULL;
  int status = 0;
  gint64 t0;

  wait_for_file (pidfile);
  g_usleep (100000);
  t0 = g_get_monotonic_time ();
  ck_assert_int_eq (kill (a->pid, SIGTERM), 0);
  /* The listener is closed within 400 ms. */
  g_usleep (300000);
  {
    int c;

    if (a->sock_path != NULL)
      {
        struct sockaddr_un sun = { .sun_family = AF_UNIX };

        c = socket (AF_UNIX, SOCK_STREAM, 0);
        g_strlcpy (sun.sun_path, a->sock_path, sizeof sun.sun_path);
        ck_assert_int_ne (connect (c, (struct sockaddr *)&sun, sizeof sun), 0);
      }
    else
      {
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (a->tcp_port) };

        sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
        c = socket (AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ne (connect (c, (struct sockaddr *)&sin, sizeof sin), 0);
      }
    close (c);
  }
  ck_assert_int_eq (waitpid (a->pid, &status, 0), a->pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d", status);
  ck_assert_int_lt ((g_get_monotonic_time () - t0) / 1000, 10000);
  /* The stream got its result (the quiesce killed it), then the flush saw it gone. */
  result = stream_result (fd);
  ck_assert_str_eq (nz_json_get_string (result, "signal"), "SIGTERM");
  ck_assert (g_file_get_contents (order, &text, NULL, NULL));
  ck_assert_str_eq (g_strstrip (text), "gone");
  agent_free (a);
}
END_TEST

/* The deadline always wins, even over a hanging flush, and a second SIGTERM does not cut the
 * drain short. */
START_TEST (test_sigterm_deadline)
{
  Agent *a = agent_start_ex (_i == 1,
                             (const char *const[]){ "NAMZU_AGENT_FLUSH_COMMAND=sleep 5",
                                                    "NAMZU_AGENT_SHUTDOWN_DEADLINE_MS=1200", NULL },
                             TRUE);
  g_autofree char *err = NULL;
  int status = 0;
  gint64 t0 = g_get_monotonic_time (), ms;

  ck_assert_int_eq (kill (a->pid, SIGTERM), 0);
  g_usleep (300000);
  ck_assert_int_eq (kill (a->pid, SIGTERM), 0);
  ck_assert_int_eq (waitpid (a->pid, &status, 0), a->pid);
  ms = (g_get_monotonic_time () - t0) / 1000;
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d", status);
  ck_assert_msg (ms >= 1100 && ms < 4000, "exited after %" G_GINT64_FORMAT " ms", ms);
  err = read_all_fd (a->stderr_fd);
  ck_assert_msg (strstr (err, "[namzu-fc-agent] SIGTERM: already stopping; the drain and flush go "
                              "on until NAMZU_AGENT_SHUTDOWN_DEADLINE_MS (1200ms) expires\n")
                     != NULL,
                 "%s", err);
  ck_assert_msg (strstr (err, "[namzu-fc-agent] SIGTERM: NAMZU_AGENT_SHUTDOWN_DEADLINE_MS (1200ms) "
                              "expired; exiting\n")
                     != NULL,
                 "%s", err);
  agent_free (a);
}
END_TEST

/* NAMZU_AGENT_RESEED_HOOK runs before listening and on SIGUSR1, which re-listens. */
START_TEST (test_reseed_and_relisten)
{
  g_autofree char *hook
      = g_strdup ("NAMZU_AGENT_RESEED_HOOK=echo seeded >> \"$NAMZU_SANDBOX_WORKSPACE/reseed\"");
  Agent *a = start (_i, (const char *const[]){ hook, NULL });
  g_autofree char *log = ws_path (a, "reseed");
  g_autofree char *text = NULL;

  ck_assert (g_file_get_contents (log, &text, NULL, NULL));
  ck_assert_str_eq (text, "seeded\n");
  assert_healthy (a);
  ck_assert_int_eq (kill (a->pid, SIGUSR1), 0);
  g_clear_pointer (&text, g_free);
  for (int k = 0; k < 100; k++)
    {
      g_clear_pointer (&text, g_free);
      g_file_get_contents (log, &text, NULL, NULL);
      if (g_str_equal (text, "seeded\nseeded\n"))
        break;
      g_usleep (20000);
    }
  ck_assert_str_eq (text, "seeded\nseeded\n");
  /* Listening again, and saying where (an ephemeral TCP port changes). */
  {
    char line[256] = { 0 };
    gsize n = 0;

    while (n < sizeof line - 1 && read (a->stdout_fd, line + n, 1) == 1 && line[n] != '\n')
      n++;
    line[n] = '\0';
    ck_assert_msg (g_str_has_prefix (line, "namzu-agent listening on "), "%s", line);
    if (a->tcp_port != 0)
      a->tcp_port = atoi (line + strlen ("namzu-agent listening on tcp:0.0.0.0:"));
  }
  assert_healthy (a);
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-quiesce");
  TCase *tc = tcase_create ("quiesce");

  tcase_set_timeout (tc, 60);
  tcase_add_loop_test (tc, test_quiesce_stops_owned, 0, 2);
  tcase_add_loop_test (tc, test_quiesce_sigkill, 0, 2);
  tcase_add_loop_test (tc, test_quiesce_refusals, 0, 2);
  tcase_add_loop_test (tc, test_quiesce_gate, 0, 2);
  tcase_add_loop_test (tc, test_quiesce_rounds_and_deadline, 0, 2);
  tcase_add_loop_test (tc, test_quiesce_untracked_not_owned, 0, 2);
  tcase_add_loop_test (tc, test_features_order, 0, 2);
  tcase_add_loop_test (tc, test_flush, 0, 2);
  tcase_add_loop_test (tc, test_flush_command, 0, 2);
  tcase_add_loop_test (tc, test_flush_unsupported, 0, 2);
  tcase_add_loop_test (tc, test_sigterm_drain, 0, 2);
  tcase_add_loop_test (tc, test_sigterm_deadline, 0, 2);
  tcase_add_loop_test (tc, test_reseed_and_relisten, 0, 2);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
