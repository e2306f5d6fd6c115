/* The egress union check of spec D.10.7 (nz-kube-union.h): the core engine's judgement, what
 * both engines share (nz-kube-union-internal.h) and the LIST; the cilium engine's judgement is
 * nz-kube-union-cilium.c. */
#include "nz-kube-union.h"

#include <gio/gio.h>
#include <string.h>

#include "nz-json.h"
#include "nz-kube-egress.h"
#include "nz-kube-union-internal.h"

G_DEFINE_QUARK (nz - kube - union - error - quark, nz_kube_union_error)

JsonObject *
nz_kube_union_obj (JsonNode *n)
{
  return n != NULL && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

#define obj_of nz_kube_union_obj

static gboolean
empty (JsonArray *a)
{
  return a == NULL || json_array_get_length (a) == 0;
}

/* ---- ports ---- */

typedef struct
{
  const char *proto; /* TCP by default */
  const char *name;  /* a named port, or NULL */
  double lo, hi;     /* numeric: [lo, hi]; lo < 0: every port */
} Ports;

static gboolean
read_ports (JsonNode *n, Ports *out)
{
  JsonObject *o = obj_of (n);
  JsonNode *p = o != NULL ? json_object_get_member (o, "port") : NULL;
  double end = 0;

  if (o == NULL)
    return FALSE;
  out->proto = nz_json_get_string (o, "protocol") ?: "TCP";
  out->name = NULL;
  out->lo = out->hi = -1;
  if (p == NULL || JSON_NODE_HOLDS_NULL (p))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (p))
    return FALSE;
  if (json_node_get_value_type (p) == G_TYPE_STRING)
    {
      out->name = json_node_get_string (p);
      return TRUE;
    }
  out->lo = out->hi = json_node_get_double (p);
  if (nz_json_get_number (o, "endPort", &end))
    out->hi = end;
  return TRUE;
}

static gboolean
port_within (const Ports *r, const Ports *t)
{
  if (!g_str_equal (r->proto, t->proto))
    return FALSE;
  if (t->lo < 0 && t->name == NULL)
    return TRUE;
  if (r->name != NULL || t->name != NULL)
    return r->name != NULL && t->name != NULL && g_str_equal (r->name, t->name);
  return r->lo >= 0 && r->lo >= t->lo && r->hi <= t->hi;
}

static gboolean
ports_within (JsonArray *r, JsonArray *t)
{
  if (empty (t))
    return TRUE;
  if (empty (r))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (r); i++)
    {
      Ports rp, tp;
      gboolean found = FALSE;

      if (!read_ports (json_array_get_element (r, i), &rp))
        return FALSE;
      for (guint j = 0; !found && j < json_array_get_length (t); j++)
        found = read_ports (json_array_get_element (t, j), &tp) && port_within (&rp, &tp);
      if (!found)
        return FALSE;
    }
  return TRUE;
}

/* ---- peers ---- */

static GInetAddressMask *
cidr (const char *text)
{
  return text != NULL ? g_inet_address_mask_new_from_string (text, NULL) : NULL;
}

/* @a inside @b (same family, at least as long a prefix, @b matches @a's network). */
static gboolean
cidr_within (GInetAddressMask *a, GInetAddressMask *b)
{
  return g_inet_address_mask_get_family (a) == g_inet_address_mask_get_family (b)
         && g_inet_address_mask_get_length (a) >= g_inet_address_mask_get_length (b)
         && g_inet_address_mask_matches (b, g_inet_address_mask_get_address (a));
}

gboolean
nz_kube_union_block_within (const char *r_cidr, JsonArray *re, const char *t_cidr, JsonArray *te)
{
  g_autoptr (GInetAddressMask) rc = cidr (r_cidr);
  g_autoptr (GInetAddressMask) tc = cidr (t_cidr);

  if (rc == NULL || tc == NULL || !cidr_within (rc, tc))
    return FALSE;
  for (guint i = 0; te != NULL && i < json_array_get_length (te); i++)
    {
      g_autoptr (GInetAddressMask) e = cidr (nz_json_node_string (json_array_get_element (te, i)));
      gboolean cleared = FALSE;

      if (e == NULL)
        return FALSE;
      if (!cidr_within (e, rc) && !cidr_within (rc, e))
        continue; /* disjoint */
      if (cidr_within (rc, e))
        return FALSE; /* all of @r is excepted by @t */
      for (guint j = 0; !cleared && re != NULL && j < json_array_get_length (re); j++)
        {
          g_autoptr (GInetAddressMask) x
              = cidr (nz_json_node_string (json_array_get_element (re, j)));

          cleared = x != NULL && cidr_within (e, x);
        }
      if (!cleared)
        return FALSE;
    }
  return TRUE;
}

/* An ipBlock @r inside the ipBlock @t. */
static gboolean
block_within (JsonObject *r, JsonObject *t)
{
  return nz_kube_union_block_within (nz_json_get_string (r, "cidr"),
                                     nz_json_get_array (r, "except"),
                                     nz_json_get_string (t, "cidr"),
                                     nz_json_get_array (t, "except"));
}

static JsonNode *
peer_member (JsonNode *peer, const char *name)
{
  JsonObject *o = obj_of (peer);

  return o != NULL ? json_object_get_member (o, name) : NULL;
}

static gboolean
same_node (JsonNode *a, JsonNode *b)
{
  return a == NULL || b == NULL ? a == b : json_node_equal (a, b);
}

/* A selector peer @r inside @t: the same namespaces (namespaceSelector deep-equal, or both
 * absent: this namespace), and @t selects every pod there (no podSelector, with a
 * namespaceSelector) or the same pods (podSelector deep-equal). */
static gboolean
selector_peer_within (JsonNode *r, JsonNode *t)
{
  JsonNode *rns = peer_member (r, "namespaceSelector"), *tns = peer_member (t, "namespaceSelector");
  JsonNode *rpod = peer_member (r, "podSelector"), *tpod = peer_member (t, "podSelector");

  if (peer_member (t, "ipBlock") != NULL || !same_node (rns, tns))
    return FALSE;
  if (tpod == NULL)
    return tns != NULL;
  return same_node (rpod, tpod);
}

static gboolean
peer_within (JsonNode *rn, JsonArray *t)
{
  JsonObject *r = obj_of (rn);
  JsonObject *rb = obj_of (r != NULL ? json_object_get_member (r, "ipBlock") : NULL);

  for (guint j = 0; r != NULL && j < json_array_get_length (t); j++)
    {
      JsonNode *tn = json_array_get_element (t, j);
      JsonObject *tb
          = obj_of (obj_of (tn) != NULL ? json_object_get_member (obj_of (tn), "ipBlock") : NULL);

      if (rb != NULL ? tb != NULL && block_within (rb, tb) : selector_peer_within (rn, tn))
        return TRUE;
    }
  return FALSE;
}

static gboolean
rule_covered (JsonObject *r, JsonObject *t)
{
  JsonArray *rto = nz_json_get_array (r, "to"), *tto = nz_json_get_array (t, "to");

  if (!ports_within (nz_json_get_array (r, "ports"), nz_json_get_array (t, "ports")))
    return FALSE;
  if (empty (tto))
    return TRUE;
  if (empty (rto))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (rto); i++)
    if (!peer_within (json_array_get_element (rto, i), tto))
      return FALSE;
  return TRUE;
}

gboolean
nz_kube_union_has_egress_type (JsonObject *spec)
{
  JsonArray *types = nz_json_get_array (spec, "policyTypes");

  if (!json_object_has_member (spec, "policyTypes"))
    return json_object_has_member (spec, "egress");
  for (guint i = 0; types != NULL && i < json_array_get_length (types); i++)
    {
      JsonNode *t = json_array_get_element (types, i);

      if (JSON_NODE_HOLDS_VALUE (t) && json_node_get_value_type (t) == G_TYPE_STRING
          && g_str_equal (json_node_get_string (t), "Egress"))
        return TRUE;
    }
  return FALSE;
}

gboolean
nz_kube_union_widens (GError **error, const char *kind, const char *name, int specs_index,
                      guint rule, const char *named, const char *why)
{
  g_autofree char *specs = specs_index >= 0 ? g_strdup_printf (" specs[%d]", specs_index) : NULL;
  g_autofree char *what = why != NULL ? g_strdup_printf (" (%s)", why) : NULL;
  g_autofree char *which = rule > 0 ? g_strdup_printf (" rule %u", rule) : NULL;

  g_set_error (error, NZ_KUBE_UNION_ERROR, NZ_KUBE_UNION_ERROR_WIDENS,
               "KubernetesEgressPolicyUnionError: policy-widens-egress: %s %s%s also selects "
               "the sandbox's pods and its egress%s%s allows more than the configured "
               "policy %s; policies add up, so the sandbox could reach it. Narrow or remove it "
               "(or set verify: 'named-object-only' to check the named policy alone)",
               kind, name != NULL ? name : "(unnamed)", specs != NULL ? specs : "",
               which != NULL ? which : "", what != NULL ? what : "",
               named != NULL ? named : "(unnamed)");
  return FALSE;
}

gboolean
nz_kube_union_check (JsonArray *policies, JsonObject *pod_labels, JsonObject *expected,
                     GError **error)
{
  const char *named = nz_json_get_string (nz_json_get_object (expected, "metadata"), "name");
  JsonArray *want = nz_json_get_array (nz_json_get_object (expected, "spec"), "egress");

  for (guint i = 0; policies != NULL && i < json_array_get_length (policies); i++)
    {
      JsonObject *p = obj_of (json_array_get_element (policies, i));
      JsonObject *spec = p != NULL ? nz_json_get_object (p, "spec") : NULL;
      const char *name
          = p != NULL ? nz_json_get_string (nz_json_get_object (p, "metadata"), "name") : NULL;
      JsonArray *rules;

      if (spec == NULL || g_strcmp0 (name, named) == 0 || !nz_kube_union_has_egress_type (spec)
          || !nz_kube_egress_selector_matches (nz_json_get_object (spec, "podSelector"),
                                               pod_labels))
        continue;
      rules = nz_json_get_array (spec, "egress");
      for (guint j = 0; rules != NULL && j < json_array_get_length (rules); j++)
        {
          JsonObject *r = obj_of (json_array_get_element (rules, j));
          gboolean covered = FALSE;

          for (guint k = 0;
               r != NULL && !covered && want != NULL && k < json_array_get_length (want); k++)
            covered = rule_covered (r, obj_of (json_array_get_element (want, k)));
          if (!covered)
            return nz_kube_union_widens (error, "NetworkPolicy", name, -1, j + 1, named, NULL);
        }
    }
  return TRUE;
}

gboolean
nz_kube_union_verify (NzKubeClient *client, const char *ns, JsonObject *pod_labels,
                      JsonObject *expected, NzEgressK8sEngine engine, GError **error)
{
  g_autofree char *path = nz_kube_path ("networking.k8s.io", "v1", ns, "networkpolicies", NULL);
  g_autofree char *cpath = NULL;
  g_autoptr (JsonObject) list = NULL;
  g_autoptr (JsonObject) clist = NULL;

  g_return_val_if_fail (client != NULL && ns != NULL && expected != NULL, FALSE);
  if ((list = nz_kube_get (client, path, error)) == NULL)
    return FALSE;
  if (engine != NZ_EGRESS_K8S_CILIUM)
    return nz_kube_union_check (nz_json_get_array (list, "items"), pod_labels, expected, error);
  cpath = nz_kube_path ("cilium.io", "v2", ns, "ciliumnetworkpolicies", NULL);
  if ((clist = nz_kube_get (client, cpath, error)) == NULL)
    return FALSE;
  return nz_kube_union_check_cilium (nz_json_get_array (list, "items"),
                                     nz_json_get_array (clist, "items"), ns, pod_labels, expected,
                                     error);
}
