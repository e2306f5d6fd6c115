/* Every host tool that reads an agent's or a worker's reply, driven against a hostile agent
 * (tests/fakes/hostile-agent.c) that answers one op with a hostile shape: wrong types,
 * nulls, missing members, not an object, bad JSON, a garbage or huge frame header, a
 * truncated frame, silence, endless frames, deep nesting, frames of the wrong kind, ids of
 * another execution. The tool must end on its own, within the bound, with its documented
 * code and a "namzu-<tool>: ..." line, never by a signal, and within bounded memory. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <time.h>

#include "../nz-test.h"

typedef struct
{
  const char *tool;   /* built tool name */
  const char *args;   /* space-separated, after --endpoint E; "%L" is a local temp path */
  const char *op;     /* the op the agent answers with @shape */
  const char *shape;
  int fail_code;      /* the tool's failure exit code */
  gboolean may_pass;  /* the shape is harmless for this op: exit 0 is fine too */
  gboolean http;      /* worker-shaped: http://127.0.0.1:PORT */
} Case;

/* Failure codes: namzu-exec and namzu-attach 125 (namzu itself failed), the data tools 1. */
#define EXEC 125
#define DATA 1

#define EXEC_ROW(tool, args, shape, pass) { tool, args, "execute", shape, EXEC, pass, FALSE }

#define ROWS(tool, args, op, code, http)                                                     \
  ALL_SHAPES_FOR (tool, args, op, code, http)
#define ROW1(tool, args, op, code, http, shape, pass) { tool, args, op, shape, code, pass, http },
#define ALL_SHAPES_FOR(tool, args, op, code, http)                                          \
  ROW1 (tool, args, op, code, http, "wrong-types", TRUE)                                     \
  ROW1 (tool, args, op, code, http, "wrong-types-refusal", FALSE)                            \
  ROW1 (tool, args, op, code, http, "nulls", FALSE)                                          \
  ROW1 (tool, args, op, code, http, "ok-nulls", TRUE)                                        \
  ROW1 (tool, args, op, code, http, "missing", TRUE)                                         \
  ROW1 (tool, args, op, code, http, "error-bare", FALSE)                                     \
  ROW1 (tool, args, op, code, http, "not-object", FALSE)                                     \
  ROW1 (tool, args, op, code, http, "bad-json", FALSE)                                       \
  ROW1 (tool, args, op, code, http, "garbage-header", FALSE)                                 \
  ROW1 (tool, args, op, code, http, "huge-announce", FALSE)                                  \
  ROW1 (tool, args, op, code, http, "truncated", FALSE)                                      \
  ROW1 (tool, args, op, code, http, "truncated-header", FALSE)                               \
  ROW1 (tool, args, op, code, http, "endless-partial", FALSE)                                \
  ROW1 (tool, args, op, code, http, "deep", FALSE)                                           \
  ROW1 (tool, args, op, code, http, "wrong-kind", TRUE)                                      \
  ROW1 (tool, args, op, code, http, "wrong-id", TRUE)                                        \
  ROW1 (tool, args, op, code, http, "after-terminator", TRUE)

static const Case cases[] = {
  /* namzu-exec: the static front over lib/lite, raw and --json, and the full one. */
  ROWS ("namzu-exec", "-- true", "execute", EXEC, FALSE)
  ROWS ("namzu-exec", "--json -- true", "execute", EXEC, FALSE)
  ROWS ("namzu-exec", "-- true", "reserve-execution", EXEC, FALSE)
  ROWS ("namzu-exec-full", "-- true", "execute", EXEC, FALSE)
  ROWS ("namzu-exec-full", "--json -- true", "execute", EXEC, FALSE)
  ROWS ("namzu-exec-full", "--json -- true", "reserve-execution", EXEC, FALSE)
  ROWS ("namzu-exec", "--json -- true", "execute", EXEC, TRUE)
  ROWS ("namzu-exec-full", "--json -- true", "execute", EXEC, TRUE)
  /* namzu-attach: executions, sessions, terminals, list and kill. */
  ROWS ("namzu-attach", "--execution exec_1", "attach-execution", EXEC, FALSE)
  ROWS ("namzu-attach", "--session s1", "attach-session", EXEC, FALSE)
  ROWS ("namzu-attach", "--terminal", "terminal", EXEC, FALSE)
  ROWS ("namzu-attach", "--list", "list-sessions", DATA, FALSE)
  ROWS ("namzu-attach", "--kill s1", "kill-session", DATA, FALSE)
  ROWS ("namzu-attach", "--start-detached s1 -- true", "start-detached", DATA, FALSE)
  ROWS ("namzu-attach", "--execution exec_1", "attach-execution", EXEC, TRUE)
  /* namzu-quiesce, with and without --flush. */
  ROWS ("namzu-quiesce", "", "quiesce", DATA, FALSE)
  ROWS ("namzu-quiesce", "--flush", "flush", DATA, FALSE)
  ROWS ("namzu-quiesce", "", "quiesce", DATA, TRUE)
  /* namzu-cp, out and in. */
  ROWS ("namzu-cp", ":/w/f %L", "read-file-stream", DATA, FALSE)
  ROWS ("namzu-cp", "%L :/w/f", "write-file", DATA, FALSE)
  ROWS ("namzu-cp", ":/w/f %L", "read-file-stream", DATA, TRUE)
  /* The worker's own HTTP answers. */
  { "namzu-exec", "-- true", "http-head", "silent", EXEC, FALSE, TRUE },
  { "namzu-exec", "-- true", "http-head", "endless", EXEC, FALSE, TRUE },
  { "namzu-exec", "-- true", "http-head", "garbage-header", EXEC, FALSE, TRUE },
  { "namzu-exec", "-- true", "http-head", "huge-announce", EXEC, FALSE, TRUE },
  { "namzu-exec", "-- true", "http-head", "other", EXEC, FALSE, TRUE },
  { "namzu-exec-full", "-- true", "http-head", "endless", EXEC, FALSE, TRUE },
  { "namzu-exec-full", "-- true", "http-head", "garbage-header", EXEC, FALSE, TRUE },
  { "namzu-exec-full", "-- true", "http-head", "huge-announce", EXEC, FALSE, TRUE },
  { "namzu-exec-full", "-- true", "http-head", "other", EXEC, FALSE, TRUE },
  { "namzu-quiesce", "", "http-head", "endless", DATA, FALSE, TRUE },
  { "namzu-quiesce", "", "http-head", "deep", DATA, FALSE, TRUE },
  { "namzu-quiesce", "", "http-head", "other", DATA, FALSE, TRUE },
  /* Silence and endless frames end on the existing bounds: an exec's observation window
   * (its timeout + 10 s), a control reply's multiple-frame rule. */
  EXEC_ROW ("namzu-exec", "--timeout 1s -- true", "silent", FALSE),
  EXEC_ROW ("namzu-exec-full", "--timeout 1s -- true", "silent", FALSE),
  EXEC_ROW ("namzu-exec", "--timeout 1s -- true", "endless", FALSE),
  EXEC_ROW ("namzu-exec-full", "--json --timeout 1s -- true", "endless", FALSE),
  { "namzu-quiesce", "", "quiesce", "endless", DATA, FALSE, FALSE },
  { "namzu-attach", "--list", "list-sessions", "endless", DATA, FALSE, FALSE },
  /* An attached execution that never ends ends on the longest it may still run (--timeout,
   * default the agent's 30 min ceiling) + 10 s: a silent agent hung namzu-attach for ever. */
  { "namzu-attach", "--execution exec_1 --timeout 1s", "attach-execution", "silent", EXEC, FALSE,
    FALSE },
  { "namzu-attach", "--execution exec_1 --timeout 1s", "attach-execution", "endless", EXEC, FALSE,
    FALSE },
  /* A session or a terminal may be quiet for ever: the heartbeat (spec D.2.11) tells that from
   * a peer that went silent after ready, and the 60 s read-idle bound applies before it. */
  { "namzu-attach", "--session s1", "attach-session", "silent", EXEC, FALSE, FALSE },
  { "namzu-attach", "--session s1", "attach-session", "ready-silent", EXEC, FALSE, FALSE },
  { "namzu-attach", "--terminal", "terminal", "ready-silent", EXEC, FALSE, FALSE },
  /* A download that goes silent ends on the host's 60 s read-idle bound. */
  { "namzu-cp", ":/w/f %L", "read-file-stream", "silent", DATA, FALSE, FALSE },
};

/* How long one tool may take: the read-idle bound is 60 s, the exec observation 1 s + 10 s. */
#define TOOL_BOUND_S 75
/* Bounded memory: the tools may hold one frame at the 256 MiB limit, not more. */
#define TOOL_MEMORY_BYTES (1ull << 30)

static char *tmpdir;

static void
setup (void)
{
  tmpdir = g_dir_make_tmp ("nz-hostile-XXXXXX", NULL);
  ck_assert (tmpdir != NULL);
}

static void
teardown (void)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmpdir);

  ck_assert (system (cmd) == 0);
  g_free (tmpdir);
}

static void
limit_memory (gpointer user_data)
{
  /* Sanitizers reserve terabytes of shadow: the bound only holds in the plain build. */
  struct rlimit rl = { TOOL_MEMORY_BYTES, TOOL_MEMORY_BYTES };

  if (user_data != NULL)
    setrlimit (RLIMIT_AS, &rl);
}

/* Starts the hostile agent and returns its endpoint (from its ready line). */
static char *
start_agent (const Case *c, GPid *pid)
{
  g_autofree char *agent = g_build_filename (g_getenv ("NZ_BUILD_DIR"), "tests",
                                             "hostile-agent", NULL);
  g_autofree char *sock = g_strdup_printf ("unix:%s/agent.sock", tmpdir);
  char *argv[] = { agent, c->http ? (char *)"http" : sock, (char *)c->shape, (char *)c->op,
                   NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) line = g_string_new (NULL);
  int out = -1;
  char ch;

  ck_assert_msg (g_spawn_async_with_pipes (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                           NULL, pid, NULL, &out, NULL, &error),
                 "spawn %s: %s", agent, error != NULL ? error->message : "");
  while (read (out, &ch, 1) == 1 && ch != '\n')
    g_string_append_c (line, ch);
  close (out);
  ck_assert_msg (g_str_has_prefix (line->str, "listening on "), "agent said \"%s\"",
                 line->str);
  return g_strdup (line->str + strlen ("listening on "));
}

static void
stop (GPid pid)
{
  /* The agent's connection children leave when the client hangs up. */
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
}

/* Runs @c's tool to its end; FALSE when it outlived the bound (then it is killed). */
static gboolean
run_tool (const Case *c, const char *endpoint, int *status, GString *err)
{
  g_autofree char *tool = nz_test_tool (c->tool);
  g_autofree char *local = g_build_filename (tmpdir, "local", NULL);
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) words = g_strsplit (c->args, " ", -1);
  g_autoptr (GError) error = NULL;
  const char *sanitize = g_getenv ("NZ_SANITIZE");
  gboolean plain = sanitize == NULL || *sanitize == '\0' || g_str_equal (sanitize, "none");
  gint64 deadline = g_get_monotonic_time () + TOOL_BOUND_S * G_USEC_PER_SEC;
  int out_fd = -1, err_fd = -1;
  gboolean out_open = TRUE, err_open = TRUE, ended = FALSE;
  GPid pid;

  ck_assert (g_file_set_contents (local, "local bytes\n", -1, NULL));
  g_ptr_array_add (argv, g_strdup (tool));
  g_ptr_array_add (argv, g_strdup_printf ("--endpoint=%s", endpoint));
  for (guint i = 0; words[i] != NULL; i++)
    if (*words[i] != '\0')
      g_ptr_array_add (argv, g_str_equal (words[i], "%L") ? g_strdup (local)
                                                          : g_strdup (words[i]));
  g_ptr_array_add (argv, NULL);
  ck_assert_msg (g_spawn_async_with_pipes (NULL, (char **)argv->pdata, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD,
                                           limit_memory, plain ? (gpointer)1 : NULL, &pid, NULL,
                                           &out_fd, &err_fd, &error),
                 "spawn %s: %s", tool, error != NULL ? error->message : "");
  /* stdout is drained and dropped: an endless stream must not stall the tool on a pipe. */
  while (out_open || err_open)
    {
      struct pollfd fds[2] = { { out_open ? out_fd : -1, POLLIN, 0 },
                               { err_open ? err_fd : -1, POLLIN, 0 } };
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      char buf[65536];

      if (left <= 0)
        break;
      if (poll (fds, 2, (int)left) < 0 && errno != EINTR)
        break;
      for (int i = 0; i < 2; i++)
        if (fds[i].revents != 0)
          {
            ssize_t n = read (fds[i].fd, buf, sizeof buf);

            if (n <= 0)
              *(i == 0 ? &out_open : &err_open) = FALSE;
            else if (i == 1 && err->len < 65536)
              g_string_append_len (err, buf, n);
          }
    }
  for (;;)
    {
      pid_t r = waitpid (pid, status, WNOHANG);

      if (r == pid)
        {
          ended = TRUE;
          break;
        }
      if (g_get_monotonic_time () >= deadline)
        break;
      g_usleep (10 * 1000);
    }
  if (!ended)
    {
      kill (pid, SIGKILL);
      waitpid (pid, status, 0);
    }
  close (out_fd);
  close (err_fd);
  return ended;
}

START_TEST (test_hostile)
{
  const Case *c = &cases[_i];
  g_autoptr (GString) err = g_string_new (NULL);
  g_autofree char *prefix = g_strdup_printf ("%s: ", g_str_equal (c->tool, "namzu-exec-full")
                                                         ? "namzu-exec"
                                                         : c->tool);
  g_autofree char *endpoint = NULL;
  GPid agent = 0;
  int status = 0;
  gboolean ended;

  /* stdin is /dev/null: a terminal sends its EOF key and waits for the end. */
  endpoint = start_agent (c, &agent);
  ended = run_tool (c, endpoint, &status, err);
  stop (agent);
  ck_assert_msg (ended, "%s %s against %s/%s: still running after %ds (a hang). stderr: %s",
                 c->tool, c->args, c->op, c->shape, TOOL_BOUND_S, err->str);
  ck_assert_msg (WIFEXITED (status),
                 "%s %s against %s/%s: killed by signal %d. stderr: %s", c->tool, c->args,
                 c->op, c->shape, WIFSIGNALED (status) ? WTERMSIG (status) : -1, err->str);
  if (c->may_pass && WEXITSTATUS (status) == 0)
    return;
  ck_assert_msg (WEXITSTATUS (status) == c->fail_code,
                 "%s %s against %s/%s: exit %d, want %d. stderr: %s", c->tool, c->args, c->op,
                 c->shape, WEXITSTATUS (status), c->fail_code, err->str);
  ck_assert_msg (strstr (err->str, prefix) != NULL && strstr (err->str, "(null)") == NULL,
                 "%s %s against %s/%s: stderr wants a \"%s...\" line with no (null): %s",
                 c->tool, c->args, c->op, c->shape, prefix, err->str);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("hostile-replies");
  TCase *tc = tcase_create ("tools");
  g_autofree char *agent = g_build_filename (g_getenv ("NZ_BUILD_DIR"), "tests",
                                             "hostile-agent", NULL);

  NZ_TEST_REQUIRE (g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE), "no %s", agent);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, TOOL_BOUND_S + 30);
  /* Mostly waiting on bounds: meson runs the table as NZ_HOSTILE_SHARDS shards side by side
   * (tests/meson.build), shard NZ_HOSTILE_SHARD taking every case i with i % shards == shard. */
  {
    const char *shard_env = g_getenv ("NZ_HOSTILE_SHARD");
    const char *shards_env = g_getenv ("NZ_HOSTILE_SHARDS");
    guint shards = shards_env != NULL ? (guint)atoi (shards_env) : 1;
    guint shard = shard_env != NULL ? (guint)atoi (shard_env) : 0;

    NZ_TEST_REQUIRE (shards >= 1 && shard < shards, "bad NZ_HOSTILE_SHARD %u of %u", shard, shards);
    const char *sanitize = g_getenv ("NZ_SANITIZE");
    /* A sanitized tool starts ~4x slower: that build runs half the table (every other case,
     * interleaved over tools and shapes) to keep CI's time; the plain build runs all of it. */
    guint step = shards * (sanitize != NULL && *sanitize != '\0' && strcmp (sanitize, "none") != 0
                           ? 2 : 1);

    for (guint i = shard; i < G_N_ELEMENTS (cases); i += step)
      tcase_add_loop_test (tc, test_hostile, (int)i, (int)i + 1);
  }
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
