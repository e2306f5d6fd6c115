/* What namzu-create reads besides its flags: a --config document, an egress --profile,
 * --credential values from its own environment, and the sandbox's --env-file/--env. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"
#include "nz-sandbox-env.h"

#include "options.h"

char *
nz_create_read_config (const char *path, gsize *len, GError **error)
{
  char *data = NULL;

  if (strcmp (path, "-") == 0)
    {
      g_autoptr (GIOChannel) ch = g_io_channel_unix_new (STDIN_FILENO);

      g_io_channel_set_encoding (ch, NULL, NULL);
      if (g_io_channel_read_to_end (ch, &data, len, error) != G_IO_STATUS_NORMAL)
        return (nz_prefix_error (error, "--config -"), NULL);
      return data;
    }
  if (!g_file_get_contents (path, &data, len, error))
    {
      nz_error_convert (error);
      return (nz_prefix_error (error, "--config"), NULL);
    }
  return data;
}

/* --profile: validated in full before any I/O; refused beside any other egress setting (spec
 * E.6: a profile beside a default egress is a conflicting policy, not a merge). */
gboolean
nz_create_apply_profile (NzCreateOptions *opts, const char *profile_path, const char *config,
                         gboolean egress_given, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (JsonNode) norm = NULL;

  if (egress_given || opts->egress_profile != NULL)
    return nz_egress_profile_throw (error, NZ_EGRESS_ERROR_CONFLICTING_POLICY, "defaultEgress",
                                    NULL, "cannot be combined with an egress profile; use one");
  /* A config on stdin was consumed already; its defaultEgress is then the flags' to lose. */
  if (config != NULL && strcmp (config, "-") != 0)
    {
      g_autofree char *cfg = nz_create_read_config (config, &len, error);
      g_autoptr (JsonObject) root = cfg != NULL ? nz_json_parse_object (cfg, len, NULL) : NULL;

      if (root != NULL && json_object_has_member (root, "defaultEgress"))
        return nz_egress_profile_throw (error, NZ_EGRESS_ERROR_CONFLICTING_POLICY,
                                        "defaultEgress", NULL,
                                        "cannot be combined with an egress profile; use one");
    }
  if (!g_file_get_contents (profile_path, &data, &len, error))
    return FALSE;
  profile = nz_egress_profile_parse (data, len, NULL, error);
  if (profile == NULL)
    return FALSE;
  g_ptr_array_set_size (opts->egress_hosts, 0);
  for (guint i = 0; i < profile->rules->len; i++)
    g_ptr_array_add (opts->egress_hosts,
                     g_strdup (((NzEgressRule *)profile->rules->pdata[i])->host));
  /* A profile with no hosts is deny-all (spec E.6). */
  opts->network = profile->rules->len == 0 ? NZ_NETWORK_DENY_ALL : NZ_NETWORK_ALLOWLIST;
  norm = nz_egress_profile_to_json (profile);
  opts->egress_profile = nz_json_to_string (norm, NULL);
  return TRUE;
}

/* --credential HOST:HEADER:VAR: the value comes from this process's environment, so it is on
 * no command line; the backend checks the host against the profile or allowlist. */
gboolean
nz_create_apply_credentials (NzCreateOptions *opts, char **credentials, GError **error)
{
  g_autoptr (JsonArray) arr = json_array_new ();
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_ARRAY);

  for (char **c = credentials; *c != NULL; c++)
    {
      g_auto (GStrv) parts = g_strsplit (*c, ":", 3);
      const char *value;
      JsonObject *o;

      if (g_strv_length (parts) != 3 || *parts[0] == '\0' || *parts[1] == '\0')
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "--credential must be HOST:HEADER:VAR, got '%s'", *c);
      value = g_getenv (parts[2]);
      if (value == NULL || *value == '\0')
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "--credential %s: environment variable %s is not set", parts[0],
                         parts[2]);
      o = json_object_new ();
      json_object_set_string_member (o, "host", parts[0]);
      json_object_set_string_member (o, "header", parts[1]);
      json_object_set_string_member (o, "value", value);
      json_array_add_object_element (arr, o);
    }
  json_node_set_array (node, arr);
  g_free (opts->egress_credentials);
  opts->egress_credentials = nz_json_to_string (node, NULL);
  return TRUE;
}

/* Like docker: the files in their order, then the flags, each over what came before. */
gboolean
nz_create_apply_env (NzCreateOptions *opts, char **files, char **envs, GError **error)
{
  for (char **f = files; f != NULL && *f != NULL; f++)
    if (!nz_sandbox_env_add_file (opts->env, *f, error))
      return FALSE;
  for (char **e = envs; e != NULL && *e != NULL; e++)
    if (!nz_sandbox_env_add_arg (opts->env, *e, error))
      return FALSE;
  return TRUE;
}
