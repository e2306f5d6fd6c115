/* Integration tests for terminals and sessions (spec A.6.10-A.6.14, C.9-C.11) against the real
 * agent, over unix and over TCP + token. */
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "agent-harness.h"

/* Reads frames until the accumulated terminal data contains @needle; returns the last frame's
 * nextOffset when the frames carry offsets (persistent), else -1. */
static gint64
read_until (Stream *s, GString *acc, const char *needle)
{
  gint64 next = -1;

  while (strstr (acc->str, needle) == NULL)
    {
      g_autoptr (JsonObject) f = stream_next_object (s, 10000);
      const char *type = member_str (f, "type");

      if (strcmp (type, "heartbeat") == 0)
        continue;
      ck_assert_msg (strcmp (type, "data") == 0, "unexpected %s frame", type);
      g_string_append (acc, member_str (f, "data"));
      if (json_object_has_member (f, "offset"))
        {
          ck_assert_str_eq (member_str (f, "stream"), "stdout");
          next = member_int (f, "nextOffset");
        }
      else
        ck_assert (!json_object_has_member (f, "stream"));
    }
  return next;
}

/* Skips data and heartbeats up to the next frame of @type. */
static JsonObject *
next_of_type (Stream *s, const char *type)
{
  for (;;)
    {
      JsonObject *f = stream_next_object (s, 15000);
      const char *t = member_str (f, "type");

      if (strcmp (t, type) == 0)
        return f;
      ck_assert_msg (strcmp (t, "data") == 0 || strcmp (t, "heartbeat") == 0,
                     "unexpected %s frame while waiting for %s", t, type);
      json_object_unref (f);
    }
}

static void
assert_terminal_refused (Agent *a, const char *body, const char *error)
{
  g_autoptr (Stream) s = stream_op (a, "terminal", body);
  g_autoptr (JsonObject) f = stream_next_object (s, 10000);

  ck_assert_str_eq (member_str (f, "type"), "error");
  ck_assert_str_eq (member_str (f, "error"), error);
  /* Start-up refusals of a terminal carry no terminator. */
  stream_expect_eof (s, 5000);
}

static void
check_terminal (gboolean tcp)
{
  Agent *a = agent_start (tcp);
  g_autoptr (Stream) s = stream_op (a, "terminal",
                                    "{\"cols\":80,\"rows\":24,\"command\":\"/bin/sh\","
                                    "\"env\":{\"PS1\":\"$ \"}}");
  g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
  g_autoptr (JsonObject) exit_frame = NULL;
  g_autoptr (GString) acc = g_string_new (NULL);

  ck_assert_str_eq (member_str (ready, "type"), "ready");
  ck_assert_ptr_nonnull (nz_json_get_string (ready, "guestBootId"));
  ck_assert (!json_object_has_member (ready, "heartbeatMs"));
  ck_assert (!json_object_has_member (ready, "sessionId"));
  /* A real terminal: the shell sees a tty of the asked size, and TERM is overlaid. */
  send_event (
      s, "{\"type\":\"input\",\"data\":\"tty -s && echo IS-A-TTY; stty size; echo T=$TERM\\n\"}");
  read_until (s, acc, "T=xterm-256color");
  ck_assert_ptr_nonnull (strstr (acc->str, "IS-A-TTY"));
  ck_assert_ptr_nonnull (strstr (acc->str, "24 80"));
  send_event (s, "{\"type\":\"resize\",\"cols\":100,\"rows\":30}");
  send_event (s, "{\"type\":\"resize\",\"cols\":0,\"rows\":30}"); /* silently ignored */
  send_event (s, "{\"type\":\"heartbeat\"}");
  send_event (s, "not json at all");
  send_event (s, "{\"type\":\"input\",\"data\":\"stty size; exit 3\\n\"}");
  exit_frame = next_of_type (s, "exit");
  ck_assert_int_eq (member_int (exit_frame, "exitCode"), 3);
  ck_assert (!json_object_has_member (exit_frame, "signal"));
  /* Connection-bound: no terminator, just the end. */
  stream_expect_eof (s, 5000);

  /* Events sent right behind the request, before ready, are applied, not lost. */
  {
    g_autofree char *req = envelope (a, "terminal", "{\"cols\":80,\"rows\":24}");
    const char *ev = "{\"type\":\"input\",\"data\":\"echo EARLY-BIRD; exit 9\\n\"}";
    g_autofree char *both = g_strdup_printf ("%08x\n%s%08x\n%s", (unsigned)strlen (req), req,
                                             (unsigned)strlen (ev), ev);
    g_autoptr (Stream) e = stream_new (agent_connect (a));
    g_autoptr (JsonObject) r = NULL;
    g_autoptr (JsonObject) ex = NULL;
    g_autoptr (GString) early = g_string_new (NULL);

    send_all (e->fd, both, strlen (both));
    r = stream_next_object (e, 10000);
    ck_assert_str_eq (member_str (r, "type"), "ready");
    read_until (e, early, "EARLY-BIRD\r\n");
    ex = next_of_type (e, "exit");
    ck_assert_int_eq (member_int (ex, "exitCode"), 9);
  }

  assert_terminal_refused (a, "{\"rows\":24}", "cols must be an integer in [1, 1000]");
  assert_terminal_refused (a, "{\"cols\":80,\"rows\":1001}",
                           "rows must be an integer in [1, 1000]");
  assert_terminal_refused (a, "{\"cols\":1.5,\"rows\":2}", "cols must be an integer in [1, 1000]");
  assert_terminal_refused (a, "{\"cols\":80,\"rows\":24,\"cwd\":\"../out\"}",
                           "path escapes the workspace");
  {
    g_autoptr (Stream) nb = stream_op (a, "terminal", NULL);
    g_autoptr (JsonObject) f = stream_next_object (nb, 10000);

    ck_assert_str_eq (member_str (f, "error"), "missing_terminal_options");
    stream_expect_eof (nb, 5000);
  }
  agent_stop (a);
}

START_TEST (test_terminal_unix)
{
  check_terminal (FALSE);
}
END_TEST

START_TEST (test_terminal_tcp)
{
  check_terminal (TRUE);
}
END_TEST

/* The kill event's allow-list: SIGSTOP is coerced to SIGTERM; the exit frame's signal is a
 * number. */
START_TEST (test_terminal_kill_coerced)
{
  Agent *a = agent_start (FALSE);
  g_autoptr (Stream) s
      = stream_op (a, "terminal", "{\"cols\":80,\"rows\":24,\"command\":\"sleep\",\"args\":[100]}");
  g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
  g_autoptr (JsonObject) exit_frame = NULL;

  send_event (s, "{\"type\":\"kill\",\"signal\":\"SIGSTOP\"}");
  exit_frame = next_of_type (s, "exit");
  ck_assert_int_eq (member_int (exit_frame, "exitCode"), -1);
  ck_assert_int_eq (member_int (exit_frame, "signal"), SIGTERM);
  stream_expect_eof (s, 5000);
  agent_stop (a);
}
END_TEST

static gboolean
pid_gone (gpointer data)
{
  return kill (GPOINTER_TO_INT (data), 0) != 0 && errno == ESRCH;
}

static int
read_pid_file (const char *path)
{
  g_autofree char *text = NULL;

  for (int i = 0; i < 250; i++)
    {
      if (g_file_get_contents (path, &text, NULL, NULL) && strchr (text, '\n') != NULL)
        return atoi (text);
      g_clear_pointer (&text, g_free);
      g_usleep (20000);
    }
  ck_abort_msg ("no pid file %s", path);
  return -1;
}

/* Teardown of a connection-bound terminal signals every process in its kernel session: a job
 * the shell put in the background (ignoring SIGHUP, even) dies with it. */
START_TEST (test_terminal_background_job_dies)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *pidfile = NULL;
  int bg;

  {
    g_autoptr (Stream) s = stream_op (a, "terminal", "{\"cols\":80,\"rows\":24}");
    g_autoptr (JsonObject) ready = stream_next_object (s, 10000);

    send_event (s, "{\"type\":\"input\",\"data\":\"trap '' HUP; nohup sleep 300 >/dev/null 2>&1 & "
                   "echo $! > bg.pid\\n\"}");
    pidfile = g_build_filename (a->ws, "bg.pid", NULL);
    bg = read_pid_file (pidfile);
    ck_assert_int_gt (bg, 1);
    ck_assert (!pid_gone (GINT_TO_POINTER (bg)));
  } /* the client hangs up here */
  ck_assert_msg (wait_until (pid_gone, GINT_TO_POINTER (bg), 5000), "background job %d survived",
                 bg);
  agent_stop (a);
}
END_TEST

/* A peer that hangs up while its terminal pours output: the send that fails runs inside the
 * pty's own output callback, and the connection's teardown (which frees the terminal and its
 * pty) must wait until that callback has returned. It used to free them under it (a
 * use-after-free, seen as an agent SIGSEGV about one hang-up in fifty). */
START_TEST (test_terminal_hangup_while_output_flows)
{
  Agent *a = agent_start (FALSE);

  for (int i = 0; i < 60; i++)
    {
      g_autoptr (Stream) s = stream_op (a, "terminal",
                                        "{\"cols\":80,\"rows\":24,"
                                        "\"command\":\"yes\"}");
      g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
      g_autoptr (JsonObject) data = next_of_type (s, "data");
      /* Hang up mid-stream, at a slightly different moment each time. */
      if (i % 3 != 0)
        g_usleep ((gulong)(i % 7) * 300);
    }
  assert_healthy (a);
  agent_stop (a);
}
END_TEST

/* Persistent terminal: session fields in ready, output in the ring whether or not attached,
 * replay from an offset, one-shot reads, supersede, kill-session with its default SIGKILL. */
static void
check_persistent (gboolean tcp)
{
  Agent *a = agent_start (tcp);
  g_autoptr (Stream) first = stream_op (
      a, "terminal", "{\"cols\":80,\"rows\":24,\"persistent\":true,\"sessionId\":\"s1\"}");
  g_autoptr (JsonObject) ready = stream_next_object (first, 10000);
  g_autoptr (GString) acc = g_string_new (NULL);
  g_autoptr (JsonObject) list = NULL;
  g_autoptr (JsonObject) killed = NULL;
  gint64 mark;

  ck_assert_str_eq (member_str (ready, "type"), "ready");
  ck_assert_ptr_nonnull (nz_json_get_string (ready, "guestBootId"));
  ck_assert_str_eq (member_str (ready, "sessionId"), "s1");
  ck_assert_str_eq (member_str (ready, "kind"), "terminal");
  ck_assert_str_eq (member_str (ready, "state"), "running");
  ck_assert_int_eq (member_int (ready, "fromOffset"), 0);
  ck_assert_int_eq (member_int (ready, "droppedBytes"), 0);
  ck_assert (json_object_has_member (ready, "nextOffset"));
  send_event (first, "{\"type\":\"input\",\"data\":\"echo MARK-ONE\\n\"}");
  mark = read_until (first, acc, "MARK-ONE\r\n");
  ck_assert_int_gt (mark, 0);
  /* Hanging up only detaches. */
  stream_free (g_steal_pointer (&first));
  g_usleep (200000);
  list = reply (a, "list-sessions", NULL);
  {
    JsonArray *sessions = nz_json_get_array (list, "sessions");
    JsonObject *s1;

    ck_assert (nz_json_get_bool (list, "ok", FALSE));
    ck_assert_uint_eq (json_array_get_length (sessions), 1);
    s1 = json_array_get_object_element (sessions, 0);
    ck_assert_str_eq (member_str (s1, "sessionId"), "s1");
    ck_assert_str_eq (member_str (s1, "kind"), "terminal");
    ck_assert_str_eq (member_str (s1, "command"), "/bin/sh");
    ck_assert_str_eq (member_str (s1, "state"), "running");
    ck_assert (!nz_json_get_bool (s1, "attached", TRUE));
    ck_assert_int_ge (member_int (s1, "nextOffset"), mark);
    ck_assert_int_eq (member_int (s1, "droppedBytes"), 0);
    ck_assert (json_object_has_member (s1, "startedAt"));
    ck_assert (json_object_has_member (s1, "lastInputAt"));
    ck_assert (json_object_has_member (s1, "lastOutputAt"));
    ck_assert (!json_object_has_member (s1, "exitCode"));
    ck_assert (!json_object_has_member (list, "guestBootId"));
  }
  /* One-shot read from 0: the replay, then the terminator. */
  {
    g_autoptr (Stream) once = stream_op (
        a, "attach-session", "{\"sessionId\":\"s1\",\"fromOffset\":0,\"follow\":false}");
    g_autoptr (JsonObject) r = stream_next_object (once, 10000);
    g_autoptr (GString) replay = g_string_new (NULL);

    ck_assert_str_eq (member_str (r, "type"), "ready");
    ck_assert_int_eq (member_int (r, "fromOffset"), 0);
    for (;;)
      {
        g_autofree char *f = stream_next (once, 10000);
        g_autoptr (JsonObject) d = NULL;

        ck_assert_ptr_nonnull (f);
        if (*f == '\0')
          break;
        d = parse (f);
        ck_assert_str_eq (member_str (d, "type"), "data");
        g_string_append (replay, member_str (d, "data"));
      }
    ck_assert_ptr_nonnull (strstr (replay->str, "MARK-ONE"));
    stream_expect_eof (once, 5000);
  }
  {
    g_autofree char *body
        = g_strdup_printf ("{\"sessionId\":\"s1\",\"fromOffset\":%" G_GINT64_FORMAT "}", mark);
    g_autoptr (Stream) second = stream_op (a, "attach-session", body);
    g_autoptr (JsonObject) r2 = stream_next_object (second, 10000);
    g_autoptr (Stream) third = NULL;
    g_autoptr (JsonObject) r3 = NULL;
    g_autoptr (JsonObject) detached = NULL;
    g_autoptr (JsonObject) ex = NULL;
    g_autoptr (GString) acc2 = g_string_new (NULL);

    ck_assert_int_eq (member_int (r2, "fromOffset"), mark);
    send_event (second, "{\"type\":\"input\",\"data\":\"echo MARK-TWO\\n\"}");
    read_until (second, acc2, "MARK-TWO\r\n");
    /* A one-shot read does not displace the attachment. */
    {
      g_autoptr (Stream) peek = stream_op (
          a, "attach-session", "{\"sessionId\":\"s1\",\"fromOffset\":0,\"follow\":false}");
      g_autoptr (JsonObject) pr = stream_next_object (peek, 10000);
    }
    /* A second follower supersedes the first. */
    third = stream_op (a, "attach-session", "{\"sessionId\":\"s1\",\"cols\":90,\"rows\":20}");
    r3 = stream_next_object (third, 10000);
    ck_assert_str_eq (member_str (r3, "type"), "ready");
    detached = next_of_type (second, "detached");
    ck_assert_str_eq (member_str (detached, "reason"), "superseded");
    stream_expect_terminator (second);
    stream_expect_eof (second, 5000);

    killed = reply (a, "kill-session", "{\"sessionId\":\"s1\"}");
    ck_assert (nz_json_get_bool (killed, "ok", FALSE));
    ck_assert_int_ge (member_int (killed, "signalled"), 1);
    ck_assert_str_eq (member_str (killed, "state"), "exited");
    ck_assert_int_eq (member_int (killed, "exitCode"), -1);
    ck_assert_int_eq (member_int (killed, "signal"), SIGKILL);
    ck_assert (!json_object_has_member (killed, "guestBootId"));
    ex = next_of_type (third, "exit");
    ck_assert_int_eq (member_int (ex, "signal"), SIGKILL);
    ck_assert (json_object_has_member (ex, "nextOffset"));
    stream_expect_terminator (third);
    stream_expect_eof (third, 5000);
  }
  /* Exited: kill-session answers the summary, attach replays then reports the exit. */
  {
    g_autoptr (JsonObject) again = reply (a, "kill-session", "{\"sessionId\":\"s1\"}");
    g_autoptr (Stream) late = stream_op (a, "attach-session", "{\"sessionId\":\"s1\"}");
    g_autoptr (JsonObject) r = stream_next_object (late, 10000);
    g_autoptr (JsonObject) ex = NULL;

    ck_assert (nz_json_get_bool (again, "ok", FALSE));
    ck_assert (!json_object_has_member (again, "signalled"));
    ck_assert_str_eq (member_str (r, "state"), "exited");
    ck_assert_int_eq (member_int (r, "signal"), SIGKILL);
    ex = next_of_type (late, "exit");
    stream_expect_terminator (late);
  }
  agent_stop (a);
}

START_TEST (test_persistent_unix)
{
  check_persistent (FALSE);
}
END_TEST

START_TEST (test_persistent_tcp)
{
  check_persistent (TRUE);
}
END_TEST

START_TEST (test_session_refusals)
{
  Agent *a = agent_start_full (FALSE, (const char *const[]){ "NAMZU_AGENT_MAX_SESSIONS=1", NULL });
  g_autoptr (JsonObject) started = NULL;
  g_autoptr (JsonObject) failed = NULL;

  assert_terminal_refused (a,
                           "{\"cols\":80,\"rows\":24,\"persistent\":true,\"sessionId\":\"-bad\"}",
                           "invalid_session_id");
  assert_terminal_refused (a, "{\"cols\":80,\"rows\":24,\"persistent\":true}",
                           "invalid_session_id");
  started = reply (a, "start-detached",
                   "{\"sessionId\":\"only.one_1\",\"command\":\"sleep\",\"args\":[\"30\"]}");
  ck_assert (nz_json_get_bool (started, "ok", FALSE));
  ck_assert_str_eq (member_str (started, "kind"), "detached");
  ck_assert_str_eq (member_str (started, "state"), "running");
  ck_assert_int_gt (member_int (started, "pid"), 1);
  ck_assert_str_eq (json_array_get_string_element (nz_json_get_array (started, "args"), 0), "30");
  ck_assert (!json_object_has_member (started, "guestBootId"));
  assert_terminal_refused (
      a, "{\"cols\":80,\"rows\":24,\"persistent\":true,\"sessionId\":\"only.one_1\"}",
      "session_exists");
  assert_terminal_refused (a, "{\"cols\":80,\"rows\":24,\"persistent\":true,\"sessionId\":\"x\"}",
                           "session_capacity");
  assert_reply_error (a, "start-detached", "{\"sessionId\":\"x\",\"command\":\"true\"}",
                      "session_capacity");
  assert_reply_error (a, "start-detached", "{\"sessionId\":\"only.one_1\",\"command\":\"true\"}",
                      "session_exists");
  assert_reply_error (a, "start-detached", "{\"sessionId\":\"y\"}", "missing_command");
  assert_reply_error (a, "start-detached", "{\"sessionId\":\"y y\",\"command\":\"true\"}",
                      "invalid_session_id");
  assert_reply_error (a, "kill-session", "{\"sessionId\":\"nope\"}", "unknown_session");
  assert_reply_error (a, "kill-session", "{}", "invalid_session_id");
  assert_stream_error (a, "attach-session", "{\"sessionId\":\"nope\"}", "unknown_session");
  assert_stream_error (a, "attach-session", "{\"sessionId\":\"\"}", "invalid_session_id");
  {
    g_autoptr (Stream) s
        = stream_op (a, "attach-session", "{\"sessionId\":\"only.one_1\",\"fromOffset\":5}");
    g_autoptr (JsonObject) f = stream_next_object (s, 10000);

    ck_assert_str_eq (member_str (f, "error"), "invalid_offset");
    ck_assert_int_eq (member_int (f, "nextOffset"), 0);
    stream_expect_terminator (s);
  }
  /* SIGTERM is in the allow-list for kill-session; it answers once the program is gone. */
  {
    g_autoptr (JsonObject) k
        = reply (a, "kill-session", "{\"sessionId\":\"only.one_1\",\"signal\":\"SIGTERM\"}");

    ck_assert_str_eq (member_str (k, "state"), "exited");
    ck_assert_int_eq (member_int (k, "signal"), SIGTERM);
  }
  /* An exited session is evicted to make room. */
  failed = reply (a, "start-detached", "{\"sessionId\":\"z\",\"command\":\"nosuch-program\"}");
  ck_assert (!nz_json_get_bool (failed, "ok", TRUE));
  ck_assert_str_eq (member_str (failed, "error"), "spawn_failed");
  ck_assert_str_eq (member_str (failed, "message"), "spawn nosuch-program ENOENT");
  agent_stop (a);
}
END_TEST

/* Polls the session's ring (one-shot reads, which never displace an attachment) until it holds
 * @needle; FALSE after @tries polls 50 ms apart. */
static gboolean
session_ring_has (Agent *a, const char *id, const char *needle, int tries)
{
  g_autofree char *body
      = g_strdup_printf ("{\"sessionId\":\"%s\",\"fromOffset\":0,\"follow\":false}", id);

  for (int i = 0; i < tries; i++)
    {
      g_autoptr (Stream) s = stream_op (a, "attach-session", body);
      g_autoptr (GString) acc = g_string_new (NULL);
      g_autoptr (JsonObject) r = stream_next_object (s, 10000);

      for (;;)
        {
          g_autofree char *f = stream_next (s, 10000);
          g_autoptr (JsonObject) d = NULL;

          if (f == NULL || *f == '\0')
            break;
          d = parse (f);
          g_string_append (acc, member_str (d, "data"));
        }
      if (strstr (acc->str, needle) != NULL)
        return TRUE;
      g_usleep (50000);
    }
  return FALSE;
}

/* A client that sends its request and its first input and hangs up at once: the input still
 * reaches the persistent terminal (the reply cannot be written, the frames were read). */
START_TEST (test_persistent_input_then_hangup)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *req = envelope (
      a, "terminal", "{\"cols\":80,\"rows\":24,\"persistent\":true,\"sessionId\":\"hup\"}");
  const char *ev = "{\"type\":\"input\",\"data\":\"echo GOT-IT\\n\"}";
  g_autofree char *both = g_strdup_printf ("%08x\n%s%08x\n%s", (unsigned)strlen (req), req,
                                           (unsigned)strlen (ev), ev);
  int fd = agent_connect (a);

  send_all (fd, both, strlen (both));
  close (fd);
  ck_assert (session_ring_has (a, "hup", "GOT-IT\r\n", 100));
  agent_stop (a);
}
END_TEST

/* The same with the input a separate write behind the request, as a host sends it: the agent
 * may read the request alone and see the hang-up while it answers, with the input still
 * unread in the socket. That input must reach the terminal too. The window is narrow (about
 * 3% of tries lost the input before the fix), so the test loops, with a varying pause
 * between request and input to sweep it; the marker is computed by the shell, so the
 * terminal's echo of the input cannot pass for it. */
START_TEST (test_persistent_input_then_hangup_loop)
{
  Agent *a = agent_start (FALSE);

  for (int i = 0; i < 200; i++)
    {
      g_autofree char *id = g_strdup_printf ("hup-%d", i);
      g_autofree char *body = g_strdup_printf (
          "{\"cols\":80,\"rows\":24,\"persistent\":true,\"sessionId\":\"%s\"}", id);
      g_autofree char *ev
          = g_strdup_printf ("{\"type\":\"input\",\"data\":\"echo $((%d+1000))-MARK\\n\"}", i);
      g_autofree char *marker = g_strdup_printf ("%d-MARK\r\n", i + 1000);
      g_autofree char *kill_body
          = g_strdup_printf ("{\"sessionId\":\"%s\",\"signal\":\"SIGKILL\"}", id);
      g_autofree char *req = envelope (a, "terminal", body);
      g_autoptr (JsonObject) killed = NULL;
      int fd = agent_connect (a);

      send_frame (fd, req);
      if (i % 4 != 0)
        g_usleep ((gulong)(i % 4) * 100);
      send_frame (fd, ev);
      close (fd);
      ck_assert_msg (session_ring_has (a, id, marker, 40),
                     "try %d: the input sent right before the hang-up was lost", i);
      /* Exited sessions make room for new ones; the registry never fills up. */
      killed = reply (a, "kill-session", kill_body);
    }
  agent_stop (a);
}
END_TEST

/* start-detached: stdout and stderr both go to the ring, tagged; output is kept whether or not
 * anyone attached; the summary reports the exit. */
START_TEST (test_detached_output)
{
  Agent *a = agent_start (FALSE);
  g_autoptr (JsonObject) started = reply (a, "start-detached",
                                          "{\"sessionId\":\"d1\",\"command\":\"sh\",\"args\":["
                                          "\"-c\",\"echo out; echo err >&2; exit 5\"],"
                                          "\"cwd\":\"sub\"}");
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GString) err = g_string_new (NULL);
  g_autoptr (JsonObject) list = NULL;
  JsonObject *d1;

  ck_assert (nz_json_get_bool (started, "ok", FALSE));
  g_usleep (500000);
  list = reply (a, "list-sessions", NULL);
  d1 = json_array_get_object_element (nz_json_get_array (list, "sessions"), 0);
  ck_assert_str_eq (member_str (d1, "state"), "exited");
  ck_assert_int_eq (member_int (d1, "exitCode"), 5);
  ck_assert (!json_object_has_member (d1, "signal"));
  {
    g_autoptr (Stream) s = stream_op (a, "attach-session", "{\"sessionId\":\"d1\"}");
    g_autoptr (JsonObject) r = stream_next_object (s, 10000);
    g_autoptr (JsonObject) ex = NULL;

    ck_assert_str_eq (member_str (r, "kind"), "detached");
    ck_assert_int_eq (member_int (r, "exitCode"), 5);
    for (;;)
      {
        g_autoptr (JsonObject) f = stream_next_object (s, 10000);

        if (strcmp (member_str (f, "type"), "exit") == 0)
          {
            ex = g_steal_pointer (&f);
            break;
          }
        g_string_append (strcmp (member_str (f, "stream"), "stdout") == 0 ? out : err,
                         member_str (f, "data"));
      }
    ck_assert_int_eq (member_int (ex, "exitCode"), 5);
    stream_expect_terminator (s);
  }
  ck_assert_str_eq (out->str, "out\n");
  ck_assert_str_eq (err->str, "err\n");
  agent_stop (a);
}
END_TEST

/* Heartbeats: the echo is normalised (max(100, floor)), frames arrive every interval, a
 * silent peer is cut after three intervals and its connection-bound terminal dies with it. */
START_TEST (test_heartbeat)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *pidfile = NULL;
  int pid;

  {
    g_autoptr (Stream) s
        = stream_op (a, "terminal", "{\"cols\":80,\"rows\":24,\"heartbeatMs\":\"50\"}");
    g_autoptr (JsonObject) ready = stream_next_object (s, 10000);

    ck_assert (!json_object_has_member (ready, "heartbeatMs"));
  }
  {
    g_autoptr (Stream) s
        = stream_op (a, "terminal", "{\"cols\":80,\"rows\":24,\"heartbeatMs\":50.7}");
    g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
    g_autoptr (JsonObject) hb = NULL;
    gint64 t0;

    ck_assert_int_eq (member_int (ready, "heartbeatMs"), 100);
    send_event (s, "{\"type\":\"input\",\"data\":\"echo $$ > hb.pid\\n\"}");
    pidfile = g_build_filename (a->ws, "hb.pid", NULL);
    pid = read_pid_file (pidfile);
    hb = next_of_type (s, "heartbeat");
    /* Keep quiet from now on: the agent must end the stream within ~3 intervals. */
    t0 = g_get_monotonic_time ();
    for (;;)
      {
        g_autofree char *f = stream_next (s, 5000);

        if (f == NULL)
          break;
      }
    ck_assert_int_lt ((g_get_monotonic_time () - t0) / 1000, 2000);
    ck_assert_msg (wait_until (pid_gone, GINT_TO_POINTER (pid), 5000), "terminal survived");
  }
  /* A peer that keeps talking stays connected. */
  {
    g_autoptr (Stream) s
        = stream_op (a, "terminal", "{\"cols\":80,\"rows\":24,\"heartbeatMs\":100}");
    g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
    g_autoptr (JsonObject) ex = NULL;

    for (int i = 0; i < 10; i++)
      {
        send_event (s, "{\"type\":\"heartbeat\"}");
        g_usleep (100000);
      }
    send_event (s, "{\"type\":\"input\",\"data\":\"exit 0\\n\"}");
    ex = next_of_type (s, "exit");
    ck_assert_int_eq (member_int (ex, "exitCode"), 0);
  }
  agent_stop (a);
}
END_TEST

/* Paused reading does not count as silence (spec C.11): when the terminal's program does not
 * read its input, the agent stops reading the socket and suspends the watchdog, so a peer
 * whose input is stuck behind that pause for many intervals stays connected; bytes count as
 * life again once reading resumes. Here the program sleeps for ~20 intervals while a 1 MiB
 * paste waits; without the suspension the agent would cut the stream after three. */
START_TEST (test_heartbeat_suspended_while_paused)
{
  Agent *a = agent_start (FALSE);
  g_autoptr (Stream) s = stream_op (
      a, "terminal",
      "{\"cols\":80,\"rows\":24,\"heartbeatMs\":100,\"command\":\"sh\",\"args\":[\"-c\","
      "\"stty raw -echo; echo READY; sleep 2; head -c 1048576 >/dev/null; echo DONE\"]}");
  g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
  g_autoptr (GString) acc = g_string_new (NULL);
  g_autofree char *chunk = g_strnfill (65536, 'x');
  g_autofree char *input = g_strdup_printf ("{\"type\":\"input\",\"data\":\"%s\"}", chunk);
  gint64 exit_code = -1;

  ck_assert_int_eq (member_int (ready, "heartbeatMs"), 100);
  read_until (s, acc, "READY");
  /* 16 x 64 KiB: far more than the terminal buffers, so the agent pauses reading us and our
   * sends block until the program reads, two seconds from now. */
  for (int i = 0; i < 16; i++)
    send_event (s, input);
  /* Reading resumed: from here on we must show life ourselves. */
  while (exit_code < 0)
    {
      struct pollfd p = { .fd = s->fd, .events = POLLIN };
      g_autofree char *f = NULL;
      g_autoptr (JsonObject) o = NULL;
      const char *type;

      if (s->buf->len == 0 && poll (&p, 1, 50) == 0)
        {
          send_event (s, "{\"type\":\"heartbeat\"}");
          continue;
        }
      f = stream_next (s, 10000);
      ck_assert_msg (f != NULL, "the stream ended before the program did");
      o = parse (f);
      type = member_str (o, "type");
      if (strcmp (type, "data") == 0)
        g_string_append (acc, member_str (o, "data"));
      else if (strcmp (type, "exit") == 0)
        exit_code = member_int (o, "exitCode");
      else
        ck_assert_str_eq (type, "heartbeat");
    }
  ck_assert_ptr_nonnull (strstr (acc->str, "DONE"));
  ck_assert_int_eq (exit_code, 0);
  agent_stop (a);
}
END_TEST

/* Reads the pty master into @acc until it holds @needle; FALSE after ~@timeout_ms or EOF. */
static gboolean
pty_read_until (int master, GString *acc, const char *needle, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  while (strstr (acc->str, needle) == NULL)
    {
      struct pollfd p = { .fd = master, .events = POLLIN };
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      char buf[4096];
      ssize_t n;

      if (left <= 0 || poll (&p, 1, (int)left) <= 0)
        return FALSE;
      n = read (master, buf, sizeof buf);
      if (n <= 0)
        return FALSE;
      g_string_append_len (acc, buf, n);
    }
  return TRUE;
}

/* namzu-attach --terminal on a real TTY (a pty this test opens): it puts the terminal in raw
 * mode, forwards keys, sends its size at start and again on SIGWINCH (the inner `stty size`
 * sees both), and Ctrl-] detaches, exiting 0 with the terminal restored. The detach key
 * reaching it alone, without a newline, is itself proof of raw mode. */
START_TEST (test_attach_tool_on_a_tty)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *tool = nz_test_tool ("namzu-attach");
  g_autofree char *endpoint = g_strdup_printf ("unix:%s", a->sock_path);
  struct winsize ws = { .ws_row = 24, .ws_col = 80 };
  g_autoptr (GString) acc = g_string_new (NULL);
  struct termios tio;
  gboolean raw = FALSE, resized = FALSE;
  int master = -1, status = 0;
  pid_t pid;

  pid = forkpty (&master, NULL, NULL, &ws);
  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      execl (tool, tool, "--endpoint", endpoint, "--terminal", "--", "/bin/sh", NULL);
      _exit (127);
    }
  /* termios requests on the master act on the slave, the tool's terminal. */
  for (int i = 0; i < 200 && !raw; i++)
    {
      ck_assert_int_eq (tcgetattr (master, &tio), 0);
      raw = !(tio.c_lflag & (ICANON | ECHO | ISIG));
      if (!raw)
        g_usleep (20000);
    }
  ck_assert_msg (raw, "namzu-attach left its terminal in cooked mode");
  ck_assert_int_eq (write (master, "stty size\r", 10), 10);
  ck_assert_msg (pty_read_until (master, acc, "24 80", 10000), "no initial size: %s", acc->str);
  /* Resize the tool's terminal: the kernel sends it SIGWINCH. The shell may read the next
   * line before the resize event lands, so ask until the new size shows. */
  ws = (struct winsize){ .ws_row = 33, .ws_col = 111 };
  ck_assert_int_eq (ioctl (master, TIOCSWINSZ, &ws), 0);
  for (int i = 0; i < 50 && !resized; i++)
    {
      ck_assert_int_eq (write (master, "stty size\r", 10), 10);
      resized = pty_read_until (master, acc, "33 111", 200);
    }
  ck_assert_msg (resized, "the resize did not reach the terminal: %s", acc->str);
  /* Ctrl-] alone: the tool detaches and exits 0, its terminal back in cooked mode. */
  ck_assert_int_eq (write (master, "\x1d", 1), 1);
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d", status);
  ck_assert_int_eq (tcgetattr (master, &tio), 0);
  ck_assert (tio.c_lflag & ICANON);
  close (master);
  agent_stop (a);
}
END_TEST

/* A session attachment whose reader falls behind SESSION_LOG_BYTES is dropped; the program
 * is never paused and its ring keeps everything it can. */
START_TEST (test_session_slow_reader)
{
  Agent *a = agent_start_full (FALSE,
                               (const char *const[]){ "NAMZU_AGENT_SESSION_LOG_BYTES=4096", NULL });
  g_autoptr (JsonObject) started = reply (
      a, "start-detached",
      "{\"sessionId\":\"flood\",\"command\":\"sh\",\"args\":[\"-c\",\"sleep 0.5; yes y | head -c "
      "8000000; sleep 0.5\"]}");
  g_autoptr (Stream) slow = stream_new (agent_connect (a));
  g_autoptr (JsonObject) list = NULL;
  int rcvbuf = 4096;
  gboolean saw_exit = FALSE;

  slow->lenient = TRUE;
  setsockopt (slow->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  send_frame (slow->fd, "{\"op\":\"attach-session\",\"body\":{\"sessionId\":\"flood\"}}");
  g_usleep (3000000);
  for (;;)
    {
      g_autofree char *f = stream_next (slow, 20000);
      g_autoptr (JsonObject) obj = NULL;

      if (f == NULL)
        break;
      if (*f == '\0')
        continue;
      obj = parse (f);
      if (g_strcmp0 (nz_json_get_string (obj, "type"), "exit") == 0)
        saw_exit = TRUE;
    }
  ck_assert (!saw_exit);
  list = reply (a, "list-sessions", NULL);
  {
    JsonObject *s = json_array_get_object_element (nz_json_get_array (list, "sessions"), 0);

    ck_assert_int_eq (member_int (s, "nextOffset"), 8000000);
    ck_assert_int_eq (member_int (s, "droppedBytes"), 8000000 - 4096);
  }
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-sessions");
  TCase *tc = tcase_create ("sessions");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_terminal_unix);
  tcase_add_test (tc, test_terminal_tcp);
  tcase_add_test (tc, test_terminal_kill_coerced);
  tcase_add_test (tc, test_terminal_background_job_dies);
  tcase_add_test (tc, test_terminal_hangup_while_output_flows);
  tcase_add_test (tc, test_persistent_unix);
  tcase_add_test (tc, test_persistent_tcp);
  tcase_add_test (tc, test_session_refusals);
  tcase_add_test (tc, test_detached_output);
  tcase_add_test (tc, test_persistent_input_then_hangup);
  tcase_add_test (tc, test_persistent_input_then_hangup_loop);
  tcase_add_test (tc, test_heartbeat);
  tcase_add_test (tc, test_heartbeat_suspended_while_paused);
  tcase_add_test (tc, test_attach_tool_on_a_tty);
  tcase_add_test (tc, test_session_slow_reader);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
