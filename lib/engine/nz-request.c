#include "nz-request.h"

#include <fcntl.h>
#include <math.h>
#include <string.h>

#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-fileio.h"
#include "nz-jail.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"
#include "nz-op-files.h"
#include "nz-output-log.h"

char *
nz_request_resolve_cwd (NzGuest *guest, JsonNode *cwd_node, GError **error)
{
  g_return_val_if_fail (guest != NULL, NULL);

  if (!nz_json_js_truthy (cwd_node))
    return g_strdup (nz_jail_get_workspace (guest->jail));
  if (nz_json_node_string (cwd_node) == NULL)
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS, NZ_FILE_PATH_TYPE_WORDS);
      return NULL;
    }
  return nz_jail_resolve_cwd (guest->jail, nz_json_node_string (cwd_node), error);
}

gboolean
nz_request_timeout_in_range (NzGuest *guest, double timeout_ms)
{
  g_return_val_if_fail (guest != NULL, FALSE);

  return isfinite (timeout_ms) && timeout_ms > 0
         && timeout_ms <= (double)guest->limits.max_timeout_ms;
}

double
nz_request_max_output (JsonNode *node)
{
  double max_output = nz_json_js_number (node);

  if (isnan (max_output) || max_output == 0)
    return (double)NZ_GUEST_DEFAULT_MAX_OUTPUT_BYTES;
  return max_output;
}

void
nz_request_append_delta (GString *out, NzExecRecord *rec, NzExecStream stream, const guint8 *data,
                         gsize len, gboolean offsets)
{
  g_string_append (out, stream == NZ_EXEC_STREAM_STDOUT ? "{\"type\":\"stdout_delta\",\"data\":"
                                                        : "{\"type\":\"stderr_delta\",\"data\":");
  nz_jstext_append_json_lossy (out, data, len);
  if (offsets && rec->log != NULL)
    {
      guint64 next = nz_output_log_end_offset (rec->log);

      g_string_append_printf (out, ",\"offset\":%" G_GUINT64_FORMAT ",\"nextOffset\":%" G_GUINT64_FORMAT,
                              next - len, next);
    }
  g_string_append_c (out, '}');
}

void
nz_request_set_result_members (JsonObject *obj, const NzExecResult *r)
{
  g_return_if_fail (obj != NULL && r != NULL);

  json_object_set_int_member (obj, "exitCode", r->exit_code);
  json_object_set_boolean_member (obj, "timedOut", r->timed_out);
  json_object_set_int_member (obj, "durationMs", r->duration_ms);
  if (r->signal != 0)
    json_object_set_string_member (obj, "signal", nz_exec_signal_name (r->signal));
  json_object_set_boolean_member (obj, "stdoutTruncated", r->stdout_truncated);
  json_object_set_boolean_member (obj, "stderrTruncated", r->stderr_truncated);
}

JsonObject *
nz_request_terminal_payload (NzExecRecord *rec, const char *boot_id)
{
  JsonObject *reply;

  g_return_val_if_fail (rec != NULL, NULL);

  reply = json_object_new ();
  json_object_set_boolean_member (reply, "ok", TRUE);
  if (boot_id != NULL)
    json_object_set_string_member (reply, "guestBootId", boot_id);
  json_object_set_string_member (reply, "state", nz_exec_outcome_to_string (rec->outcome));
  json_object_set_boolean_member (reply, "started", rec->started);
  if (rec->has_result)
    {
      JsonObject *result = json_object_new ();

      nz_request_set_result_members (result, &rec->result);
      json_object_set_object_member (reply, "result", result);
    }
  if (rec->error != NULL)
    json_object_set_string_member (reply, "error", rec->error);
  return reply;
}

void
nz_request_cancel_unadmitted (NzGuest *guest, NzExecRecord *rec)
{
  gint64 now;
  NzExecResult result = { .exit_code = 1 };

  g_return_if_fail (guest != NULL && rec != NULL);

  if (rec->state != NZ_EXEC_STATE_RESERVED && rec->state != NZ_EXEC_STATE_STARTING)
    return;
  now = nz_guest_now_ms ();
  result.duration_ms = rec->started_at != 0 ? MAX (0, now - rec->started_at) : 0;
  rec->cause = NZ_EXEC_CAUSE_CANCELLED;
  nz_exec_registry_remember_terminal (guest->registry, rec, NZ_EXEC_OUTCOME_CANCELLED, &result,
                                      NULL, now);
}

GBytes *
nz_request_stdin (JsonNode *stdin_node)
{
  char *text;

  if (stdin_node == NULL)
    return NULL;
  text = nz_json_js_string (stdin_node);
  return g_bytes_new_take (text, strlen (text));
}

int
nz_request_open_read (NzGuest *guest, const char *path, char **out_real, GError **error)
{
  g_autofree char *root = NULL;
  g_autofree char *lexical = NULL;

  g_return_val_if_fail (guest != NULL && path != NULL, -1);

  if ((lexical = nz_jail_resolve_read (guest->jail, path, &root, error)) == NULL)
    return -1;
  return nz_jail_open_within (lexical, root, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, out_real,
                              error);
}

gboolean
nz_request_range_member (JsonObject *body, const char *name, gint64 fallback, gint64 *out)
{
  JsonNode *n = body != NULL ? json_object_get_member (body, name) : NULL;
  double v;

  g_return_val_if_fail (name != NULL && out != NULL, FALSE);

  *out = fallback;
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (!nz_json_get_number (body, name, &v) || !nz_is_safe_integer (v) || v < 0)
    return FALSE;
  *out = (gint64)v;
  return TRUE;
}

GBytes *
nz_request_read_file (NzGuest *guest, const char *path, GError **error)
{
  g_autofree char *real = NULL;
  nz_autofd int fd = nz_request_open_read (guest, path, &real, error);

  if (fd < 0 || !nz_fileio_check_regular (fd, real, error))
    return NULL;
  return nz_fileio_read_all_fd (fd, error);
}

void
nz_request_append_content (GString *reply, GBytes *content, gboolean base64)
{
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (content, &len);

  g_string_append (reply, "\"content\":");
  if (base64)
    {
      g_autofree char *b64 = g_base64_encode (data, len);

      g_string_append_printf (reply, "\"%s\"", b64);
    }
  else
    nz_jstext_append_json_lossy (reply, data, len);
  g_string_append_printf (reply, ",\"sizeBytes\":%" G_GSIZE_FORMAT ",\"encoding\":\"%s\"}", len,
                          base64 ? "base64" : "utf8");
}

int
nz_request_open_write_parent (const char *lexical, const char *root, char **out_real,
                              char **out_base, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (lexical);

  /* mkdir -p of the parent before the symlink check: the reference's order (spec C.5), but
   * made beneath the root, so a symlinked parent cannot put directories outside. */
  if (!nz_jail_mkdir_p_within (dir, root, error))
    return -1;
  return nz_jail_open_parent_within (lexical, root, out_real, out_base, error);
}

gboolean
nz_request_write_file (NzGuest *guest, const char *path, JsonNode *content_node,
                       const char *encoding, gsize *out_written, GError **error)
{
  g_autofree char *lexical = NULL;
  g_autofree char *root = NULL;
  g_autofree char *real = NULL;
  g_autofree char *base = NULL;
  g_autofree gpointer owned = NULL;
  nz_autofd int dir_fd = -1;
  gsize len = 0;
  const void *data;

  g_return_val_if_fail (guest != NULL && path != NULL && content_node != NULL, FALSE);

  if ((lexical = nz_jail_resolve_write (guest->jail, path, &root, error)) == NULL
      || (dir_fd = nz_request_open_write_parent (lexical, root, &real, &base, error)) < 0)
    return FALSE;
  data = nz_json_content_bytes (content_node, encoding, &owned, &len);
  /* Durable and atomic: stronger than the reference's fs.writeFile, never weaker. */
  if (!nz_fileio_write_durable_at (dir_fd, real, data, len, error))
    return FALSE;
  if (out_written != NULL)
    *out_written = len;
  return TRUE;
}
