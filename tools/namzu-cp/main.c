/* namzu-cp: copy a file (or, with -r, a directory: tree.c) into or out of a sandbox. Uploads
 * go through the write-file parts protocol (atomic: the target appears whole or not at all),
 * downloads through read-file-stream (checked against the announced length). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-agent-files.h"
#include "nz-autofd.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-heap.h"
#include "nz-json.h"
#include "nz-progress.h"
#include "nz-state.h"
#include "nz-tools.h"
#include "tree.h"

static char *opt_sandbox, *opt_endpoint;
/* G_MININT: not given (0 would be a part size, and is refused). */
static gint opt_part_kib = G_MININT;
static gboolean opt_recursive;
static char **opt_args;

static const GOptionEntry entries[] = {
  { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox for :PATH operands (default: $NAMZU_SANDBOX, else the JSON handle on stdin "
    "when stdin is not a data operand)",
    "ID" },
  { "recursive", 'r', 0, G_OPTION_ARG_NONE, &opt_recursive,
    "Copy a directory and everything below it; symlinks are copied as symlinks and never "
    "followed, permission bits are kept",
    NULL },
  { "part-kib", 0, 0, G_OPTION_ARG_INT, &opt_part_kib, "Upload part size in KiB (default 256)",
    "KIB" },
  { "endpoint", 0, 0, G_OPTION_ARG_STRING, &opt_endpoint,
    "For testing and direct agent use: talk to the agent at unix:/PATH, tcp:HOST:PORT or "
    "a namzu-worker's http://HOST:PORT instead of a sandbox; the token comes from $NAMZU_TOKEN",
    "ENDPOINT" },
  /* Bytes, not the locale's charset (the C locale refuses non-ASCII): a local path is any
   * bytes; the sandbox path is checked as UTF-8. */
  { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_args, NULL, NULL },
  { NULL }
};

static const char description[]
    = "A sandbox path is written :PATH (the sandbox from --sandbox or $NAMZU_SANDBOX) or\n"
      "ID:PATH; PATH is relative to the sandbox workspace or absolute. Exactly one of SRC and\n"
      "DST is a sandbox path; the other is a local file, or - for stdin/stdout:\n"
      "  namzu-cp build.tar :in/build.tar        tar c . | namzu-cp - :src.tar\n"
      "  namzu-cp :out/report.json .             namzu-cp :log.txt - | less\n"
      "Prints {\"sandbox\",\"source\",\"destination\",\"direction\",\"bytes\"} on stdout, unless\n"
      "the data itself goes to stdout. Progress (bytes, rate, time left) goes to stderr when\n"
      "it is a terminal ($NAMZU_PROGRESS=0: never).\n"
      "With -r, SRC may be a directory: it lands in DST/<name> when DST is a directory\n"
      "(or ends in /), else at DST, like cp -r; the result adds files, directories,\n"
      "symlinks and skipped (FIFOs, sockets and devices are skipped). Nothing from the\n"
      "sandbox is written outside DST, whatever its agent replies:\n"
      "  namzu-cp -r ./src :project/            namzu-cp -r :out ./results\n"
      "Exit status: 0 copied, 1 failure (nothing is left half-written in the sandbox), 2 bad "
      "usage.";

typedef struct
{
  char *sandbox; /* ID from ID:PATH, or NULL */
  char *path;    /* sandbox path, or local path / "-" */
  gboolean remote;
} Operand;

static void
operand_clear (Operand *op)
{
  g_clear_pointer (&op->sandbox, g_free);
  g_clear_pointer (&op->path, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Operand, operand_clear)

static void
operand_parse (const char *arg, Operand *op)
{
  const char *colon = strchr (arg, ':');

  memset (op, 0, sizeof *op);
  /* ":PATH", or "ID:PATH" with a well-formed sandbox id; anything else is local. */
  if (colon == arg)
    {
      op->remote = TRUE;
      op->path = g_strdup (colon + 1);
      return;
    }
  if (colon != NULL)
    {
      g_autofree char *id = g_strndup (arg, colon - arg);

      if (nz_state_id_is_valid (id))
        {
          op->remote = TRUE;
          op->sandbox = g_steal_pointer (&id);
          op->path = g_strdup (colon + 1);
          return;
        }
    }
  op->path = g_strdup (arg);
}

/* The terminal's progress line for the transfer in flight (NULL in a pipe or a log). */
static NzProgress *progress_line;

static void
progress (gint64 done, gint64 total, gpointer user_data)
{
  nz_progress_transfer_cb (done, total, progress_line);
}

/* A local directory destination receives the source's basename. */
static char *
local_destination (const char *dst, const char *remote_src)
{
  struct stat st;

  if (stat (dst, &st) == 0 && S_ISDIR (st.st_mode))
    {
      g_autofree char *base = g_path_get_basename (remote_src);

      return g_build_filename (dst, base, NULL);
    }
  return g_strdup (dst);
}

/* A sandbox path ending in '/' (or empty) receives the local source's basename. */
static char *
remote_destination (const char *dst, const char *local_src)
{
  g_autofree char *base = NULL;

  if (*dst != '\0' && !g_str_has_suffix (dst, "/"))
    return g_strdup (dst);
  if (g_str_equal (local_src, "-"))
    return NULL;
  base = g_path_get_basename (local_src);
  return g_strconcat (dst, base, NULL);
}

static gboolean
download_to_local (NzAgentClient *client, const char *src, const char *dst, gint64 *bytes,
                   GError **error)
{
  g_autofree char *tmp = NULL;
  nz_autofd int fd = -1;

  struct stat st;

  if (g_str_equal (dst, "-"))
    return nz_agent_files_download (client, src, STDOUT_FILENO, progress, NULL, bytes, NULL, error);
  /* A device or a FIFO (/dev/null, a named pipe) is written as it is, never replaced. */
  if (stat (dst, &st) == 0 && !S_ISREG (st.st_mode))
    {
      fd = open (dst, O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd < 0)
        return nz_throw_errno_prefix (error, "open '%s'", dst);
      return nz_agent_files_download (client, src, fd, progress, NULL, bytes, NULL, error);
    }
  /* Written beside the destination and renamed: a failed copy never leaves half a file. */
  tmp = g_strdup_printf ("%s.namzu-cp-XXXXXX", dst);
  fd = g_mkstemp (tmp);
  if (fd < 0)
    return nz_throw_errno_prefix (error, "create '%s'", dst);
  if (!nz_agent_files_download (client, src, fd, progress, NULL, bytes, NULL, error)
      || fchmod (fd, 0666 & ~umask (umask (0))) != 0 || close (nz_steal_fd (&fd)) != 0
      || rename (tmp, dst) != 0)
    {
      if (error != NULL && *error == NULL)
        nz_throw_errno_prefix (error, "write '%s'", dst);
      unlink (tmp);
      return FALSE;
    }
  return TRUE;
}

static gboolean
copy_tree (NzAgentClient *client, NzHandle *handle, gboolean upload, const char *src,
           const char *dst, GError **error)
{
  g_auto (NzCpTree) t = { 0 };
  g_autoptr (JsonObject) out = json_object_new ();
  gboolean ok = upload ? nz_cp_tree_upload (client, src, dst, progress, NULL, &t, error)
                       : nz_cp_tree_download (client, src, dst, progress, NULL, &t, error);

  /* The last line (bytes across every file, against the tree's total) before the result. */
  nz_progress_finish (progress_line);
  if (!ok)
    return FALSE;
  if (handle != NULL)
    json_object_set_string_member (out, "sandbox", handle->id);
  json_object_set_string_member (out, "source", t.source);
  json_object_set_string_member (out, "destination", t.destination);
  json_object_set_string_member (out, "direction", upload ? "upload" : "download");
  json_object_set_int_member (out, "bytes", t.bytes);
  json_object_set_int_member (out, "files", t.files);
  json_object_set_int_member (out, "directories", t.directories);
  json_object_set_int_member (out, "symlinks", t.symlinks);
  json_object_set_int_member (out, "skipped", t.skipped);
  if (!nz_cli_print_object (out))
    return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
  return TRUE;
}

gboolean
nz_tool_cp (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("SRC DST - copy a file or (-r) a directory into or out of a sandbox");
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  g_autofree char *local = NULL;
  g_autofree char *remote = NULL;
  g_auto (Operand) src = { 0 };
  g_auto (Operand) dst = { 0 };
  const char *sandbox;
  gboolean upload, data_on_stdout, stdin_is_data;
  g_autoptr (NzProgress) line = NULL;
  g_autofree char *label = NULL;
  gint64 bytes = 0;
  gboolean ok;

  nz_heap_keep_transfer_buffers ();
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (opt_args == NULL || g_strv_length (opt_args) != 2)
    return nz_cli_usage (error, "want exactly two operands, SRC and DST");
  if (opt_part_kib != G_MININT && (opt_part_kib < 1 || opt_part_kib > 4096))
    return nz_cli_usage (error, "--part-kib wants 1..4096");
  operand_parse (opt_args[0], &src);
  operand_parse (opt_args[1], &dst);
  if (src.remote == dst.remote)
    return nz_cli_usage (error,
                         "exactly one of SRC and DST must be a sandbox path (:PATH or ID:PATH)");
  upload = dst.remote;
  if (!nz_cli_check_utf8 (upload ? dst.path : src.path, error, "the sandbox path"))
    return FALSE;
  data_on_stdout = !upload && g_str_equal (dst.path, "-");
  stdin_is_data = upload && g_str_equal (src.path, "-");
  /* An error object on stdout would be taken for the file's last bytes. */
  nz_cli_set_json_errors (!data_on_stdout);
  sandbox = upload ? dst.sandbox : src.sandbox;
  if (sandbox == NULL)
    sandbox = opt_sandbox;

  if (opt_recursive && (g_str_equal (src.path, "-") || g_str_equal (dst.path, "-")))
    return nz_cli_usage (error, "-r copies a directory, not stdin or stdout");

  client = nz_sandbox_open_client (opt_endpoint, sandbox, !stdin_is_data, &handle, error);
  if (client == NULL)
    return FALSE;
  label = g_strdup_printf ("%s: %s", nz_cli_tool (), src.path);
  /* The file's own bytes on the terminal would be torn by the line. */
  if (!data_on_stdout || !isatty (STDOUT_FILENO))
    line = progress_line = nz_progress_new (label, -1);
  signal (SIGPIPE, SIG_IGN);
  if (opt_recursive)
    return copy_tree (client, handle, upload, src.path, dst.path, error);
  if (upload)
    {
      nz_autofd int fd = -1;
      struct stat st;

      remote = remote_destination (dst.path, src.path);
      if (remote == NULL)
        return nz_cli_usage (error,
                             "copying stdin needs a file name in the sandbox, not a directory");
      local = g_strdup (src.path);
      fd = g_str_equal (src.path, "-") ? dup (STDIN_FILENO) : open (src.path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return nz_throw_errno_prefix (error, "open '%s'", src.path);
      if (fstat (fd, &st) == 0 && S_ISREG (st.st_mode))
        nz_progress_set_total (line, st.st_size);
      ok = nz_agent_files_upload (client, fd, remote,
                                  opt_part_kib > 0 ? (gsize)opt_part_kib * 1024 : 0, progress, NULL,
                                  &bytes, NULL, error);
    }
  else
    {
      remote = g_strdup (src.path);
      local = data_on_stdout ? g_strdup ("-") : local_destination (dst.path, src.path);
      ok = download_to_local (client, remote, local, &bytes, error);
    }
  /* The last line before any error or the JSON: the report starts on a line of its own. */
  progress_line = NULL;
  g_clear_pointer (&line, nz_progress_free);
  if (!ok)
    return FALSE;
  if (!data_on_stdout)
    {
      g_autoptr (JsonObject) out = json_object_new ();

      if (handle != NULL)
        json_object_set_string_member (out, "sandbox", handle->id);
      json_object_set_string_member (out, "source", upload ? local : remote);
      json_object_set_string_member (out, "destination", upload ? remote : local);
      json_object_set_string_member (out, "direction", upload ? "upload" : "download");
      json_object_set_int_member (out, "bytes", bytes);
      if (!nz_cli_print_object (out))
        return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
    }
  return TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-cp", nz_tool_cp, argc, argv);
}
