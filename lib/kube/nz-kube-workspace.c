/* nz-kube-workspace.c: see nz-kube-workspace.h (spec D.5, D.8). */
#include "nz-kube-workspace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nz-json.h"

G_DEFINE_QUARK (nz - kube - workspace - error - quark, nz_kube_workspace_error)

gboolean
nz_kube_workspace_check_id (const char *id, GError **error)
{
  gsize len = id ? strlen (id) : 0;
  gboolean ok = len > 0 && len <= NZ_KUBE_WORKSPACE_ID_MAX && id[0] != '-' && id[len - 1] != '-';

  for (gsize i = 0; ok && i < len; i++)
    ok = g_ascii_islower (id[i]) || g_ascii_isdigit (id[i]) || id[i] == '-';
  if (!ok)
    g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_INVALID_ID,
                 "workspaceId must match ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ and be at most %d "
                 "characters",
                 NZ_KUBE_WORKSPACE_ID_MAX);
  return ok;
}

char *
nz_kube_workspace_name (const char *id, GError **error)
{
  if (!nz_kube_workspace_check_id (id, error))
    return NULL;
  return g_strconcat (NZ_KUBE_WORKSPACE_NAME_PREFIX, id, NULL);
}

/* TRUE when a @list_member ("volumeDevices"/"volumeMounts") entry of any container or
 * initContainer of @pod_spec names @name. */
static gboolean
pod_spec_references (JsonObject *pod_spec, const char *list_member, const char *name)
{
  static const char *const kinds[] = { "containers", "initContainers" };

  for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
    {
      JsonArray *cs = nz_json_get_array (pod_spec, kinds[k]);

      for (guint i = 0; cs && i < json_array_get_length (cs); i++)
        {
          JsonNode *c = json_array_get_element (cs, i);
          JsonArray *refs;

          if (!JSON_NODE_HOLDS_OBJECT (c))
            continue;
          refs = nz_json_get_array (json_node_get_object (c), list_member);
          for (guint j = 0; refs && j < json_array_get_length (refs); j++)
            {
              JsonNode *r = json_array_get_element (refs, j);

              if (JSON_NODE_HOLDS_OBJECT (r)
                  && g_strcmp0 (nz_json_get_string (json_node_get_object (r), "name"), name) == 0)
                return TRUE;
            }
        }
    }
  return FALSE;
}

static gboolean
disk_error (GError **error, const char *source, const char *reason)
{
  g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_DISK,
               "%s: a workspace needs a Block-mode disk: %s", source, reason);
  return FALSE;
}

gboolean
nz_kube_workspace_assert_block_disk (const char *source, JsonObject *spec, GError **error)
{
  JsonArray *vcts = spec ? nz_json_get_array (spec, "volumeClaimTemplates") : NULL;
  JsonObject *pt = spec ? nz_json_get_object (spec, "podTemplate") : NULL;
  JsonObject *pod_spec = pt ? nz_json_get_object (pt, "spec") : NULL;

  if (vcts == NULL || json_array_get_length (vcts) == 0)
    return disk_error (error, source, "spec.volumeClaimTemplates is missing or empty");
  if (pod_spec == NULL)
    return disk_error (error, source, "spec.podTemplate.spec is missing");
  for (guint i = 0; i < json_array_get_length (vcts); i++)
    {
      JsonNode *v = json_array_get_element (vcts, i);
      JsonObject *vo = JSON_NODE_HOLDS_OBJECT (v) ? json_node_get_object (v) : NULL;
      JsonObject *meta = vo ? nz_json_get_object (vo, "metadata") : NULL;
      JsonObject *vspec = vo ? nz_json_get_object (vo, "spec") : NULL;
      const char *name = meta ? nz_json_get_string (meta, "name") : NULL;
      g_autofree char *why = NULL;

      if (name == NULL || name[0] == '\0')
        why = g_strdup_printf ("volumeClaimTemplates[%u] has no metadata.name", i);
      else if (vspec == NULL || g_strcmp0 (nz_json_get_string (vspec, "volumeMode"), "Block") != 0)
        why = g_strdup_printf ("volumeClaimTemplate %s must have spec.volumeMode Block", name);
      else if (pod_spec_references (pod_spec, "volumeMounts", name))
        why = g_strdup_printf ("volumeClaimTemplate %s is referenced by volumeMounts (a Block "
                               "disk is a volumeDevices entry)",
                               name);
      else if (!pod_spec_references (pod_spec, "volumeDevices", name))
        why = g_strdup_printf ("volumeClaimTemplate %s is not referenced by any container or "
                               "initContainer volumeDevices entry",
                               name);
      if (why)
        return disk_error (error, source, why);
    }
  return TRUE;
}

/* JS Number.prototype.toString (ECMA-262 Number::toString) of a finite @d. */
static void
append_js_number (GString *out, double d)
{
  char buf[64];
  char digits[32];
  int k = 0, n, p;

  if (!isfinite (d))
    {
      g_string_append (out, "null"); /* JSON.stringify */
      return;
    }
  if (d == 0)
    {
      g_string_append_c (out, '0'); /* -0 too */
      return;
    }
  if (d < 0)
    {
      g_string_append_c (out, '-');
      d = -d;
    }
  /* The shortest precision that round-trips. */
  for (p = 1; p <= 17; p++)
    {
      g_snprintf (buf, sizeof buf, "%.*e", p - 1, d);
      if (g_ascii_strtod (buf, NULL) == d)
        break;
    }
  for (const char *c = buf; *c && *c != 'e'; c++)
    if (g_ascii_isdigit (*c))
      digits[k++] = *c;
  while (k > 1 && digits[k - 1] == '0')
    k--;
  digits[k] = '\0';
  n = atoi (strchr (buf, 'e') + 1) + 1;
  if (k <= n && n <= 21)
    {
      g_string_append (out, digits);
      for (int i = k; i < n; i++)
        g_string_append_c (out, '0');
    }
  else if (0 < n && n <= 21)
    {
      g_string_append_len (out, digits, n);
      g_string_append_c (out, '.');
      g_string_append (out, digits + n);
    }
  else if (-6 < n && n <= 0)
    {
      g_string_append (out, "0.");
      for (int i = 0; i < -n; i++)
        g_string_append_c (out, '0');
      g_string_append (out, digits);
    }
  else
    {
      g_string_append_c (out, digits[0]);
      if (k > 1)
        {
          g_string_append_c (out, '.');
          g_string_append (out, digits + 1);
        }
      g_string_append_printf (out, "e%c%d", n - 1 >= 0 ? '+' : '-', abs (n - 1));
    }
}

static void
append_js_string (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (const guchar *c = (const guchar *)s; *c; c++)
    nz_json_append_escaped_byte (out, *c);
  g_string_append_c (out, '"');
}

/* Object keys ordered by UTF-16 code unit, as JS's default sort compares strings. */
static int
utf16_compare (gconstpointer a, gconstpointer b)
{
  const char *sa = *(const char *const *)a, *sb = *(const char *const *)b;
  g_autofree gunichar2 *ua = g_utf8_to_utf16 (sa, -1, NULL, NULL, NULL);
  g_autofree gunichar2 *ub = g_utf8_to_utf16 (sb, -1, NULL, NULL, NULL);

  if (ua == NULL || ub == NULL) /* not UTF-8: byte order, deterministic */
    return strcmp (sa, sb);
  for (gsize i = 0;; i++)
    {
      if (ua[i] != ub[i])
        return (int)ua[i] - (int)ub[i];
      if (ua[i] == 0)
        return 0;
    }
}

static void
append_canonical (GString *out, JsonNode *n)
{
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    {
      g_string_append (out, "null");
      return;
    }
  if (JSON_NODE_HOLDS_OBJECT (n))
    {
      JsonObject *o = json_node_get_object (n);
      GList *members = json_object_get_members (o);
      g_autoptr (GPtrArray) keys = g_ptr_array_new ();

      for (GList *l = members; l; l = l->next)
        g_ptr_array_add (keys, l->data);
      g_list_free (members);
      g_ptr_array_sort (keys, utf16_compare);
      g_string_append_c (out, '{');
      for (guint i = 0; i < keys->len; i++)
        {
          if (i > 0)
            g_string_append_c (out, ',');
          append_js_string (out, keys->pdata[i]);
          g_string_append_c (out, ':');
          append_canonical (out, json_object_get_member (o, keys->pdata[i]));
        }
      g_string_append_c (out, '}');
      return;
    }
  if (JSON_NODE_HOLDS_ARRAY (n))
    {
      JsonArray *a = json_node_get_array (n);

      g_string_append_c (out, '[');
      for (guint i = 0; i < json_array_get_length (a); i++)
        {
          if (i > 0)
            g_string_append_c (out, ',');
          append_canonical (out, json_array_get_element (a, i));
        }
      g_string_append_c (out, ']');
      return;
    }
  switch (json_node_get_value_type (n))
    {
    case G_TYPE_STRING:
      append_js_string (out, json_node_get_string (n));
      break;
    case G_TYPE_BOOLEAN:
      g_string_append (out, json_node_get_boolean (n) ? "true" : "false");
      break;
    case G_TYPE_INT64:
      /* A JS number: integers beyond 2^53 are doubles there. */
      if (llabs (json_node_get_int (n)) < (1LL << 53))
        g_string_append_printf (out, "%" G_GINT64_FORMAT, json_node_get_int (n));
      else
        append_js_number (out, (double)json_node_get_int (n));
      break;
    default:
      append_js_number (out, json_node_get_double (n));
      break;
    }
}

char *
nz_kube_canonical_json (JsonNode *node)
{
  GString *out = g_string_new (NULL);

  append_canonical (out, node);
  return g_string_free (out, FALSE);
}

char *
nz_kube_pod_template_hash (JsonNode *pod_template)
{
  g_autofree char *text = nz_kube_canonical_json (pod_template);
  g_autofree char *hex = g_compute_checksum_for_string (G_CHECKSUM_SHA256, text, -1);

  return g_strconcat ("sha256:", hex, NULL);
}

gboolean
nz_kube_holder_epoch_parse (const char *annotation, guint64 *out)
{
  gsize len;

  *out = 0;
  if (annotation == NULL)
    return TRUE;
  len = strlen (annotation);
  if (len == 0 || len > 16 || (annotation[0] == '0' && len > 1))
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isdigit (annotation[i]))
      return FALSE;
  *out = g_ascii_strtoull (annotation, NULL, 10);
  if (*out > 9007199254740991ULL) /* Number.MAX_SAFE_INTEGER */
    return FALSE;
  return TRUE;
}

char *
nz_kube_workspace_path (const char *ns, const char *workspace_id, GError **error)
{
  g_autofree char *name = nz_kube_workspace_name (workspace_id, error);

  if (name == NULL)
    return NULL;
  return nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, ns, "sandboxes",
                       name);
}

static JsonObject *
object_at (JsonObject *obj, const char *a, const char *b)
{
  JsonObject *o = obj ? nz_json_get_object (obj, a) : NULL;

  return o && b ? nz_json_get_object (o, b) : o;
}

static const char *
annotation_of (JsonObject *sandbox, const char *key)
{
  JsonObject *ann = object_at (sandbox, "metadata", "annotations");

  return ann ? nz_json_get_string (ann, key) : NULL;
}

static const char *
mode_of (JsonObject *sandbox)
{
  const char *m = nz_json_get_string (object_at (sandbox, "spec", NULL), "operatingMode");

  return m ? m : "Running"; /* D.8.4: absent means Running */
}

gboolean
nz_kube_workspace_stored_epoch (JsonObject *sandbox, guint64 *out, const char **annotation)
{
  const char *a = annotation_of (sandbox, NZ_KUBE_HOLDER_EPOCH_ANNOTATION);

  if (annotation)
    *annotation = a;
  return nz_kube_holder_epoch_parse (a, out);
}

gboolean
nz_kube_workspace_check_epoch (JsonObject *sandbox, const char *operation, const char *workspace_id,
                               guint64 epoch, GError **error)
{
  const char *name = nz_json_get_string (object_at (sandbox, "metadata", NULL), "name");
  const char *ann;
  guint64 stored;

  if (!nz_kube_workspace_stored_epoch (sandbox, &stored, &ann))
    {
      g_set_error (
          error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION,
          "kubernetes workspace %s: %s refused: the stored " NZ_KUBE_HOLDER_EPOCH_ANNOTATION
          " annotation \"%s\" of %s is unreadable",
          workspace_id, operation, ann, name ? name : "?");
      return FALSE;
    }
  if (stored > epoch)
    {
      g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION,
                   "kubernetes workspace %s: %s refused: holder epoch %" G_GUINT64_FORMAT
                   " is behind the stored epoch %" G_GUINT64_FORMAT " of %s",
                   workspace_id, operation, epoch, stored, name ? name : "?");
      return FALSE;
    }
  return TRUE;
}

static char *
pointer_escape (const char *key)
{
  GString *out = g_string_new (NULL);

  for (const char *c = key; *c; c++)
    if (*c == '~')
      g_string_append (out, "~0");
    else if (*c == '/')
      g_string_append (out, "~1");
    else
      g_string_append_c (out, *c);
  return g_string_free (out, FALSE);
}

static void
add_op (JsonArray *ops, const char *op, const char *path, JsonNode *value)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "op", op);
  json_object_set_string_member (o, "path", path);
  json_object_set_member (o, "value", value);
  json_array_add_object_element (ops, o);
}

static JsonNode *
string_node (const char *s)
{
  JsonNode *n = json_node_new (JSON_NODE_VALUE);

  json_node_set_string (n, s);
  return n;
}

static char *
now_or (const char *now)
{
  return now ? g_strdup (now) : nz_json_format_time_ms (g_get_real_time () / 1000);
}

/* @fenced FALSE: no fence test and no epoch annotation (an unfenced refresh). */
static JsonArray *
build_patch (JsonObject *current, gboolean fenced, guint64 epoch, const NzKubeWorkspaceWrite *w)
{
  JsonArray *ops = json_array_new ();
  JsonObject *ann = object_at (current, "metadata", "annotations");
  const char *stored = annotation_of (current, NZ_KUBE_HOLDER_EPOCH_ANNOTATION);
  const char *rv = nz_json_get_string (object_at (current, "metadata", NULL), "resourceVersion");
  gboolean changes_mode
      = w->operating_mode && g_strcmp0 (w->operating_mode, mode_of (current)) != 0;
  g_autoptr (JsonObject) adds = json_object_new (); /* key -> value, in order */
  g_autofree char *hash = w->pod_template ? nz_kube_pod_template_hash (w->pod_template) : NULL;
  g_autofree char *epoch_s = g_strdup_printf ("%" G_GUINT64_FORMAT, epoch);
  g_autofree char *now = changes_mode ? now_or (w->now) : NULL;
  gboolean rv_tested = FALSE;

  /* Tests first. */
  if (fenced && stored)
    add_op (ops, "test", "/metadata/annotations/sandbox.namzu.ai~1holder-epoch",
            string_node (stored));
  else if (fenced || ann == NULL)
    {
      add_op (ops, "test", "/metadata/resourceVersion", string_node (rv ? rv : ""));
      rv_tested = TRUE;
    }
  if (w->require_suspended)
    add_op (ops, "test", "/spec/operatingMode", string_node ("Suspended"));
  (void)rv_tested;

  /* Then the mutations. */
  if (fenced)
    json_object_set_string_member (adds, NZ_KUBE_HOLDER_EPOCH_ANNOTATION, epoch_s);
  if (now)
    json_object_set_string_member (adds, NZ_KUBE_MODE_CHANGED_AT_ANNOTATION, now);
  if (hash)
    json_object_set_string_member (adds, NZ_KUBE_POD_TEMPLATE_HASH_ANNOTATION, hash);
  if (ann == NULL)
    {
      JsonNode *map = json_node_new (JSON_NODE_OBJECT);

      json_node_set_object (map, adds);
      add_op (ops, "add", "/metadata/annotations", map);
    }
  else
    {
      GList *keys = json_object_get_members (adds);

      for (GList *l = keys; l; l = l->next)
        {
          g_autofree char *esc = pointer_escape (l->data);
          g_autofree char *path = g_strconcat ("/metadata/annotations/", esc, NULL);

          add_op (ops, "add", path, string_node (json_object_get_string_member (adds, l->data)));
        }
      g_list_free (keys);
    }
  if (w->pod_template)
    add_op (ops, "add", "/spec/podTemplate", json_node_copy (w->pod_template));
  if (changes_mode)
    add_op (ops, "add", "/spec/operatingMode", string_node (w->operating_mode));
  return ops;
}

JsonArray *
nz_kube_workspace_fenced_patch (JsonObject *current, guint64 epoch, const NzKubeWorkspaceWrite *w)
{
  return build_patch (current, TRUE, epoch, w);
}

JsonObject *
nz_kube_workspace_merge_patch_body (JsonObject *current, const char *mode, const char *now)
{
  JsonObject *body = json_object_new ();
  JsonObject *spec = json_object_new ();

  if (g_strcmp0 (mode, mode_of (current)) != 0)
    {
      JsonObject *meta = json_object_new ();
      JsonObject *ann = json_object_new ();
      g_autofree char *at = now_or (now);

      json_object_set_string_member (ann, NZ_KUBE_MODE_CHANGED_AT_ANNOTATION, at);
      json_object_set_object_member (meta, "annotations", ann);
      json_object_set_object_member (body, "metadata", meta);
    }
  json_object_set_string_member (spec, "operatingMode", mode);
  json_object_set_object_member (body, "spec", spec);
  return body;
}

/* The value the fence test of a patch built on @current compares: the epoch annotation when
 * present, else the resourceVersion. */
static const char *
fence_value (JsonObject *current, JsonObject *of)
{
  if (annotation_of (current, NZ_KUBE_HOLDER_EPOCH_ANNOTATION))
    return annotation_of (of, NZ_KUBE_HOLDER_EPOCH_ANNOTATION);
  return nz_json_get_string (object_at (of, "metadata", NULL), "resourceVersion");
}

JsonObject *
nz_kube_workspace_write (NzKubeClient *client, const char *ns, const char *workspace_id,
                         const char *operation, gint64 epoch, const NzKubeWorkspaceWrite *w,
                         JsonObject *current, gboolean *applied, GError **error)
{
  g_autofree char *path = nz_kube_workspace_path (ns, workspace_id, error);
  g_autoptr (JsonObject) cur = current ? json_object_ref (current) : NULL;
  gboolean fenced = epoch >= 0;

  if (applied)
    *applied = FALSE;
  if (path == NULL)
    return NULL;
  if (!fenced && w->pod_template == NULL && !w->require_suspended)
    {
      g_autoptr (JsonObject) body = NULL;
      JsonObject *res;

      if (w->operating_mode == NULL)
        return cur ? g_steal_pointer (&cur) : nz_kube_get (client, path, error);
      body = nz_kube_workspace_merge_patch_body (cur, w->operating_mode, w->now);
      res = nz_kube_merge_patch (client, path, body, error);
      if (res && applied)
        *applied = TRUE;
      return res;
    }
  for (guint attempt = 1;; attempt++)
    {
      g_autoptr (JsonArray) ops = NULL;
      g_autoptr (JsonObject) reread = NULL;
      g_autoptr (GError) local = NULL;
      JsonObject *res;

      if (cur == NULL && (cur = nz_kube_get (client, path, error)) == NULL)
        return NULL;
      if (fenced && !nz_kube_workspace_check_epoch (cur, operation, workspace_id, epoch, error))
        return NULL;
      if (w->require_suspended && g_strcmp0 (mode_of (cur), "Suspended") != 0)
        return g_steal_pointer (&cur); /* D.8.9: applied FALSE */
      ops = build_patch (cur, fenced, fenced ? (guint64)epoch : 0, w);
      res = nz_kube_json_patch (client, path, ops, &local);
      if (res)
        {
          if (applied)
            *applied = TRUE;
          return res;
        }
      if (!g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_PATCH_NOT_APPLIED)
          || (reread = nz_kube_get (client, path, error)) == NULL)
        {
          if (local)
            g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
      if (w->require_suspended && g_strcmp0 (mode_of (reread), "Suspended") != 0)
        {
          if (fenced
              && !nz_kube_workspace_check_epoch (reread, operation, workspace_id, epoch, error))
            return NULL;
          return g_steal_pointer (&reread);
        }
      /* The tested value did not move: the 422 stands (nothing to retry on). */
      if (g_strcmp0 (fence_value (cur, cur), fence_value (cur, reread)) == 0
          || attempt >= NZ_KUBE_HOLDER_EPOCH_WRITE_ATTEMPTS)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
      g_clear_pointer (&cur, json_object_unref);
      cur = g_steal_pointer (&reread); /* re-checked against the epoch at the loop's top */
    }
}

gboolean
nz_kube_workspace_delete (NzKubeClient *client, const char *ns, const char *workspace_id,
                          gint64 epoch, GError **error)
{
  g_autofree char *path = nz_kube_workspace_path (ns, workspace_id, error);
  GError *local = NULL;

  if (path == NULL)
    return FALSE;
  for (guint attempt = 1;; attempt++)
    {
      g_autoptr (JsonObject) cur = NULL;
      const char *rv = NULL;

      if (epoch >= 0)
        {
          if ((cur = nz_kube_get (client, path, &local)) == NULL)
            break;
          if (!nz_kube_workspace_check_epoch (cur, "delete", workspace_id, (guint64)epoch, error))
            return FALSE;
          rv = nz_json_get_string (object_at (cur, "metadata", NULL), "resourceVersion");
        }
      if (nz_kube_delete (client, path, rv, &local))
        return TRUE;
      if (epoch < 0 || !g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFLICT)
          || attempt > NZ_KUBE_FENCED_DELETE_RETRIES)
        break;
      g_clear_error (&local);
    }
  if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
    {
      g_error_free (local);
      return TRUE;
    }
  g_propagate_error (error, local);
  return FALSE;
}
