#include "nz-proxy-config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nz-json.h"

static void
credential_free (NzBrokeredCredential *c)
{
  g_free (c->host);
  g_free (c->header);
  if (c->value != NULL)
    memset (c->value, 0, strlen (c->value));
  g_free (c->value);
  g_free (c);
}

void
nz_proxy_config_free (NzProxyConfig *config)
{
  if (config == NULL)
    return;
  g_strfreev (config->allowed_hosts);
  g_ptr_array_unref (config->credentials);
  g_strfreev (config->allow_inward_for);
  g_strfreev (config->self_names);
  if (config->host_ports != NULL)
    g_ptr_array_unref (config->host_ports);
  g_free (config);
}

static gboolean fail (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static gboolean
fail (GError **error, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_set_error_literal (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_CONFIG, "");
  g_free ((*error)->message);
  (*error)->message = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return FALSE;
}

static gboolean
is_string (JsonNode *n)
{
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING;
}

static gboolean
is_integer (JsonNode *n, double *out)
{
  GType t;

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n))
    return FALSE;
  t = json_node_get_value_type (n);
  if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
    return FALSE;
  *out = json_node_get_double (n);
  return *out == floor (*out);
}

static char **
string_list (JsonObject *obj, const char *member, const char *env, gboolean required,
             gboolean non_empty, GError **error)
{
  JsonNode *n = json_object_get_member (obj, member);
  GStrvBuilder *b;
  char **out;

  if (n == NULL)
    {
      if (required)
        fail (error, "%s has no %s; an empty list denies everything, a missing one is a mistake",
              env, member);
      return NULL;
    }
  if (!JSON_NODE_HOLDS_ARRAY (n))
    return (fail (error, "%s: %s is not a list", env, member), NULL);
  b = g_strv_builder_new ();
  for (guint i = 0; i < json_array_get_length (json_node_get_array (n)); i++)
    {
      JsonNode *e = json_array_get_element (json_node_get_array (n), i);

      if (!is_string (e) || (non_empty && *json_node_get_string (e) == '\0'))
        {
          g_strv_builder_unref (b);
          return (fail (error, "%s: %s[%u] is not a non-empty string", env, member, i), NULL);
        }
      g_strv_builder_add (b, json_node_get_string (e));
    }
  out = g_strv_builder_end (b);
  g_strv_builder_unref (b);
  return out;
}

static GPtrArray *
host_ports (JsonObject *obj, const char *env, GError **error)
{
  JsonNode *n = json_object_get_member (obj, "hostPorts");
  g_autoptr (GPtrArray) rules
      = g_ptr_array_new_with_free_func ((GDestroyNotify)nz_egress_rule_free);

  if (n == NULL)
    return (fail (error, "%s has no hostPorts, which is what V2 is for", env), NULL);
  if (!JSON_NODE_HOLDS_ARRAY (n))
    return (fail (error, "%s: hostPorts is not a list", env), NULL);
  for (guint i = 0; i < json_array_get_length (json_node_get_array (n)); i++)
    {
      JsonNode *e = json_array_get_element (json_node_get_array (n), i);
      g_autoptr (NzEgressRule) rule = g_new0 (NzEgressRule, 1);
      JsonObjectIter it;
      const char *k;
      JsonNode *v;
      JsonNode *pn;

      if (!JSON_NODE_HOLDS_OBJECT (e))
        return (fail (error, "%s: hostPorts[%u] is not an object", env, i), NULL);
      json_object_iter_init (&it, json_node_get_object (e));
      while (json_object_iter_next (&it, &k, &v))
        if (!g_str_equal (k, "host") && !g_str_equal (k, "ports"))
          return (fail (error, "%s: hostPorts[%u] has an unknown field \"%s\"", env, i, k), NULL);
      if (!is_string (json_object_get_member (json_node_get_object (e), "host"))
          || *nz_json_get_string (json_node_get_object (e), "host") == '\0')
        return (fail (error, "%s: hostPorts[%u].host is not a non-empty string", env, i), NULL);
      rule->host = g_strdup (nz_json_get_string (json_node_get_object (e), "host"));
      pn = json_object_get_member (json_node_get_object (e), "ports");
      if (pn != NULL)
        {
          JsonArray *pa;

          if (!JSON_NODE_HOLDS_ARRAY (pn) || json_array_get_length (json_node_get_array (pn)) == 0)
            return (fail (error, "%s: hostPorts[%u].ports must be a non-empty list", env, i), NULL);
          pa = json_node_get_array (pn);
          rule->ports = g_array_new (FALSE, FALSE, sizeof (guint16));
          for (guint j = 0; j < json_array_get_length (pa); j++)
            {
              double d;
              guint16 p;

              if (!is_integer (json_array_get_element (pa, j), &d) || d < 1 || d > 65535)
                return (fail (error,
                              "%s: hostPorts[%u].ports[%u] must be an integer from 1 to "
                              "65535",
                              env, i, j),
                        NULL);
              p = (guint16)d;
              for (guint m = 0; m < rule->ports->len; m++)
                if (g_array_index (rule->ports, guint16, m) == p)
                  return (fail (error, "%s: hostPorts[%u].ports[%u] repeats port %u", env, i, j, p),
                          NULL);
              g_array_append_val (rule->ports, p);
            }
        }
      g_ptr_array_add (rules, g_steal_pointer (&rule));
    }
  return g_steal_pointer (&rules);
}

static NzProxyConfig *
parse (const char *raw, const char *env, gboolean v2, GError **error)
{
  static const char *const v2_keys[]
      = { "port",           "allowedHosts", "credentials", "allowInwardFor",
          "upgradeToHttps", "selfNames",    "hostPorts",   NULL };
  g_autoptr (NzProxyConfig) c = g_new0 (NzProxyConfig, 1);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) local = NULL;
  JsonObject *obj;
  JsonNode *n;
  double d;

  c->credentials = g_ptr_array_new_with_free_func ((GDestroyNotify)credential_free);
  c->port = NZ_EGRESS_PROXY_PORT;
  c->upgrade_to_https = TRUE;
  if (raw == NULL || *raw == '\0')
    return (fail (error, "%s is not set; this container has no policy to enforce", env), NULL);
  /* The parser's message names line and column only; the input is never echoed (it would
   * contain credential values). */
  if (!nz_json_parser_load (parser, raw, -1, &local))
    {
      const char *at = g_strrstr (local->message, "<data>:");
      unsigned line = 0, column = 0;

      if (at == NULL || sscanf (at, "<data>:%u:%u", &line, &column) != 2)
        return (fail (error, "%s is not valid JSON", env), NULL);
      return (fail (error, "%s is not valid JSON (at line %u column %u)", env, line, column), NULL);
    }
  n = json_parser_get_root (parser);
  if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
    return (fail (error, "%s is not a JSON object", env), NULL);
  obj = json_node_get_object (n);
  if (v2)
    {
      JsonObjectIter it;
      const char *k;
      JsonNode *v;

      json_object_iter_init (&it, obj);
      while (json_object_iter_next (&it, &k, &v))
        if (!g_strv_contains (v2_keys, k))
          return (fail (error, "%s has an unknown field \"%s\"", env, k), NULL);
    }
  c->allowed_hosts = string_list (obj, "allowedHosts", env, TRUE, TRUE, error);
  if (c->allowed_hosts == NULL)
    return NULL;
  n = json_object_get_member (obj, "port");
  if (n != NULL && (!is_integer (n, &d) || d < 1 || d > 65535))
    return (fail (error, "%s: port must be an integer from 1 to 65535", env), NULL);
  if (n != NULL)
    c->port = (int)d;
  n = json_object_get_member (obj, "credentials");
  if (n != NULL && !JSON_NODE_HOLDS_ARRAY (n))
    return (fail (error, "%s: credentials is not a list", env), NULL);
  for (guint i = 0; n != NULL && i < json_array_get_length (json_node_get_array (n)); i++)
    {
      JsonNode *e = json_array_get_element (json_node_get_array (n), i);
      NzBrokeredCredential *cred;
      const char *fields[] = { "host", "header", "value" };

      if (!JSON_NODE_HOLDS_OBJECT (e))
        return (fail (error, "%s: credentials[%u] is not an object", env, i), NULL);
      for (guint f = 0; f < G_N_ELEMENTS (fields); f++)
        {
          const char *s = nz_json_get_string (json_node_get_object (e), fields[f]);

          if (!is_string (json_object_get_member (json_node_get_object (e), fields[f]))
              || *s == '\0')
            return (
                fail (error, "%s: credentials[%u].%s is not a non-empty string", env, i, fields[f]),
                NULL);
        }
      cred = g_new0 (NzBrokeredCredential, 1);
      cred->host = g_strdup (nz_json_get_string (json_node_get_object (e), "host"));
      cred->header = g_strdup (nz_json_get_string (json_node_get_object (e), "header"));
      cred->value = g_strdup (nz_json_get_string (json_node_get_object (e), "value"));
      g_ptr_array_add (c->credentials, cred);
    }
  n = json_object_get_member (obj, "upgradeToHttps");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
        return (fail (error, "%s: upgradeToHttps is not a boolean", env), NULL);
      c->upgrade_to_https = json_node_get_boolean (n);
    }
  c->allow_inward_for = string_list (obj, "allowInwardFor", env, FALSE, FALSE, error);
  if (c->allow_inward_for == NULL && error != NULL && *error != NULL)
    return NULL;
  c->self_names = string_list (obj, "selfNames", env, FALSE, FALSE, error);
  if (c->self_names == NULL && error != NULL && *error != NULL)
    return NULL;
  if (v2)
    {
      c->host_ports = host_ports (obj, env, error);
      if (c->host_ports == NULL)
        return NULL;
    }
  return g_steal_pointer (&c);
}

NzProxyConfig *
nz_proxy_config_read (const char *v1, const char *v2, GError **error)
{
  if (v2 != NULL)
    return parse (v2, NZ_EGRESS_PROXY_CONFIG_V2_ENV, TRUE, error);
  return parse (v1, NZ_EGRESS_PROXY_CONFIG_ENV, FALSE, error);
}

JsonNode *
nz_proxy_config_build (const char *const *allowed_hosts, const NzEgressProfile *profile,
                       GPtrArray *credentials, const char *const *allow_inward_for, int port,
                       const char **env_name)
{
  JsonObject *o = json_object_new ();
  JsonArray *hosts = json_array_new ();
  JsonArray *creds = json_array_new ();
  JsonArray *self = json_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  gboolean v2 = profile != NULL && nz_egress_profile_has_ports (profile);

  json_object_set_int_member (o, "port", port);
  for (guint i = 0; allowed_hosts != NULL && allowed_hosts[i] != NULL; i++)
    json_array_add_string_element (hosts, allowed_hosts[i]);
  json_object_set_array_member (o, "allowedHosts", hosts);
  for (guint i = 0; credentials != NULL && i < credentials->len; i++)
    {
      NzBrokeredCredential *c = credentials->pdata[i];
      JsonObject *co = json_object_new ();

      json_object_set_string_member (co, "host", c->host);
      json_object_set_string_member (co, "header", c->header);
      json_object_set_string_member (co, "value", c->value);
      json_array_add_object_element (creds, co);
    }
  json_object_set_array_member (o, "credentials", creds);
  if (allow_inward_for != NULL)
    {
      JsonArray *a = json_array_new ();

      for (guint i = 0; allow_inward_for[i] != NULL; i++)
        json_array_add_string_element (a, allow_inward_for[i]);
      json_object_set_array_member (o, "allowInwardFor", a);
    }
  json_array_add_string_element (self, NZ_EGRESS_PROXY_HOST_ALIAS);
  json_object_set_array_member (o, "selfNames", self);
  if (v2)
    {
      g_autoptr (JsonNode) pj = nz_egress_profile_to_json (profile);

      json_object_set_member (
          o, "hostPorts",
          json_node_copy (json_object_get_member (json_node_get_object (pj), "hosts")));
    }
  if (env_name != NULL)
    *env_name = v2 ? NZ_EGRESS_PROXY_CONFIG_V2_ENV : NZ_EGRESS_PROXY_CONFIG_ENV;
  json_node_take_object (node, o);
  return node;
}
