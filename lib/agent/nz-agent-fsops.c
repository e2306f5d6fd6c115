#include "nz-agent-fsops.h"

#include <string.h>

#include "nz-fsops.h"

static const char *const fs_ops[]
    = { "list-files", "walk-files", "stat-file", "remove-file", "move-file", NULL };
static const char *const tree_ops[] = { "make-directory", "make-symlink", "set-file-mode", NULL };

const char *
nz_agent_fsops_feature (const char *op)
{
  if (g_strv_contains (fs_ops, op))
    return "file-ops";
  if (g_strv_contains (tree_ops, op))
    return "file-tree-ops";
  return NULL;
}

void
nz_agent_fsops_op (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
  const char *op = env->op;
  g_autoptr (JsonObject) reply = json_object_new ();
  g_autoptr (GError) error = NULL;
  gboolean ok;

  /* ok and the boot id first, the op's members after them. */
  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_string_member (reply, "guestBootId", guest->boot_id);
  if (strcmp (op, "list-files") == 0 || strcmp (op, "walk-files") == 0)
    ok = nz_fsops_walk (guest, env->body, strcmp (op, "walk-files") == 0, reply, &error);
  else if (strcmp (op, "stat-file") == 0)
    ok = nz_fsops_stat (guest, env->body, reply, &error);
  else if (strcmp (op, "remove-file") == 0)
    ok = nz_fsops_remove (guest, env->body, reply, &error);
  else if (strcmp (op, "move-file") == 0)
    ok = nz_fsops_move (guest, env->body, reply, &error);
  else if (strcmp (op, "make-directory") == 0)
    ok = nz_fsops_make_directory (guest, env->body, reply, &error);
  else if (strcmp (op, "make-symlink") == 0)
    ok = nz_fsops_make_symlink (guest, env->body, reply, &error);
  else
    ok = nz_fsops_set_mode (guest, env->body, reply, &error);
  if (!ok)
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  nz_agent_conn_reply (conn, reply);
}
