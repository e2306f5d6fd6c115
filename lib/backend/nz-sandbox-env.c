#include "nz-sandbox-env.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-backend-config.h"
#include "nz-errors.h"
#include "nz-json.h"

/* The prefixes the servers inside the sandbox read their configuration from (spec B.2, C.1;
 * NAMZU_WORKER_* are namzu-worker's privsep knobs) and the child scrub removes (spec B.3): set
 * here, one would reach no command and could reconfigure the worker (e.g.
 * NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED, NAMZU_SANDBOX_WORKSPACE). */
static const char *const reserved_prefixes[]
    = { "NAMZU_SANDBOX_", "NAMZU_AGENT_", "NAMZU_WORKER_" };

/* Spec B.3: what namzu points at the egress proxy when an allowlist is in force. */
static const char *const proxy_names[]
    = { "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy" };

gboolean
nz_sandbox_env_name_is_valid (const char *name)
{
  if (name == NULL || !(g_ascii_isalpha (*name) || *name == '_'))
    return FALSE;
  for (const char *p = name + 1; *p != '\0'; p++)
    if (!(g_ascii_isalnum (*p) || *p == '_'))
      return FALSE;
  return TRUE;
}

const char *
nz_sandbox_env_reserved_prefix (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (reserved_prefixes); i++)
    if (g_str_has_prefix (name, reserved_prefixes[i]))
      return reserved_prefixes[i];
  return NULL;
}

gboolean
nz_sandbox_env_is_proxy_name (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (proxy_names); i++)
    if (strcmp (name, proxy_names[i]) == 0)
      return TRUE;
  return FALSE;
}

gboolean
nz_sandbox_env_check_entry (const char *name, const char *value, gsize value_len, const char *where,
                            GError **error)
{
  const char *prefix;

  if (!nz_sandbox_env_name_is_valid (name))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s: '%s' is not a variable name (letters, digits and '_', not starting "
                     "with a digit)",
                     where, name != NULL ? name : "");
  if ((prefix = nz_sandbox_env_reserved_prefix (name)) != NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s: %s is reserved: %s* configures the agent or worker inside the sandbox, "
                     "and no command sees it",
                     where, name, prefix);
  /* An environ entry ends at its first NUL: the rest would be dropped without a word. */
  if (memchr (value, '\0', value_len) != NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s: the value of %s contains a NUL byte", where,
                     name);
  if (!g_utf8_validate (value, (gssize)value_len, NULL))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s: the value of %s is not UTF-8", where, name);
  return TRUE;
}

gboolean
nz_sandbox_env_put (GPtrArray *env, const char *name, const char *value, gsize value_len,
                    const char *where, GError **error)
{
  gsize n;
  char *entry;

  g_return_val_if_fail (env != NULL && name != NULL && value != NULL, FALSE);
  if (!nz_sandbox_env_check_entry (name, value, value_len, where, error))
    return FALSE;
  n = strlen (name);
  entry = g_strdup_printf ("%s=%.*s", name, (int)value_len, value);
  for (guint i = 0; i < env->len; i++)
    {
      const char *e = env->pdata[i];

      if (strncmp (e, name, n) == 0 && e[n] == '=')
        {
          g_free (env->pdata[i]);
          env->pdata[i] = entry;
          return TRUE;
        }
    }
  g_ptr_array_add (env, entry);
  return TRUE;
}

/* A bare NAME: this process's value, like docker's `-e NAME`; unset is refused, not dropped,
 * so a typo is not a silently missing variable. */
static gboolean
put_from_host (GPtrArray *env, const char *name, const char *where, GError **error)
{
  const char *value;

  if (!nz_sandbox_env_name_is_valid (name))
    return nz_sandbox_env_check_entry (name, "", 0, where, error);
  value = g_getenv (name);
  if (value == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s: %s has no value and is not set in this environment (write %s=VALUE)",
                     where, name, name);
  return nz_sandbox_env_put (env, name, value, strlen (value), where, error);
}

gboolean
nz_sandbox_env_add_arg (GPtrArray *env, const char *arg, GError **error)
{
  const char *eq = strchr (arg, '=');
  g_autofree char *name = NULL;

  if (eq == NULL)
    return put_from_host (env, arg, "--env", error);
  name = g_strndup (arg, eq - arg);
  return nz_sandbox_env_put (env, name, eq + 1, strlen (eq + 1), "--env", error);
}

gboolean
nz_sandbox_env_add_file_data (GPtrArray *env, const char *data, gsize len, const char *path,
                              GError **error)
{
  const char *p = data, *end = data + len;
  guint lineno = 0;

  /* A BOM is an editor's, not part of the first name. */
  if (len >= 3 && memcmp (data, "\xef\xbb\xbf", 3) == 0)
    p += 3;
  while (p < end)
    {
      const char *nl = memchr (p, '\n', (gsize)(end - p));
      const char *line_end = nl != NULL ? nl : end;
      const char *eol = line_end, *eq;
      g_autofree char *where = NULL;
      g_autofree char *name = NULL;

      lineno++;
      if (eol > p && eol[-1] == '\r')
        eol--;
      while (p < eol && g_ascii_isspace (*p))
        p++;
      if (p < eol && *p != '#')
        {
          where = g_strdup_printf ("env file %s line %u", path, lineno);
          eq = memchr (p, '=', (gsize)(eol - p));
          name = g_strndup (p, (eq != NULL ? eq : eol) - p);
          /* g_strndup stops at a NUL: a NUL in the name is seen here. */
          if (strlen (name) != (gsize)((eq != NULL ? eq : eol) - p))
            return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s: contains a NUL byte", where);
          if (eq == NULL && !put_from_host (env, name, where, error))
            return FALSE;
          if (eq != NULL
              && !nz_sandbox_env_put (env, name, eq + 1, (gsize)(eol - eq - 1), where, error))
            return FALSE;
        }
      p = nl != NULL ? nl + 1 : end;
    }
  return TRUE;
}

gboolean
nz_sandbox_env_add_file (GPtrArray *env, const char *path, GError **error)
{
  nz_autofd int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  g_autoptr (GByteArray) buf = g_byte_array_new ();

  if (fd < 0)
    return nz_throw_errno_prefix (error, "--env-file %s", path);
  /* Bounded: a FIFO or /dev/zero must not hang or exhaust namzu-create. */
  while (buf->len <= NZ_SANDBOX_ENV_FILE_MAX_BYTES)
    {
      guint8 chunk[8192];
      ssize_t n = read (fd, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nz_throw_errno_prefix (error, "--env-file %s", path);
      if (n == 0)
        break;
      g_byte_array_append (buf, chunk, (guint)n);
    }
  if (buf->len > NZ_SANDBOX_ENV_FILE_MAX_BYTES)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "--env-file %s: larger than %d bytes", path,
                     NZ_SANDBOX_ENV_FILE_MAX_BYTES);
  return nz_sandbox_env_add_file_data (env, (const char *)buf->data, buf->len, path, error);
}

void
nz_sandbox_env_parse_config (JsonNode *node, GPtrArray *env, GPtrArray *reasons)
{
  JsonObject *obj;
  g_autoptr (GList) members = NULL;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      nz_config_refuse (reasons, "env: must be an object of strings");
      return;
    }
  obj = json_node_get_object (node);
  members = json_object_get_members (obj);
  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *name = l->data;
      JsonNode *v = json_object_get_member (obj, name);
      g_autofree char *where = g_strdup_printf ("env.%s", name);
      g_autoptr (GError) local = NULL;
      const char *s;

      if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
        {
          nz_config_refuse (reasons, "%s: must be a string", where);
          continue;
        }
      s = json_node_get_string (v);
      if (!nz_sandbox_env_put (env, name, s, strlen (s), "env", &local))
        nz_config_refuse (reasons, "%s", local->message);
    }
}

void
nz_sandbox_env_check_all (GPtrArray *env, gboolean allowlist, GPtrArray *reasons)
{
  gsize total = 0;

  for (guint i = 0; env != NULL && i < env->len; i++)
    {
      const char *e = env->pdata[i], *eq = strchr (e, '=');
      g_autofree char *name = eq != NULL ? g_strndup (e, eq - e) : g_strdup (e);
      g_autoptr (GError) local = NULL;

      total += strlen (e) + 1;
      if (!nz_sandbox_env_check_entry (name, eq != NULL ? eq + 1 : "",
                                       eq != NULL ? strlen (eq + 1) : 0, "env", &local))
        nz_config_refuse (reasons, "%s", local->message);
      else if (eq == NULL)
        nz_config_refuse (reasons, "env: %s has no value", name);
      /* They would point around the proxy namzu starts for the allowlist, or at nothing. */
      else if (allowlist && nz_sandbox_env_is_proxy_name (name))
        nz_config_refuse (reasons,
                          "env: %s is set by namzu in a sandbox with an egress allowlist (it "
                          "points at the egress proxy)",
                          name);
    }
  if (total > NZ_SANDBOX_ENV_MAX_BYTES)
    nz_config_refuse (reasons, "env: %" G_GSIZE_FORMAT " bytes of variables, more than %d", total,
                      NZ_SANDBOX_ENV_MAX_BYTES);
}

JsonArray *
nz_sandbox_env_names (GPtrArray *env)
{
  JsonArray *names = json_array_new ();

  for (guint i = 0; env != NULL && i < env->len; i++)
    {
      const char *e = env->pdata[i], *eq = strchr (e, '=');
      g_autofree char *name = eq != NULL ? g_strndup (e, eq - e) : g_strdup (e);

      json_array_add_string_element (names, name);
    }
  return names;
}

void
nz_sandbox_env_record (JsonObject *priv, GPtrArray *env)
{
  if (env != NULL && env->len > 0)
    json_object_set_array_member (priv, "envNames", nz_sandbox_env_names (env));
}

char *
nz_sandbox_env_to_json (GPtrArray *env)
{
  g_autoptr (JsonObject) obj = json_object_new ();

  for (guint i = 0; env != NULL && i < env->len; i++)
    {
      const char *e = env->pdata[i], *eq = strchr (e, '=');
      g_autofree char *name = eq != NULL ? g_strndup (e, eq - e) : NULL;

      if (name != NULL)
        json_object_set_string_member (obj, name, eq + 1);
    }
  return nz_json_object_to_string (obj, NULL);
}
