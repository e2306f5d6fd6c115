#include "nz-profile.h"

#include <math.h>
#include <string.h>

#include "nz-allowlist.h"
#include "nz-json.h"

G_DEFINE_QUARK (nz - egress - error - quark, nz_egress_error)

/* Spec E.5: hostnames only; schemes, paths, host:port, IPv6 and underscores all fail. */
#define HOST_RE "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
/* DNS-1123 label, so the name can become a Kubernetes label value. */
#define NAME_RE "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
/* Total length of a DNS name; labels are not length-checked one by one (as the reference). */
#define HOST_MAX 253

const char *
nz_egress_error_code_name (const GError *error)
{
  static const char *const names[] = {
    [NZ_EGRESS_ERROR_INVALID_NAME] = "invalid-name",
    [NZ_EGRESS_ERROR_INVALID_HOST] = "invalid-host",
    [NZ_EGRESS_ERROR_INVALID_PORT] = "invalid-port",
    [NZ_EGRESS_ERROR_DUPLICATE_HOST] = "duplicate-host",
    [NZ_EGRESS_ERROR_CONFLICTING_POLICY] = "conflicting-policy",
    [NZ_EGRESS_ERROR_UNSUPPORTED] = "unsupported",
    [NZ_EGRESS_ERROR_CONFIG] = "invalid-config",
  };

  if (error == NULL || error->domain != NZ_EGRESS_ERROR || error->code < 0
      || (gsize)error->code >= G_N_ELEMENTS (names))
    return "failed";
  return names[error->code];
}

gboolean
nz_egress_profile_throw (GError **error, NzEgressErrorCode code, const char *path,
                         const char *backend, const char *reason_fmt, ...)
{
  g_autofree char *reason = NULL;
  va_list ap;

  va_start (ap, reason_fmt);
  reason = g_strdup_vprintf (reason_fmt, ap);
  va_end (ap);
  if (backend != NULL)
    g_set_error (error, NZ_EGRESS_ERROR, code,
                 "egress profile: %s %s (backend: %s). Refusing rather than applying part of "
                 "the profile.",
                 path, reason, backend);
  else
    g_set_error (error, NZ_EGRESS_ERROR, code,
                 "egress profile: %s %s. Refusing rather than applying part of the profile.", path,
                 reason);
  return FALSE;
}

void
nz_egress_rule_free (NzEgressRule *rule)
{
  if (rule == NULL)
    return;
  g_free (rule->host);
  if (rule->ports != NULL)
    g_array_unref (rule->ports);
  g_free (rule);
}

void
nz_egress_profile_free (NzEgressProfile *profile)
{
  if (profile == NULL)
    return;
  g_free (profile->name);
  g_ptr_array_unref (profile->rules);
  g_free (profile);
}

char *
nz_egress_host_reason (const char *host, char **normalized)
{
  g_autofree char *h = nz_allowlist_normalize_host (host);
  const char *bare = h[0] == '.' ? h + 1 : h;
  const char *last;

  if (*h == '\0' && (host == NULL || !g_str_equal (host, ".")))
    return g_strdup ("is empty");
  if (strchr (h, '*') != NULL)
    return g_strdup_printf ("\"%s\" contains '*'; write \".example.com\" for a domain and its "
                            "subdomains",
                            h);
  if (g_str_equal (h, ".") || (host != NULL && g_str_equal (host, ".")))
    return g_strdup ("names no domain after its leading dot");
  if (!g_regex_match_simple (HOST_RE, bare, 0, 0))
    return g_strdup_printf ("\"%s\" is not a hostname (no scheme, path, port, credentials or "
                            "IPv6 literal)",
                            h);
  if (strlen (h) > HOST_MAX)
    return g_strdup_printf ("is longer than %d characters", HOST_MAX);
  if (h[0] == '.' && strchr (bare, '.') == NULL)
    return g_strdup_printf ("\"%s\" names a whole top-level domain", h);
  last = strrchr (bare, '.');
  last = last != NULL ? last + 1 : bare;
  if (strspn (last, "0123456789") == strlen (last))
    return g_strdup_printf ("\"%s\" is an IP address, not a hostname; the allowlist names hosts",
                            h);
  if (normalized != NULL)
    *normalized = g_steal_pointer (&h);
  return NULL;
}

char *
nz_egress_host_validate (const char *host, const char *path, const char *backend, GError **error)
{
  char *h = NULL;
  g_autofree char *reason = nz_egress_host_reason (host, &h);

  if (reason != NULL)
    return (
        nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_HOST, path, backend, "%s", reason),
        NULL);
  return h;
}

static gint
cmp_u16 (gconstpointer a, gconstpointer b)
{
  return (int)*(const guint16 *)a - (int)*(const guint16 *)b;
}

static GArray *
parse_ports (JsonNode *node, const char *path, const char *backend, GError **error)
{
  g_autoptr (GArray) ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  JsonArray *arr;

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_PORT, path, backend,
                                     "is not a list"),
            NULL);
  arr = json_node_get_array (node);
  if (json_array_get_length (arr) == 0)
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_PORT, path, backend,
                                     "is empty; leave ports out to allow every port"),
            NULL);
  for (guint j = 0; j < json_array_get_length (arr); j++)
    {
      JsonNode *pn = json_array_get_element (arr, j);
      g_autofree char *ppath = g_strdup_printf ("%s[%u]", path, j);
      double v;

      if (!JSON_NODE_HOLDS_VALUE (pn) || json_node_get_value_type (pn) == G_TYPE_STRING
          || json_node_get_value_type (pn) == G_TYPE_BOOLEAN)
        return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_PORT, ppath, backend,
                                         "is not an integer port"),
                NULL);
      v = json_node_get_double (pn);
      if (v != floor (v) || v < 1 || v > 65535)
        return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_PORT, ppath, backend,
                                         "must be an integer from 1 to 65535"),
                NULL);
      for (guint k = 0; k < ports->len; k++)
        if (g_array_index (ports, guint16, k) == (guint16)v)
          return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_PORT, ppath, backend,
                                           "repeats port %u", (guint)v),
                  NULL);
      g_array_append_val (ports, (guint16){ (guint16)v });
    }
  g_array_sort (ports, cmp_u16);
  return g_steal_pointer (&ports);
}

NzEgressProfile *
nz_egress_profile_from_json (JsonNode *node, const char *backend, GError **error)
{
  g_autoptr (NzEgressProfile) p = g_new0 (NzEgressProfile, 1);
  JsonObject *obj;
  JsonNode *hosts;
  const char *name;

  p->rules = g_ptr_array_new_with_free_func ((GDestroyNotify)nz_egress_rule_free);
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_NAME, "profile", backend,
                                     "is not an object"),
            NULL);
  obj = json_node_get_object (node);
  name = nz_json_get_string (obj, "name");
  if (name == NULL || !g_regex_match_simple (NAME_RE, name, 0, 0))
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_NAME, "name", backend,
                                     "must be a DNS-1123 label (lowercase letters, digits and "
                                     "'-', at most 63)"),
            NULL);
  p->name = g_strdup (name);
  hosts = json_object_get_member (obj, "hosts");
  if (hosts == NULL || !JSON_NODE_HOLDS_ARRAY (hosts))
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_HOST, "hosts", backend,
                                     "is not a list"),
            NULL);
  for (guint i = 0; i < json_array_get_length (json_node_get_array (hosts)); i++)
    {
      JsonNode *rn = json_array_get_element (json_node_get_array (hosts), i);
      g_autoptr (NzEgressRule) rule = g_new0 (NzEgressRule, 1);
      g_autofree char *hpath = g_strdup_printf ("hosts[%u].host", i);
      JsonNode *hn, *pn;

      if (!JSON_NODE_HOLDS_OBJECT (rn))
        return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_HOST, hpath, backend,
                                         "is not a string"),
                NULL);
      hn = json_object_get_member (json_node_get_object (rn), "host");
      if (hn == NULL || !JSON_NODE_HOLDS_VALUE (hn)
          || json_node_get_value_type (hn) != G_TYPE_STRING)
        return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_HOST, hpath, backend,
                                         "is not a string"),
                NULL);
      /* A profile carries no credentials: "user:pw@host" fails the hostname grammar. */
      rule->host = nz_egress_host_validate (json_node_get_string (hn), hpath, backend, error);
      if (rule->host == NULL)
        return NULL;
      for (guint k = 0; k < p->rules->len; k++)
        if (g_str_equal (((NzEgressRule *)p->rules->pdata[k])->host, rule->host))
          return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_DUPLICATE_HOST, hpath, backend,
                                           "\"%s\" repeats hosts[%u]", rule->host, k),
                  NULL);
      pn = json_object_get_member (json_node_get_object (rn), "ports");
      if (pn != NULL && !JSON_NODE_HOLDS_NULL (pn))
        {
          g_autofree char *ppath = g_strdup_printf ("hosts[%u].ports", i);

          rule->ports = parse_ports (pn, ppath, backend, error);
          if (rule->ports == NULL)
            return NULL;
        }
      g_ptr_array_add (p->rules, g_steal_pointer (&rule));
    }
  return g_steal_pointer (&p);
}

NzEgressProfile *
nz_egress_profile_parse (const char *data, gssize len, const char *backend, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) local = NULL;

  if (!nz_json_parser_load (parser, data, len, &local))
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_NAME, "profile", backend,
                                     "is not valid JSON (%s)", local->message),
            NULL);
  return nz_egress_profile_from_json (json_parser_get_root (parser), backend, error);
}

JsonNode *
nz_egress_profile_to_json (const NzEgressProfile *profile)
{
  JsonObject *obj = json_object_new ();
  JsonArray *hosts = json_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (obj, "name", profile->name);
  for (guint i = 0; i < profile->rules->len; i++)
    {
      NzEgressRule *r = profile->rules->pdata[i];
      JsonObject *ro = json_object_new ();

      json_object_set_string_member (ro, "host", r->host);
      if (r->ports != NULL)
        {
          JsonArray *pa = json_array_new ();

          for (guint k = 0; k < r->ports->len; k++)
            json_array_add_int_element (pa, g_array_index (r->ports, guint16, k));
          json_object_set_array_member (ro, "ports", pa);
        }
      json_array_add_object_element (hosts, ro);
    }
  json_object_set_array_member (obj, "hosts", hosts);
  json_node_take_object (node, obj);
  return node;
}

gboolean
nz_egress_profile_has_ports (const NzEgressProfile *profile)
{
  for (guint i = 0; i < profile->rules->len; i++)
    if (((NzEgressRule *)profile->rules->pdata[i])->ports != NULL)
      return TRUE;
  return FALSE;
}

char **
nz_egress_profile_hosts (const NzEgressProfile *profile)
{
  GStrvBuilder *b = g_strv_builder_new ();
  char **out;

  for (guint i = 0; i < profile->rules->len; i++)
    g_strv_builder_add (b, ((NzEgressRule *)profile->rules->pdata[i])->host);
  out = g_strv_builder_end (b);
  g_strv_builder_unref (b);
  return out;
}

gboolean
nz_egress_rules_ports_for (GPtrArray *rules, const char *host, gboolean *any, GArray *out,
                           const NzEgressRule **matched)
{
  gboolean found = FALSE;

  *any = FALSE;
  if (matched != NULL)
    *matched = NULL;
  for (guint i = 0; rules != NULL && i < rules->len; i++)
    {
      const NzEgressRule *r = rules->pdata[i];

      if (!nz_allowlist_entry_matches (r->host, host))
        continue;
      if (!found && matched != NULL)
        *matched = r;
      found = TRUE;
      if (r->ports == NULL)
        *any = TRUE;
      else if (out != NULL)
        for (guint k = 0; k < r->ports->len; k++)
          {
            guint16 port = g_array_index (r->ports, guint16, k);
            gboolean seen = FALSE;

            for (guint m = 0; m < out->len && !seen; m++)
              seen = g_array_index (out, guint16, m) == port;
            if (!seen)
              g_array_append_val (out, port);
          }
    }
  if (out != NULL)
    g_array_sort (out, cmp_u16);
  return found;
}

gboolean
nz_egress_rules_allow_port (GPtrArray *rules, const char *host, int port)
{
  g_autoptr (GArray) ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  gboolean any;

  if (!nz_egress_rules_ports_for (rules, host, &any, ports, NULL))
    return FALSE;
  if (any)
    return TRUE;
  for (guint k = 0; k < ports->len; k++)
    if (g_array_index (ports, guint16, k) == port)
      return TRUE;
  return FALSE;
}

gboolean
nz_egress_profile_covers_entry (const NzEgressProfile *profile, const char *entry)
{
  g_autofree char *e = nz_allowlist_normalize_host (entry);

  if (*e == '\0')
    return FALSE;
  for (guint i = 0; i < profile->rules->len; i++)
    {
      const char *h = ((NzEgressRule *)profile->rules->pdata[i])->host;

      if (e[0] != '.')
        {
          if (nz_allowlist_entry_matches (h, e))
            return TRUE;
        }
      else if (h[0] == '.' && (g_str_equal (h, e) || g_str_has_suffix (e, h)))
        return TRUE; /* ".sub.example.org" under ".example.org" */
    }
  return FALSE;
}

gboolean
nz_egress_profile_check_credentials (const NzEgressProfile *profile,
                                     const char *const *credential_hosts, const char *backend,
                                     GError **error)
{
  for (guint i = 0; credential_hosts != NULL && credential_hosts[i] != NULL; i++)
    if (!nz_egress_profile_covers_entry (profile, credential_hosts[i]))
      {
        g_autofree char *path = g_strdup_printf ("backend.brokeredCredentials[%u].host", i);

        return nz_egress_profile_throw (error, NZ_EGRESS_ERROR_CONFLICTING_POLICY, path, backend,
                                        "\"%s\" is outside egress profile \"%s\"; a brokered "
                                        "credential may only name a host the profile allows",
                                        credential_hosts[i], profile->name);
      }
  return TRUE;
}

gboolean
nz_egress_profile_check_narrowing (const NzEgressProfile *profile, const char *const *entries,
                                   const char *backend, GError **error)
{
  for (guint i = 0; entries != NULL && entries[i] != NULL; i++)
    if (!nz_egress_profile_covers_entry (profile, entries[i]))
      {
        g_autofree char *path = g_strdup_printf ("allowedHosts[%u]", i);

        return nz_egress_profile_throw (error, NZ_EGRESS_ERROR_INVALID_HOST, path, backend,
                                        "\"%s\" is outside egress profile \"%s\"; "
                                        "setNetworkPolicy may narrow within the profile, not "
                                        "widen past it",
                                        entries[i], profile->name);
      }
  return TRUE;
}
