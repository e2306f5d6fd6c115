/* bench-attach: the time to replay a full 1 MiB retained-output ring with attach-execution
 * (spec A.6.5), from the client's request to the attach_result. Prints numbers; never a
 * pass/fail (see bench/README.md). namzu-agent runs directly on a unix socket in a temporary
 * directory: the ring and the replay are the agent's, no sandbox is involved. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "nz-agent-client.h"
#include "nz-json.h"
#include "nz-token.h"

#define RING_BYTES (1024 * 1024)

static int opt_iterations = 50;
static char *opt_tools_dir;

static const GOptionEntry entries[]
    = { { "iterations", 'n', 0, G_OPTION_ARG_INT, &opt_iterations, "Replays to time (default 50)",
          "N" },
        { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
          "Directory with the built namzu-* tools (default: ../tools beside this program)", "DIR" },
        { NULL } };

static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

typedef struct
{
  gsize bytes;
  gboolean done;
} Replay;

static gboolean
count_frame (JsonObject *frame, gpointer user_data, GError **error)
{
  Replay *r = user_data;
  const char *type = nz_json_get_string (frame, "type");

  if (g_strcmp0 (type, "stdout_delta") == 0 || g_strcmp0 (type, "stderr_delta") == 0)
    r->bytes += strlen (nz_json_get_string (frame, "data"));
  else if (g_strcmp0 (type, "attach_result") == 0)
    r->done = TRUE;
  return TRUE;
}

static int
cmp_i64 (const void *a, const void *b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;

  return x < y ? -1 : x > y;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL, *ws = NULL, *sock = NULL, *endpoint = NULL, *agent = NULL;
  g_autofree char *uuid = nz_uuid_v4 ();
  g_autofree char *id = g_strconcat ("exec_", uuid, NULL);
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (JsonObject) rbody = json_object_new ();
  g_autoptr (JsonObject) reply = NULL;
  g_autoptr (JsonObject) ebody = json_object_new ();
  g_autoptr (JsonObject) result = NULL;
  g_autoptr (GArray) samples = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_auto (GStrv) env = g_get_environ ();
  JsonArray *args = json_array_new ();
  GPid pid = 0;
  gint64 median;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, "Time an attach-execution replay of a full 1 MiB ring.");
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "bench-attach: %s\n", error->message);
      return 2;
    }
  if (opt_tools_dir == NULL)
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *bench_dir = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (bench_dir, "..", "tools", NULL);
    }
  dir = g_dir_make_tmp ("nz-bench-attach-XXXXXX", &error);
  ws = g_build_filename (dir, "ws", NULL);
  sock = g_build_filename (dir, "agent.sock", NULL);
  agent = g_build_filename (opt_tools_dir, "namzu-agent", NULL);
  g_mkdir (ws, 0700);
  env = g_environ_setenv (env, "NAMZU_AGENT_UNIX_PATH", sock, TRUE);
  env = g_environ_setenv (env, "NAMZU_SANDBOX_WORKSPACE", ws, TRUE);
  env = g_environ_setenv (env, "NAMZU_AGENT_EXECUTION_LOG_BYTES", "1048576", TRUE);
  {
    const char *agent_argv[] = { agent, NULL };

    if (!g_spawn_async (NULL, (char **)agent_argv, env,
                        G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_DO_NOT_REAP_CHILD, die_with_parent,
                        NULL, &pid, &error))
      {
        fprintf (stderr, "bench-attach: %s\n", error->message);
        return 1;
      }
  }
  endpoint = g_strdup_printf ("unix:%s", sock);
  client = nz_agent_client_new (endpoint, NULL);
  if (!nz_agent_client_wait_ready (client, 5000, &error))
    {
      fprintf (stderr, "bench-attach: %s\n", error->message);
      kill (pid, SIGKILL);
      return 1;
    }
  /* Fill the ring exactly: 1 MiB of output from one retained execution. */
  json_object_set_string_member (rbody, "executionId", id);
  reply = nz_agent_client_call (client, "reserve-execution", rbody, NULL, &error);
  json_object_set_string_member (ebody, "command", "sh");
  json_array_add_string_element (args, "-c");
  json_array_add_string_element (args, "yes 0123456789abcdef | head -c 1048576");
  json_object_set_array_member (ebody, "args", args);
  json_object_set_string_member (ebody, "executionId", id);
  json_object_set_boolean_member (ebody, "retainOutput", TRUE);
  result = reply != NULL ? nz_agent_client_execute (client, ebody, NULL, NULL, NULL, &error) : NULL;
  if (result == NULL)
    {
      fprintf (stderr, "bench-attach: %s\n", error->message);
      kill (pid, SIGKILL);
      return 1;
    }
  for (int i = 0; i <= opt_iterations; i++)
    {
      g_autoptr (JsonObject) body = json_object_new ();
      Replay r = { 0 };
      gint64 t0 = g_get_monotonic_time (), dt;

      json_object_set_string_member (body, "executionId", id);
      json_object_set_int_member (body, "fromOffset", 0);
      if (!nz_agent_client_stream (client, "attach-execution", body, 0, count_frame, &r, NULL,
                                   &error)
          || !r.done || r.bytes != RING_BYTES)
        {
          fprintf (stderr, "bench-attach: replay %d: %s (%" G_GSIZE_FORMAT " bytes)\n", i,
                   error ? error->message : "incomplete", r.bytes);
          kill (pid, SIGKILL);
          return 1;
        }
      dt = g_get_monotonic_time () - t0;
      if (i > 0) /* the first is a warm-up */
        g_array_append_val (samples, dt);
    }
  g_array_sort (samples, cmp_i64);
  median = g_array_index (samples, gint64, samples->len / 2);
  printf ("measured: namzu-agent on %s, ring NAMZU_AGENT_EXECUTION_LOG_BYTES=1048576 (full)\n",
          endpoint);
  printf ("iterations: %d (median, after one warm-up)\n", opt_iterations);
  printf ("attach-execution replay of 1 MiB, fromOffset 0:  %8.2f ms\n", median / 1000.0);
  printf ("fastest / slowest:                             %8.2f / %.2f ms\n",
          g_array_index (samples, gint64, 0) / 1000.0,
          g_array_index (samples, gint64, samples->len - 1) / 1000.0);
  printf ("replay throughput (median):                    %8.1f MiB/s\n",
          median > 0 ? 1e6 / (double)median : 0.0);
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  {
    g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", dir);

    if (system (cmd) != 0)
      fprintf (stderr, "bench-attach: could not remove %s\n", dir);
  }
  return 0;
}
