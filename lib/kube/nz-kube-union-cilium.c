/* The egress union check of spec D.10.7 under the cilium engine (nz-kube-union.h,
 * nz_kube_union_check_cilium). Cilium enforces NetworkPolicies and CiliumNetworkPolicies
 * together and their allowances add up, so both kinds are read into one model: a rule grants
 * each of its destinations (peers) on each of its ports (units, with their L7 constraints). A
 * candidate rule passes when every (peer, unit) pair it grants lies within a peer and a unit of
 * one rule of the expected translation. What the model cannot read widens. */
#include "nz-kube-union.h"

#include <string.h>

#include "nz-json.h"
#include "nz-kube-egress.h"
#include "nz-kube-union-internal.h"

#define obj_of nz_kube_union_obj

#define POD_NAMESPACE_KEY "io.kubernetes.pod.namespace"
/* Where Cilium puts a namespace's labels among a pod's (what a namespaceSelector selects on). */
#define NAMESPACE_LABELS_PREFIX "io.cilium.k8s.namespace.labels."
#define NAMESPACE_NAME_LABEL "kubernetes.io/metadata.name"

static JsonNode *
member (JsonObject *o, const char *name)
{
  JsonNode *n = o != NULL ? json_object_get_member (o, name) : NULL;

  return n != NULL && !JSON_NODE_HOLDS_NULL (n) ? n : NULL;
}

static const char *
str_of (JsonNode *n)
{
  return nz_json_node_string (n);
}

/* A NULL-terminated list of member names, for nz_json_unknown_member. */
#define KNOWN(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- destinations ---------------------------------------------------------------------------- */

typedef enum
{
  PEER_ALL,      /* no L3 constraint: every destination */
  PEER_CIDR,     /* toCIDR, toCIDRSet, ipBlock */
  PEER_FQDN,     /* toFQDNs */
  PEER_SELECTOR, /* toEndpoints, a NetworkPolicy selector peer */
  PEER_OPAQUE,   /* toEntities, toServices, toGroups, toNodes, toRequires: equality only */
} PeerKind;

typedef struct
{
  PeerKind kind;
  char *desc; /* what it is, for the refusal */
  const char *cidr;
  JsonArray *except;
  gboolean pattern; /* PEER_FQDN: a matchPattern (else a matchName) */
  char *fqdn;       /* PEER_FQDN: lower case, no trailing dot */
  GPtrArray *reqs;  /* PEER_SELECTOR: requirements (see req_new) */
  const char *member;
  JsonNode *node; /* PEER_OPAQUE: the entry (borrowed) */
} Peer;

static void
peer_free (gpointer data)
{
  Peer *p = data;

  g_free (p->desc);
  g_free (p->fqdn);
  if (p->reqs != NULL)
    g_ptr_array_unref (p->reqs);
  g_free (p);
}

static Peer *
peer_new (PeerKind kind, char *desc)
{
  Peer *p = g_new0 (Peer, 1);

  p->kind = kind;
  p->desc = desc;
  return p;
}

/* ---- FQDN names and patterns ---------------------------------------------------------------- */

/* A toFQDNs or rules.dns entry: exactly one of matchName and matchPattern, a string. Returns
 * the lower-cased text without a trailing dot (as Cilium compares), or NULL. */
static char *
fqdn_read (JsonNode *n, gboolean *pattern)
{
  JsonObject *o = obj_of (n);
  const char *name = str_of (member (o, "matchName"));
  const char *pat = str_of (member (o, "matchPattern"));
  const char *text = name != NULL ? name : pat;
  gsize len;

  if (o == NULL || json_object_get_size (o) != 1 || text == NULL || *text == '\0')
    return NULL;
  *pattern = pat != NULL && strchr (pat, '*') != NULL; /* a pattern without * is a name */
  len = strlen (text);
  if (len > 1 && text[len - 1] == '.')
    len--;
  return g_ascii_strdown (text, len);
}

static gboolean
dns_char (char c)
{
  return g_ascii_isalnum (c) || c == '-' || c == '_';
}

/* Cilium's matchPattern: `*` matches a run of DNS characters, never a dot. */
static gboolean
glob_matches (const char *p, const char *n)
{
  if (*p == '\0')
    return *n == '\0';
  if (*p == '*')
    {
      while (p[1] == '*')
        p++;
      for (;; n++)
        {
          if (glob_matches (p + 1, n))
            return TRUE;
          if (*n == '\0' || !dns_char (*n))
            return FALSE;
        }
    }
  return *p == *n && glob_matches (p + 1, n + 1);
}

/* Whether the name or pattern @c lies within @e. `*` alone allows every name. A pattern lies
 * within another with as many labels where each of its labels equals the other's or the other's
 * is all `*` (then its own must not hold `**`, which newer Cilium reads across labels). */
static gboolean
fqdn_within (gboolean c_pat, const char *c, gboolean e_pat, const char *e)
{
  g_auto (GStrv) cl = NULL;
  g_auto (GStrv) el = NULL;

  if (e_pat && g_str_equal (e, "*"))
    return TRUE;
  if (!c_pat)
    return e_pat ? glob_matches (e, c) : g_str_equal (c, e);
  if (!e_pat)
    return FALSE;
  if (g_str_equal (c, e))
    return TRUE;
  cl = g_strsplit (c, ".", -1);
  el = g_strsplit (e, ".", -1);
  if (g_strv_length (cl) != g_strv_length (el))
    return FALSE;
  for (guint i = 0; cl[i] != NULL; i++)
    {
      gboolean stars = *el[i] != '\0' && strspn (el[i], "*") == strlen (el[i]);

      if (!g_str_equal (cl[i], el[i]) && !(stars && strstr (cl[i], "**") == NULL))
        return FALSE;
    }
  return TRUE;
}

/* Every entry of the DNS rules @c within one of @e's; NULL or unreadable entries are not. */
static gboolean
dns_within (JsonArray *c, JsonArray *e)
{
  for (guint i = 0; i < json_array_get_length (c); i++)
    {
      gboolean cp, ep, found = FALSE;
      g_autofree char *ct = fqdn_read (json_array_get_element (c, i), &cp);

      for (guint j = 0; ct != NULL && !found && j < json_array_get_length (e); j++)
        {
          g_autofree char *et = fqdn_read (json_array_get_element (e, j), &ep);

          found = et != NULL && fqdn_within (cp, ct, ep, et);
        }
      if (!found)
        return FALSE;
    }
  return TRUE;
}

/* A DNS rule with matchPattern `*`: every name. */
static gboolean
dns_allows_all (JsonArray *dns)
{
  for (guint i = 0; i < json_array_get_length (dns); i++)
    {
      gboolean pattern;
      g_autofree char *t = fqdn_read (json_array_get_element (dns, i), &pattern);

      if (t != NULL && pattern && g_str_equal (t, "*"))
        return TRUE;
    }
  return FALSE;
}

/* ---- selectors ------------------------------------------------------------------------------ */

/* A requirement of a selector, as text: "<src>\x1f<key>\x1f<op>\x1f<values...>", where src is k
 * (k8s: source), a (any source: any: or none) or o (another source; then the key keeps it).
 * A matchLabels entry is written as In with its one value. */
static char *
req_new (char src, const char *key, const char *op, JsonArray *values)
{
  GString *s = g_string_new (NULL);
  guint n = values != NULL ? json_array_get_length (values) : 0;

  g_string_append_printf (s, "%c\x1f%s\x1f%s", src, key, op);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (s, "\x1f%s", str_of (json_array_get_element (values, i)));
  return g_string_free (s, FALSE);
}

/* Whether the requirement @c implies @e: the same key, operator and values, and a k8s source
 * implies the any source. */
static gboolean
req_implies (const char *c, const char *e)
{
  if (g_str_equal (c + 1, e + 1))
    return c[0] == e[0] || (c[0] == 'k' && e[0] == 'a');
  return FALSE;
}

static gboolean
reqs_within (GPtrArray *c, GPtrArray *e)
{
  for (guint i = 0; i < e->len; i++)
    {
      gboolean found = FALSE;

      for (guint j = 0; !found && j < c->len; j++)
        found = req_implies (g_ptr_array_index (c, j), g_ptr_array_index (e, i));
      if (!found)
        return FALSE;
    }
  return TRUE;
}

/* The values of a matchExpressions entry: strings, sorted, so the same set reads the same. */
static JsonArray *
sorted_values (JsonArray *values)
{
  g_autoptr (GPtrArray) v = g_ptr_array_new ();
  JsonArray *out = json_array_new ();

  for (guint i = 0; values != NULL && i < json_array_get_length (values); i++)
    {
      const char *s = str_of (json_array_get_element (values, i));

      if (s == NULL)
        {
          json_array_unref (out);
          return NULL;
        }
      g_ptr_array_add (v, (gpointer)s);
    }
  g_ptr_array_sort (v, (GCompareFunc)g_strcmp0);
  for (guint i = 0; i < v->len; i++)
    json_array_add_string_element (out, g_ptr_array_index (v, i));
  return out;
}

/* How a selector's keys read: a Cilium key with its optional source prefix, a NetworkPolicy
 * podSelector's pod label (k8s source), or a namespaceSelector's namespace label (as Cilium
 * exposes it on the pod; the namespace's name label is the pod's namespace). */
typedef enum
{
  KEYS_CILIUM,
  KEYS_POD,
  KEYS_NAMESPACE,
} KeyMap;

static char *
map_key (KeyMap map, const char *key, char *src)
{
  const char *colon = strchr (key, ':');

  if (map == KEYS_POD)
    return (*src = 'k', g_strdup (key));
  if (map == KEYS_NAMESPACE)
    return (*src = 'k', g_str_equal (key, NAMESPACE_NAME_LABEL)
                            ? g_strdup (POD_NAMESPACE_KEY)
                            : g_strconcat (NAMESPACE_LABELS_PREFIX, key, NULL));
  if (colon == NULL)
    return (*src = 'a', g_strdup (key));
  if (g_str_has_prefix (key, "k8s:"))
    return (*src = 'k', g_strdup (colon + 1));
  if (g_str_has_prefix (key, "any:"))
    return (*src = 'a', g_strdup (colon + 1));
  return (*src = 'o', g_strdup (key));
}

static const char *const operators[] = { "In", "NotIn", "Exists", "DoesNotExist", NULL };

/* Appends @sel's requirements (matchLabels, matchExpressions; nothing else) to @out. FALSE when
 * it cannot be read. */
static gboolean
selector_reqs (JsonObject *sel, KeyMap map, GPtrArray *out)
{
  JsonNode *ml = member (sel, "matchLabels");
  JsonNode *me = member (sel, "matchExpressions");
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  if (sel == NULL
      || nz_json_unknown_member (sel, KNOWN ("matchLabels", "matchExpressions")) != NULL)
    return FALSE;
  if (ml != NULL)
    {
      if (!JSON_NODE_HOLDS_OBJECT (ml))
        return FALSE;
      json_object_iter_init (&it, json_node_get_object (ml));
      while (json_object_iter_next (&it, &k, &v))
        {
          g_autoptr (JsonArray) one = json_array_new ();
          g_autofree char *key = NULL;
          char src;

          if (str_of (v) == NULL)
            return FALSE;
          key = map_key (map, k, &src);
          json_array_add_string_element (one, str_of (v));
          g_ptr_array_add (out, req_new (src, key, "In", one));
        }
    }
  if (me != NULL)
    {
      if (!JSON_NODE_HOLDS_ARRAY (me))
        return FALSE;
      for (guint i = 0; i < json_array_get_length (json_node_get_array (me)); i++)
        {
          JsonObject *e = obj_of (json_array_get_element (json_node_get_array (me), i));
          const char *key = str_of (member (e, "key"));
          const char *op = str_of (member (e, "operator"));
          JsonNode *vn = member (e, "values");
          g_autoptr (JsonArray) values = NULL;
          g_autofree char *mapped = NULL;
          char src;

          if (key == NULL || !g_strv_contains (operators, op != NULL ? op : "")
              || (vn != NULL && !JSON_NODE_HOLDS_ARRAY (vn))
              || (values = sorted_values (vn != NULL ? json_node_get_array (vn) : NULL)) == NULL)
            return FALSE;
          mapped = map_key (map, key, &src);
          g_ptr_array_add (out, req_new (src, mapped, op, values));
        }
    }
  return TRUE;
}

/* Whether @reqs say anything about the namespace or its labels (then Cilium adds no namespace
 * of its own), or hold a requirement of another source (a reserved: entity, which Cilium does
 * not confine to the policy's namespace either). Either way the selector is read as reaching
 * beyond the policy's namespace. */
static gboolean
reqs_name_namespace (GPtrArray *reqs)
{
  for (guint i = 0; i < reqs->len; i++)
    {
      const char *r = g_ptr_array_index (reqs, i);

      if (r[0] == 'o' || g_str_has_prefix (r + 2, NAMESPACE_LABELS_PREFIX)
          || (g_str_has_prefix (r + 2, POD_NAMESPACE_KEY)
              && r[2 + strlen (POD_NAMESPACE_KEY)] == '\x1f'))
        return TRUE;
    }
  return FALSE;
}

static char *
namespace_req (const char *ns)
{
  g_autoptr (JsonArray) one = json_array_new ();

  json_array_add_string_element (one, ns);
  return req_new ('k', POD_NAMESPACE_KEY, "In", one);
}

/* A toEndpoints entry: a Cilium selector, confined to the policy's namespace unless it names
 * one. */
static Peer *
endpoints_peer (JsonNode *n, const char *ns)
{
  g_autoptr (GPtrArray) reqs = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *text = NULL;
  Peer *p;

  if (!selector_reqs (obj_of (n), KEYS_CILIUM, reqs))
    return NULL;
  if (!reqs_name_namespace (reqs))
    g_ptr_array_add (reqs, namespace_req (ns));
  text = nz_json_to_string (n, NULL);
  p = peer_new (PEER_SELECTOR, g_strdup_printf ("toEndpoints %s", text));
  p->reqs = g_steal_pointer (&reqs);
  return p;
}

/* A NetworkPolicy `to` entry: an ipBlock alone, or a podSelector and/or namespaceSelector (no
 * namespaceSelector: the policy's namespace; an empty one: every namespace). */
static Peer *
np_peer (JsonNode *n, const char *ns)
{
  JsonObject *o = obj_of (n);
  JsonObject *block = obj_of (member (o, "ipBlock"));
  JsonNode *pods = member (o, "podSelector"), *nss = member (o, "namespaceSelector");
  g_autoptr (GPtrArray) reqs = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *text = NULL;
  Peer *p;

  if (o == NULL
      || nz_json_unknown_member (o, KNOWN ("ipBlock", "podSelector", "namespaceSelector")) != NULL)
    return NULL;
  text = nz_json_to_string (n, NULL);
  if (block != NULL)
    {
      const char *cidr = str_of (member (block, "cidr"));
      JsonNode *except = member (block, "except");

      if (pods != NULL || nss != NULL || cidr == NULL
          || json_object_get_size (block) != (except != NULL ? 2u : 1u)
          || (except != NULL && !JSON_NODE_HOLDS_ARRAY (except)))
        return NULL;
      p = peer_new (PEER_CIDR, g_strdup_printf ("ipBlock %s", text));
      p->cidr = cidr;
      p->except = except != NULL ? json_node_get_array (except) : NULL;
      return p;
    }
  if ((pods == NULL && nss == NULL)
      || (pods != NULL && !selector_reqs (obj_of (pods), KEYS_POD, reqs))
      || (nss != NULL && !selector_reqs (obj_of (nss), KEYS_NAMESPACE, reqs)))
    return NULL;
  if (nss == NULL)
    g_ptr_array_add (reqs, namespace_req (ns));
  p = peer_new (PEER_SELECTOR, g_strdup_printf ("to %s", text));
  p->reqs = g_steal_pointer (&reqs);
  return p;
}

static gboolean
peer_within (const Peer *c, const Peer *e)
{
  if (e->kind == PEER_ALL)
    return TRUE;
  if (c->kind != e->kind)
    return FALSE;
  switch (c->kind)
    {
    case PEER_CIDR:
      return nz_kube_union_block_within (c->cidr, c->except, e->cidr, e->except);
    case PEER_FQDN:
      return fqdn_within (c->pattern, c->fqdn, e->pattern, e->fqdn);
    case PEER_SELECTOR:
      return reqs_within (c->reqs, e->reqs);
    case PEER_OPAQUE:
      return g_str_equal (c->member, e->member) && json_node_equal (c->node, e->node);
    case PEER_ALL:
    default:
      return FALSE;
    }
}

/* ---- ports ---------------------------------------------------------------------------------- */

typedef enum
{
  PROTO_TCP,
  PROTO_UDP,
  PROTO_SCTP,
  PROTO_ANY, /* Cilium's ANY: TCP and UDP at least (SCTP where enabled) */
  PROTO_ALL, /* no ports at all: every protocol, ICMP included */
} Proto;

static const char *const proto_names[] = { "TCP", "UDP", "SCTP", "ANY", "ALL" };

typedef struct
{
  Proto proto;
  const char *name; /* a named port, or NULL */
  gint64 lo, hi;    /* lo == 0: every port */
  JsonNode *rules;  /* the PortRule's `rules` (L7), or NULL */
  JsonArray *server_names;
  char *desc;
} Unit;

static void
unit_free (gpointer data)
{
  Unit *u = data;

  g_free (u->desc);
  g_free (u);
}

static Unit *
unit_new (Proto proto, const char *name, gint64 lo, gint64 hi, JsonNode *rules,
          JsonArray *server_names)
{
  Unit *u = g_new0 (Unit, 1);
  g_autofree char *port = NULL;

  u->proto = proto;
  u->name = name;
  u->lo = lo;
  u->hi = hi;
  u->rules = rules;
  u->server_names = server_names;
  if (proto == PROTO_ALL)
    port = g_strdup ("every port and protocol");
  else if (name != NULL)
    port = g_strdup_printf ("port %s/%s", name, proto_names[proto]);
  else if (lo == 0)
    port = g_strdup_printf ("every %s port", proto_names[proto]);
  else if (lo == hi)
    port = g_strdup_printf ("port %" G_GINT64_FORMAT "/%s", lo, proto_names[proto]);
  else
    port = g_strdup_printf ("ports %" G_GINT64_FORMAT "-%" G_GINT64_FORMAT "/%s", lo, hi,
                            proto_names[proto]);
  u->desc = g_strdup_printf ("%s%s%s", port, server_names != NULL ? " with serverNames" : "",
                             rules != NULL ? " with L7 rules" : " without L7 rules");
  return u;
}

/* A port number or range from JSON (a number, or a string of digits); 0 for none. */
static gboolean
port_number (JsonNode *n, gint64 *out)
{
  const char *s = str_of (n);
  guint64 v = 0;

  if (n == NULL)
    return (*out = 0, TRUE);
  if (s != NULL)
    {
      if (*s == '\0')
        return (*out = 0, TRUE);
      if (!g_ascii_string_to_unsigned (s, 10, 0, 65535, &v, NULL))
        return FALSE;
      return (*out = (gint64)v, TRUE);
    }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_int (n);
  return *out >= 0 && *out <= 65535;
}

/* One port entry ({port?, endPort?, protocol?}) of a NetworkPolicy (@cilium FALSE: protocol
 * TCP by default, port a number or a name) or a CiliumNetworkPolicy PortProtocol (ANY by
 * default, port a string: digits, a name, or "0" for every port). */
static Unit *
unit_read (JsonNode *n, gboolean cilium, JsonNode *rules, JsonArray *server_names)
{
  JsonObject *o = obj_of (n);
  const char *proto = str_of (member (o, "protocol"));
  JsonNode *port = member (o, "port");
  const char *name = str_of (port);
  gint64 lo = 0, hi = 0;
  Proto p;

  if (o == NULL || (member (o, "protocol") != NULL && proto == NULL)
      || nz_json_unknown_member (o, KNOWN ("port", "endPort", "protocol")) != NULL)
    return NULL;
  if (proto == NULL)
    p = cilium ? PROTO_ANY : PROTO_TCP;
  else if (g_str_equal (proto, "TCP"))
    p = PROTO_TCP;
  else if (g_str_equal (proto, "UDP"))
    p = PROTO_UDP;
  else if (g_str_equal (proto, "SCTP"))
    p = PROTO_SCTP;
  else if (cilium && g_str_equal (proto, "ANY"))
    p = PROTO_ANY;
  else
    return NULL;
  if (name != NULL && *name != '\0' && !g_ascii_isdigit (*name))
    {
      /* A named port: the port the destination pod names so. */
      if (member (o, "endPort") != NULL)
        return NULL;
      return unit_new (p, name, 0, 0, rules, server_names);
    }
  if (!port_number (port, &lo) || (lo == 0 && port != NULL && !cilium))
    return NULL;
  hi = lo;
  if (member (o, "endPort") != NULL && (!port_number (member (o, "endPort"), &hi) || hi < lo))
    return NULL;
  return unit_new (p, NULL, lo, lo == 0 ? 0 : hi, rules, server_names);
}

static gboolean
proto_within (Proto c, Proto e)
{
  return c == e || e == PROTO_ALL || (e == PROTO_ANY && (c == PROTO_TCP || c == PROTO_UDP));
}

/* L7: an expected unit with serverNames needs the same or fewer; with DNS rules, DNS rules it
 * covers (none: every name, covered by `*` only); with other L7 rules, the same rules. */
static gboolean
l7_within (const Unit *c, const Unit *e)
{
  if (e->server_names != NULL)
    {
      if (c->server_names == NULL || json_array_get_length (c->server_names) == 0)
        return FALSE;
      for (guint i = 0; i < json_array_get_length (c->server_names); i++)
        {
          const char *cs = str_of (json_array_get_element (c->server_names, i));
          gboolean found = FALSE;

          for (guint j = 0; !found && j < json_array_get_length (e->server_names); j++)
            {
              const char *es = str_of (json_array_get_element (e->server_names, j));

              found = cs != NULL && es != NULL && g_ascii_strcasecmp (cs, es) == 0;
            }
          if (!found)
            return FALSE;
        }
    }
  if (e->rules != NULL)
    {
      JsonObject *er = obj_of (e->rules), *cr = obj_of (c->rules);
      JsonArray *edns = nz_json_get_array (er, "dns"), *cdns = nz_json_get_array (cr, "dns");

      if (edns == NULL || json_object_get_size (er) != 1)
        return c->rules != NULL && json_node_equal (c->rules, e->rules);
      if (cr != NULL && (cdns == NULL || json_object_get_size (cr) != 1))
        return FALSE; /* another L7 parser on the DNS port */
      if (cdns == NULL)
        return dns_allows_all (edns);
      return dns_within (cdns, edns);
    }
  return TRUE;
}

static gboolean
unit_within (const Unit *c, const Unit *e)
{
  if (!proto_within (c->proto, e->proto))
    return FALSE;
  if (e->name == NULL && e->lo == 0)
    return l7_within (c, e);
  if (c->name != NULL || e->name != NULL)
    return c->name != NULL && e->name != NULL && g_str_equal (c->name, e->name) && l7_within (c, e);
  return c->lo != 0 && c->lo >= e->lo && c->hi <= e->hi && l7_within (c, e);
}

/* ---- rules ---------------------------------------------------------------------------------- */

typedef struct
{
  GPtrArray *peers; /* Peer */
  GPtrArray *units; /* Unit */
} Grants;

static Grants *
grants_new (void)
{
  Grants *g = g_new0 (Grants, 1);

  g->peers = g_ptr_array_new_with_free_func (peer_free);
  g->units = g_ptr_array_new_with_free_func (unit_free);
  return g;
}

static void
grants_free (Grants *g)
{
  g_ptr_array_unref (g->peers);
  g_ptr_array_unref (g->units);
  g_free (g);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Grants, grants_free)

/* A CiliumNetworkPolicy PortRule {ports, rules?, serverNames?} into units. */
static gboolean
port_rule_read (JsonNode *n, GPtrArray *units, char **why)
{
  JsonObject *o = obj_of (n);
  JsonNode *ports = member (o, "ports"), *rules = member (o, "rules");
  JsonNode *names = member (o, "serverNames");
  const char *k;

  if (o == NULL || (ports != NULL && !JSON_NODE_HOLDS_ARRAY (ports))
      || (names != NULL && !JSON_NODE_HOLDS_ARRAY (names))
      || (rules != NULL && !JSON_NODE_HOLDS_OBJECT (rules)))
    return (*why = g_strdup ("a toPorts entry this check cannot read"), FALSE);
  if ((k = nz_json_unknown_member (o, KNOWN ("ports", "rules", "serverNames"))) != NULL)
    return (*why = g_strdup_printf ("toPorts member %s, which this check does not read", k), FALSE);
  /* L7 rules only narrow what the port allows; a kind this check does not know is not read. */
  if (rules != NULL
      && (k = nz_json_unknown_member (json_node_get_object (rules),
                                      KNOWN ("dns", "http", "kafka", "l7proto", "l7")))
             != NULL)
    return (*why = g_strdup_printf ("L7 rules %s, which this check does not read", k), FALSE);
  for (guint i = 0; names != NULL && i < json_array_get_length (json_node_get_array (names)); i++)
    if (str_of (json_array_get_element (json_node_get_array (names), i)) == NULL)
      return (*why = g_strdup ("a serverNames entry this check cannot read"), FALSE);
  if (rules != NULL)
    {
      JsonArray *dns = nz_json_get_array (json_node_get_object (rules), "dns");
      gboolean ignored;

      if (member (json_node_get_object (rules), "dns") != NULL && dns == NULL)
        return (*why = g_strdup ("rules.dns that is not a list"), FALSE);
      for (guint i = 0; dns != NULL && i < json_array_get_length (dns); i++)
        {
          g_autofree char *t = fqdn_read (json_array_get_element (dns, i), &ignored);

          if (t == NULL)
            return (*why = g_strdup ("a rules.dns entry this check cannot read"), FALSE);
        }
    }
  if (ports == NULL || json_array_get_length (json_node_get_array (ports)) == 0)
    {
      g_ptr_array_add (units, unit_new (PROTO_ANY, NULL, 0, 0, rules,
                                        names != NULL ? json_node_get_array (names) : NULL));
      return TRUE;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (ports)); i++)
    {
      Unit *u = unit_read (json_array_get_element (json_node_get_array (ports), i), TRUE, rules,
                           names != NULL ? json_node_get_array (names) : NULL);

      if (u == NULL)
        return (*why = g_strdup ("a toPorts port this check cannot read"), FALSE);
      g_ptr_array_add (units, u);
    }
  return TRUE;
}

static const char *const cilium_peer_members[]
    = { "toEndpoints", "toFQDNs",  "toCIDR",  "toCIDRSet",  "toEntities",
        "toServices",  "toGroups", "toNodes", "toRequires", NULL };

/* One destination of a CiliumNetworkPolicy egress rule's member @m. */
static Peer *
cilium_peer (const char *m, JsonNode *n, const char *ns)
{
  g_autofree char *text = nz_json_to_string (n, NULL);
  Peer *p;

  if (g_str_equal (m, "toEndpoints"))
    return endpoints_peer (n, ns);
  if (g_str_equal (m, "toFQDNs"))
    {
      gboolean pattern;
      char *fqdn = fqdn_read (n, &pattern);

      if (fqdn == NULL)
        return NULL;
      p = peer_new (PEER_FQDN, g_strdup_printf ("toFQDNs %s", text));
      p->fqdn = fqdn;
      p->pattern = pattern;
      return p;
    }
  if (g_str_equal (m, "toCIDR"))
    {
      if (str_of (n) == NULL)
        return NULL;
      p = peer_new (PEER_CIDR, g_strdup_printf ("toCIDR %s", str_of (n)));
      p->cidr = str_of (n);
      return p;
    }
  if (g_str_equal (m, "toCIDRSet"))
    {
      JsonObject *o = obj_of (n);
      JsonNode *except = member (o, "except");

      /* cidrGroupRef and cidrGroupSelector name addresses kept elsewhere: unread. */
      if (str_of (member (o, "cidr")) == NULL
          || json_object_get_size (o) != (except != NULL ? 2u : 1u)
          || (except != NULL && !JSON_NODE_HOLDS_ARRAY (except)))
        return NULL;
      p = peer_new (PEER_CIDR, g_strdup_printf ("toCIDRSet %s", text));
      p->cidr = str_of (member (o, "cidr"));
      p->except = except != NULL ? json_node_get_array (except) : NULL;
      return p;
    }
  p = peer_new (PEER_OPAQUE, g_strdup_printf ("%s %s", m, text));
  p->member = m;
  p->node = n;
  return p;
}

/* A CiliumNetworkPolicy egress rule into @g. FALSE with @why when it holds a member or entry
 * this check does not read. A rule with neither destinations nor toPorts (`{}`) grants
 * nothing: Cilium's idiom for default deny. */
static gboolean
cilium_rule_read (JsonObject *r, const char *ns, Grants *g, char **why)
{
  JsonNode *to_ports = member (r, "toPorts");
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  json_object_iter_init (&it, r);
  while (json_object_iter_next (&it, &k, &v))
    {
      const char *m = NULL;
      JsonArray *entries;

      for (guint i = 0; cilium_peer_members[i] != NULL; i++)
        if (g_str_equal (k, cilium_peer_members[i]))
          m = cilium_peer_members[i];
      if (m == NULL && g_str_equal (k, "toPorts"))
        continue;
      if (m == NULL)
        return (*why = g_strdup_printf ("member %s, which this check does not read", k), FALSE);
      if (JSON_NODE_HOLDS_NULL (v))
        continue;
      if (!JSON_NODE_HOLDS_ARRAY (v))
        return (*why = g_strdup_printf ("%s that is not a list", m), FALSE);
      entries = json_node_get_array (v);
      for (guint i = 0; i < json_array_get_length (entries); i++)
        {
          Peer *p = cilium_peer (m, json_array_get_element (entries, i), ns);

          if (p == NULL)
            return (*why = g_strdup_printf ("a %s entry this check cannot read", m), FALSE);
          g_ptr_array_add (g->peers, p);
        }
    }
  if (g->peers->len == 0 && to_ports == NULL)
    return TRUE;
  if (g->peers->len == 0)
    g_ptr_array_add (g->peers, peer_new (PEER_ALL, g_strdup ("every destination (toPorts alone)")));
  if (to_ports != NULL && !JSON_NODE_HOLDS_ARRAY (to_ports))
    return (*why = g_strdup ("toPorts that is not a list"), FALSE);
  for (guint i = 0; to_ports != NULL && i < json_array_get_length (json_node_get_array (to_ports));
       i++)
    if (!port_rule_read (json_array_get_element (json_node_get_array (to_ports), i), g->units, why))
      return FALSE;
  if (g->units->len == 0)
    g_ptr_array_add (g->units, unit_new (PROTO_ALL, NULL, 0, 0, NULL, NULL));
  return TRUE;
}

/* A NetworkPolicy egress rule ({to?, ports?}) into @g; no `to` is everywhere, no ports every
 * port. */
static gboolean
np_rule_read (JsonObject *r, const char *ns, Grants *g, char **why)
{
  JsonNode *to = member (r, "to"), *ports = member (r, "ports");
  const char *k;

  if ((k = nz_json_unknown_member (r, KNOWN ("to", "ports"))) != NULL)
    return (*why = g_strdup_printf ("member %s, which this check does not read", k), FALSE);
  if ((to != NULL && !JSON_NODE_HOLDS_ARRAY (to))
      || (ports != NULL && !JSON_NODE_HOLDS_ARRAY (ports)))
    return (*why = g_strdup ("to or ports that is not a list"), FALSE);
  for (guint i = 0; to != NULL && i < json_array_get_length (json_node_get_array (to)); i++)
    {
      Peer *p = np_peer (json_array_get_element (json_node_get_array (to), i), ns);

      if (p == NULL)
        return (*why = g_strdup ("a `to` peer this check cannot read"), FALSE);
      g_ptr_array_add (g->peers, p);
    }
  if (g->peers->len == 0)
    g_ptr_array_add (g->peers, peer_new (PEER_ALL, g_strdup ("every destination (no `to`)")));
  for (guint i = 0; ports != NULL && i < json_array_get_length (json_node_get_array (ports)); i++)
    {
      Unit *u
          = unit_read (json_array_get_element (json_node_get_array (ports), i), FALSE, NULL, NULL);

      if (u == NULL)
        return (*why = g_strdup ("a port this check cannot read"), FALSE);
      g_ptr_array_add (g->units, u);
    }
  if (g->units->len == 0)
    g_ptr_array_add (g->units, unit_new (PROTO_ALL, NULL, 0, 0, NULL, NULL));
  return TRUE;
}

/* The expected translation's rules as grants (a rule this cannot read grants nothing). */
static GPtrArray *
expected_grants (JsonObject *expected, gboolean cilium, const char *ns)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify)grants_free);
  JsonArray *rules = nz_json_get_array (obj_of (member (expected, "spec")), "egress");

  for (guint i = 0; rules != NULL && i < json_array_get_length (rules); i++)
    {
      JsonObject *r = obj_of (json_array_get_element (rules, i));
      g_autoptr (Grants) g = grants_new ();
      g_autofree char *why = NULL;

      if (r != NULL && (cilium ? cilium_rule_read (r, ns, g, &why) : np_rule_read (r, ns, g, &why)))
        g_ptr_array_add (out, g_steal_pointer (&g));
    }
  return out;
}

/* NULL when every (peer, unit) of @c lies within a peer and a unit of one rule of @want, else
 * the first that does not (new). */
static char *
grants_uncovered (Grants *c, GPtrArray *want)
{
  for (guint i = 0; i < c->peers->len; i++)
    for (guint j = 0; j < c->units->len; j++)
      {
        const Peer *cp = g_ptr_array_index (c->peers, i);
        const Unit *cu = g_ptr_array_index (c->units, j);
        gboolean covered = FALSE;

        for (guint w = 0; !covered && w < want->len; w++)
          {
            Grants *e = g_ptr_array_index (want, w);
            gboolean peer = FALSE, unit = FALSE;

            for (guint p = 0; !peer && p < e->peers->len; p++)
              peer = peer_within (cp, g_ptr_array_index (e->peers, p));
            for (guint u = 0; peer && !unit && u < e->units->len; u++)
              unit = unit_within (cu, g_ptr_array_index (e->units, u));
            covered = peer && unit;
          }
        if (!covered)
          return g_strdup_printf ("%s on %s", cp->desc, cu->desc);
      }
  return NULL;
}

/* ---- policies ------------------------------------------------------------------------------- */

typedef struct
{
  GPtrArray *want;
  const char *named;
  const char *ns;
  JsonObject *pod_labels;
} Judge;

/* Judges @rules (an egress list, or NULL) of @kind @name (`specs[@specs]`). */
static gboolean
judge_rules (Judge *j, JsonNode *rules, gboolean cilium, const char *name, int specs,
             GError **error)
{
  JsonArray *list;
  const char *kind = cilium ? "CiliumNetworkPolicy" : "NetworkPolicy";

  if (rules == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (rules))
    return nz_kube_union_widens (error, kind, name, specs, 0, j->named,
                                 "egress that is not a list");
  list = json_node_get_array (rules);
  for (guint i = 0; i < json_array_get_length (list); i++)
    {
      JsonObject *r = obj_of (json_array_get_element (list, i));
      g_autoptr (Grants) g = grants_new ();
      g_autofree char *why = NULL;

      if (r == NULL)
        why = g_strdup ("not an object");
      else if (cilium ? cilium_rule_read (r, j->ns, g, &why) : np_rule_read (r, j->ns, g, &why))
        why = grants_uncovered (g, j->want);
      if (why != NULL)
        return nz_kube_union_widens (error, kind, name, specs, i + 1, j->named, why);
    }
  return TRUE;
}

static const char *const cilium_rule_members[] = {
  "endpointSelector", "nodeSelector", "ingress",           "ingressDeny", "egress", "egressDeny",
  "labels",           "description",  "enableDefaultDeny", "log",         NULL
};

/* One CiliumNetworkPolicy rule (its `spec`, or `specs[@specs]`). */
static gboolean
judge_cilium_rule (Judge *j, JsonNode *n, const char *name, int specs, GError **error)
{
  JsonObject *r = obj_of (n);
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  if (r == NULL)
    return nz_kube_union_widens (error, "CiliumNetworkPolicy", name, specs, 0, j->named,
                                 "a rule that is not an object");
  json_object_iter_init (&it, r);
  while (json_object_iter_next (&it, &k, &v))
    if (!g_strv_contains (cilium_rule_members, k))
      {
        g_autofree char *why = g_strdup_printf ("member %s, which this check does not read", k);

        return nz_kube_union_widens (error, "CiliumNetworkPolicy", name, specs, 0, j->named, why);
      }
  /* Without an endpointSelector (a nodeSelector rule, which a namespaced policy may not
   * have) the rule is judged as if it selected the pods. */
  if (member (r, "endpointSelector") != NULL
      && !nz_kube_egress_endpoint_selector_matches (obj_of (member (r, "endpointSelector")),
                                                    j->pod_labels, j->ns))
    return TRUE;
  return judge_rules (j, member (r, "egress"), TRUE, name, specs, error);
}

static const char *
name_of (JsonObject *policy)
{
  return nz_json_get_string (obj_of (member (policy, "metadata")), "name");
}

gboolean
nz_kube_union_check_cilium (JsonArray *policies, JsonArray *cilium_policies, const char *ns,
                            JsonObject *pod_labels, JsonObject *expected, GError **error)
{
  gboolean want_cilium
      = g_strcmp0 (nz_json_get_string (expected, "kind"), "CiliumNetworkPolicy") == 0;
  g_autoptr (GPtrArray) want = NULL;
  Judge j = { NULL, name_of (expected), ns, pod_labels };

  g_return_val_if_fail (ns != NULL && expected != NULL, FALSE);
  want = expected_grants (expected, want_cilium, ns);
  j.want = want;
  for (guint i = 0; policies != NULL && i < json_array_get_length (policies); i++)
    {
      JsonObject *p = obj_of (json_array_get_element (policies, i));
      JsonObject *spec = obj_of (member (p, "spec"));
      const char *name = name_of (p);

      if (p == NULL)
        return nz_kube_union_widens (error, "NetworkPolicy", NULL, -1, 0, j.named, "not an object");
      if (!want_cilium && name != NULL && g_strcmp0 (name, j.named) == 0)
        continue;
      if (spec == NULL)
        return nz_kube_union_widens (error, "NetworkPolicy", name, -1, 0, j.named,
                                     "no spec this check can read");
      if (!nz_kube_union_has_egress_type (spec)
          || !nz_kube_egress_selector_matches (obj_of (member (spec, "podSelector")), pod_labels))
        continue;
      if (!judge_rules (&j, member (spec, "egress"), FALSE, name, -1, error))
        return FALSE;
    }
  for (guint i = 0; cilium_policies != NULL && i < json_array_get_length (cilium_policies); i++)
    {
      JsonObject *p = obj_of (json_array_get_element (cilium_policies, i));
      JsonNode *specs = member (p, "specs");
      const char *name = name_of (p);

      if (p == NULL)
        return nz_kube_union_widens (error, "CiliumNetworkPolicy", NULL, -1, 0, j.named,
                                     "not an object");
      if (want_cilium && name != NULL && g_strcmp0 (name, j.named) == 0)
        continue;
      if (member (p, "spec") != NULL
          && !judge_cilium_rule (&j, member (p, "spec"), name, -1, error))
        return FALSE;
      if (specs != NULL && !JSON_NODE_HOLDS_ARRAY (specs))
        return nz_kube_union_widens (error, "CiliumNetworkPolicy", name, -1, 0, j.named,
                                     "specs that is not a list");
      for (guint s = 0; specs != NULL && s < json_array_get_length (json_node_get_array (specs));
           s++)
        if (!judge_cilium_rule (&j, json_array_get_element (json_node_get_array (specs), s), name,
                                (int)s, error))
          return FALSE;
    }
  return TRUE;
}
