#include "nz-egress-live.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "nz-allowlist.h"
#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"

JsonNode *
nz_egress_parse_credentials (const char *json, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *arr;

  if (!nz_json_parser_load (parser, json, -1, NULL)
      || !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)))
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "backend.brokeredCredentials: must be a list of {host, header, value}"),
            NULL);
  arr = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (arr); i++)
    {
      JsonNode *e = json_array_get_element (arr, i);
      const char *fields[] = { "host", "header", "value" };

      for (guint f = 0; f < G_N_ELEMENTS (fields); f++)
        {
          const char *s = JSON_NODE_HOLDS_OBJECT (e)
                              ? nz_json_get_string (json_node_get_object (e), fields[f])
                              : NULL;

          if (s == NULL || *s == '\0')
            return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                              "backend.brokeredCredentials[%u].%s: must be a non-empty string", i,
                              fields[f]),
                    NULL);
        }
    }
  return json_node_copy (json_parser_get_root (parser));
}

gboolean
nz_egress_options_check (const NzCreateOptions *opts, const char *backend, GError **error)
{
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (JsonNode) creds = NULL;
  g_autoptr (GPtrArray) cred_hosts = g_ptr_array_new ();

  for (guint i = 0; i < opts->egress_hosts->len; i++)
    {
      g_autofree char *path = g_strdup_printf ("--egress[%u]", i);
      g_autofree char *h
          = nz_egress_host_validate (opts->egress_hosts->pdata[i], path, backend, error);

      if (h == NULL)
        return FALSE;
    }
  if (opts->egress_profile != NULL)
    {
      profile = nz_egress_profile_parse (opts->egress_profile, -1, backend, error);
      if (profile == NULL)
        return FALSE;
    }
  if (opts->egress_credentials == NULL)
    return TRUE;
  /* A credential is only ever stamped by the proxy; with no allowlist there is none. */
  if (opts->network != NZ_NETWORK_ALLOWLIST)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "backend.brokeredCredentials: needs an egress allowlist (--egress or "
                     "--profile); with no egress proxy nothing would carry them");
  creds = nz_egress_parse_credentials (opts->egress_credentials, error);
  if (creds == NULL)
    return FALSE;
  for (guint i = 0; i < json_array_get_length (json_node_get_array (creds)); i++)
    {
      JsonObject *o = json_array_get_object_element (json_node_get_array (creds), i);

      g_ptr_array_add (cred_hosts, (gpointer)nz_json_get_string (o, "host"));
    }
  g_ptr_array_add (cred_hosts, NULL);
  if (profile != NULL)
    return nz_egress_profile_check_credentials (profile, (const char *const *)cred_hosts->pdata,
                                                backend, error);
  /* Without a profile the allowlist plays its part: the secret goes nowhere it does not. */
  for (guint i = 0; cred_hosts->pdata[i] != NULL; i++)
    {
      gboolean covered = FALSE;

      for (guint k = 0; k < opts->egress_hosts->len && !covered; k++)
        covered = nz_allowlist_entry_matches (opts->egress_hosts->pdata[k], cred_hosts->pdata[i]);
      if (!covered)
        {
          g_autofree char *path = g_strdup_printf ("backend.brokeredCredentials[%u].host", i);

          return nz_egress_profile_throw (error, NZ_EGRESS_ERROR_CONFLICTING_POLICY, path, backend,
                                          "\"%s\" is not on the egress allowlist",
                                          (const char *)cred_hosts->pdata[i]);
        }
    }
  return TRUE;
}

int
nz_egress_lock (const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, NZ_EGRESS_LOCK_FILE, NULL);
  nz_autofd int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  if (fd < 0 || flock (fd, LOCK_EX) != 0)
    return (nz_throw_errno_prefix (error, "lock '%s'", path), -1);
  return nz_steal_fd (&fd);
}

static gboolean
same_hosts (JsonObject *rec, const char *const *hosts, const char *running_member)
{
  JsonArray *old = rec != NULL ? nz_json_get_array (rec, "hosts") : NULL;

  /* Only a list that is applied AND has a running proxy counts as unchanged. */
  if (old == NULL || !json_object_has_member (rec, running_member))
    return FALSE;
  if (json_array_get_length (old) != g_strv_length ((char **)hosts))
    return FALSE;
  for (guint i = 0; hosts[i] != NULL; i++)
    if (g_strcmp0 (json_array_get_string_element (old, i), hosts[i]) != 0)
      return FALSE;
  return TRUE;
}

gboolean
nz_egress_live_set (NzHandle *probe, const char *const *hosts, const NzEgressSwap *swap,
                    gboolean *changed, GError **error)
{
  g_autoptr (NzHandle) h = NULL;
  const char *id = probe->id;
  const char *profile_json;
  nz_autofd int lock = -1;
  JsonObject *rec;

  *changed = FALSE;
  if (nz_json_get_object (probe->priv, "egress") == NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "This sandbox cannot change its network policy: it was created without an "
                     "egress proxy (create it with --egress or --profile)");
  for (guint i = 0; hosts[i] != NULL; i++)
    {
      g_autofree char *path = g_strdup_printf ("allowedHosts[%u]", i);
      g_autofree char *ok = nz_egress_host_validate (hosts[i], path, swap->backend, error);

      if (ok == NULL)
        return FALSE;
    }
  /* Under a profile: narrowing only, checked before queueing. */
  profile_json = nz_json_get_string (nz_json_get_object (probe->priv, "egress"), "profile");
  if (profile_json != NULL)
    {
      g_autoptr (NzEgressProfile) profile
          = nz_egress_profile_parse (profile_json, -1, swap->backend, error);

      if (profile == NULL
          || !nz_egress_profile_check_narrowing (profile, hosts, swap->backend, error))
        return FALSE;
    }
  /* The per-sandbox queue: one change at a time, each applying and verifying its own list. */
  lock = nz_egress_lock (probe->dir, error);
  if (lock < 0)
    return FALSE;
  /* Re-read under the lock: the call before ours may have changed it, or a destroy removed it. */
  h = nz_handle_load (id, error);
  if (h == NULL)
    return nz_prefix_error (error, "sandbox '%s' was destroyed while the change waited", id);
  rec = nz_json_get_object (h->priv, "egress");
  if (rec == NULL)
    return nz_throw (error, NZ_ERROR_NOT_FOUND, "sandbox '%s' is being destroyed", id);
  if (same_hosts (rec, hosts, swap->running_member))
    return TRUE;
  *changed = TRUE;
  /* Fail closed: the old proxy is gone before the new one exists, and the handle says so
   * before either happens, so a crash in between leaves "no proxy", never "old list". */
  json_object_remove_member (rec, "hosts");
  if (!nz_handle_save (h, error) || !swap->stop (h, error) || !nz_handle_save (h, error))
    return nz_prefix_error (error, "the old egress proxy of '%s' may still run", id);
  if (!swap->start (h, hosts, error))
    return nz_prefix_error (error,
                            "sandbox '%s' now has no egress (the old proxy is stopped; "
                            "the next set starts one)",
                            id);
  return nz_handle_save (h, error);
}
