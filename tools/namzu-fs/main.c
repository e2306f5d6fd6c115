/* namzu-fs: the sandbox's files beyond one-file copies: ls, walk, stat, rm, mv. Uses the
 * agent's `file-ops` ops where advertised, otherwise find/rm/mv through execute
 * (nz-agent-fs.h), so it works on every backend and on a reference agent. */
#include <stdio.h>
#include <string.h>

#include "nz-agent-fs.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-tools.h"

static char *opt_sandbox, *opt_endpoint, *opt_pattern;
static gboolean opt_all, opt_recursive;
static gint opt_depth;
static gint64 opt_max_entries, opt_max_visited;
static char **opt_args;

static const GOptionEntry entries[] = {
  { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox to act on (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
  { "endpoint", 0, 0, G_OPTION_ARG_STRING, &opt_endpoint,
    "For testing and direct agent use: talk to the agent at unix:/PATH, tcp:HOST:PORT or a "
    "namzu-worker's http://HOST:PORT; the token comes from $NAMZU_TOKEN",
    "ENDPOINT" },
  { "all", 'a', 0, G_OPTION_ARG_NONE, &opt_all,
    "ls, walk: include names starting with '.' (and descend such directories)", NULL },
  { "depth", 'd', 0, G_OPTION_ARG_INT, &opt_depth,
    "ls, walk: how deep to descend, direct children being depth 1 (ls: 1, walk: 128; max 128)",
    "N" },
  { "max-entries", 'n', 0, G_OPTION_ARG_INT64, &opt_max_entries,
    "ls, walk: report at most N entries, then \"truncated\":true (default 1000, max 100000)", "N" },
  { "max-visited", 0, 0, G_OPTION_ARG_INT64, &opt_max_visited,
    "ls, walk: fail with ERR_FILE_WALK_LIMIT after examining more than N entries (default "
    "20000)",
    "N" },
  { "pattern", 'p', 0, G_OPTION_ARG_STRING, &opt_pattern,
    "ls, walk: only entries whose name matches the shell wildcard GLOB", "GLOB" },
  { "recursive", 'r', 0, G_OPTION_ARG_NONE, &opt_recursive,
    "rm: remove a directory and everything below it", NULL },
  { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_args, NULL, NULL },
  { NULL }
};

static const char description[]
    = "Commands (PATH is relative to the sandbox workspace, or absolute):\n"
      "  ls [PATH]      the entries of a directory (default: the workspace), one level\n"
      "  walk [PATH]    the regular files below PATH, recursively\n"
      "  stat PATH      one entry, the entry itself (a symlink is not followed)\n"
      "  rm [-r] PATH   remove a file, a symlink itself, or (-r) a directory tree\n"
      "  mv FROM TO     rename inside the sandbox (TO is the new name)\n"
      "No symlink is ever followed below PATH. Prints one JSON object: ls/walk\n"
      "{\"root\",\"entries\":[{\"path\",\"type\",\"size\",\"mode\",\"mtimeMs\",\"target\"?}],\n"
      "\"truncated\",\"via\"}; stat the entry; rm {\"path\",\"removed\"}; mv {\"from\",\"to\"}.\n"
      "Exit status: 0 done, 1 failure (error object on stdout; a spent --max-visited budget\n"
      "has code ERR_FILE_WALK_LIMIT), 2 bad usage.";

static const char *
fs_code_name (const GError *error)
{
  return NZ_AGENT_FS_WALK_LIMIT_CODE;
}

static gboolean
want_args (guint have, const char *cmd, GError **error)
{
  static const struct
  {
    const char *cmd;
    guint min, max;
    const char *words;
  } shapes[] = { { "ls", 0, 1, "at most one PATH" },
                 { "walk", 0, 1, "at most one PATH" },
                 { "stat", 1, 1, "one PATH" },
                 { "rm", 1, 1, "one PATH" },
                 { "mv", 2, 2, "FROM and TO" } };

  for (guint i = 0; i < G_N_ELEMENTS (shapes); i++)
    if (g_str_equal (cmd, shapes[i].cmd) && (have < shapes[i].min || have > shapes[i].max))
      return nz_cli_usage (error, "%s wants %s", cmd, shapes[i].words);
  return TRUE;
}

gboolean
nz_tool_fs (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("COMMAND [ARGS] - files in a sandbox");
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (JsonObject) out = NULL;
  const char *cmd;
  guint n;
  gboolean walk_cmd;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  nz_cli_set_code_names (NZ_AGENT_FS_ERROR, fs_code_name);
  if (opt_args == NULL || opt_args[0] == NULL)
    return nz_cli_usage (error, "a command is required: ls, walk, stat, rm or mv");
  cmd = opt_args[0];
  n = g_strv_length (opt_args) - 1;
  walk_cmd = g_str_equal (cmd, "ls") || g_str_equal (cmd, "walk");
  if (!walk_cmd && !g_str_equal (cmd, "stat") && !g_str_equal (cmd, "rm")
      && !g_str_equal (cmd, "mv"))
    return nz_cli_usage (error, "unknown command '%s'", cmd);
  if (!walk_cmd
      && (opt_all || opt_depth != 0 || opt_max_entries != 0 || opt_max_visited != 0
          || opt_pattern != NULL))
    return nz_cli_usage (error, "--all, --depth, --max-entries, --max-visited and --pattern "
                                "are for ls and walk");
  if (opt_recursive && !g_str_equal (cmd, "rm"))
    return nz_cli_usage (error, "--recursive is for rm");
  if (opt_depth < 0 || opt_depth > 128 || opt_max_entries < 0 || opt_max_entries > 100000
      || opt_max_visited < 0)
    return nz_cli_usage (error, "--depth wants 1..128, --max-entries 1..100000, --max-visited "
                                "a positive count");
  if (!want_args (n, cmd, error))
    return FALSE;
  for (guint i = 1; i <= n; i++)
    if (!nz_cli_check_utf8 (opt_args[i], error, "the sandbox path"))
      return FALSE;

  client = nz_sandbox_open_client (opt_endpoint, opt_sandbox, TRUE, &handle, error);
  if (client == NULL)
    return FALSE;
  if (walk_cmd)
    {
      NzAgentFsWalkOptions o = { .root = n > 0 ? opt_args[1] : ".",
                                 .max_entries = opt_max_entries,
                                 .max_depth = opt_depth,
                                 .max_visited = opt_max_visited,
                                 .include_hidden = opt_all,
                                 .pattern = opt_pattern };

      out = nz_agent_fs_walk (client, g_str_equal (cmd, "walk"), &o, cancellable, error);
    }
  else if (g_str_equal (cmd, "stat"))
    out = nz_agent_fs_stat (client, opt_args[1], cancellable, error);
  else if (g_str_equal (cmd, "rm"))
    {
      gboolean removed = FALSE;

      if (!nz_agent_fs_remove (client, opt_args[1], opt_recursive, &removed, cancellable, error))
        return FALSE;
      out = json_object_new ();
      json_object_set_string_member (out, "path", opt_args[1]);
      json_object_set_boolean_member (out, "removed", removed);
    }
  else
    {
      if (!nz_agent_fs_move (client, opt_args[1], opt_args[2], cancellable, error))
        return FALSE;
      out = json_object_new ();
      json_object_set_string_member (out, "from", opt_args[1]);
      json_object_set_string_member (out, "to", opt_args[2]);
    }
  if (out == NULL)
    return FALSE;
  if (!nz_cli_print_object (out))
    return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
  return TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-fs", nz_tool_fs, argc, argv);
}
