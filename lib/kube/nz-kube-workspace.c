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
    {
      g_autofree char *shown = g_strescape (id != NULL ? id : "", NULL);

      g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_INVALID_ID,
                   "workspaceId '%.80s' refused: workspaceId must match "
                   "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ and be at most %d characters",
                   shown, NZ_KUBE_WORKSPACE_ID_MAX);
    }
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
                          gint64 epoch, JsonObject *current, GError **error)
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
          if (attempt == 1 && current)
            cur = json_object_ref (current);
          else if ((cur = nz_kube_get (client, path, &local)) == NULL)
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

/* ---- Create and adopt ---- */

void
nz_kube_workspace_mismatch_free (NzKubeWorkspaceMismatch *m)
{
  if (m == NULL)
    return;
  g_free (m->sandbox_name);
  g_free (m->field);
  g_free (m->expected);
  g_free (m->actual);
  g_free (m);
}

void
nz_kube_workspace_opened_free (NzKubeWorkspaceOpened *o)
{
  if (o == NULL)
    return;
  g_free (o->sandbox_name);
  g_free (o->origin);
  g_clear_pointer (&o->sandbox, json_object_unref);
  g_free (o->draining_pod_uid);
  g_free (o);
}

static JsonObject *
get_template (NzKubeClient *client, const NzKubeWorkspaceSpec *spec, GError **error)
{
  g_autofree char *path
      = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, spec->ns,
                      "sandboxtemplates", spec->template_name);
  g_autoptr (JsonObject) t = nz_kube_get (client, path, error);
  g_autofree char *source = g_strdup_printf ("sandboxtemplate %s", spec->template_name);

  if (t == NULL)
    return NULL;
  if (!nz_kube_workspace_assert_block_disk (source, nz_json_get_object (t, "spec"), error))
    return NULL;
  return g_steal_pointer (&t);
}

static const char *
profile_key (const NzKubeWorkspaceSpec *spec)
{
  return spec->profile_label_key ? spec->profile_label_key : NZ_KUBE_EGRESS_PROFILE_LABEL_KEY;
}

/* The template's podTemplate with the template and profile labels (D.8.3 step 4). */
static JsonNode *
labelled_pod_template (JsonObject *tmpl, const NzKubeWorkspaceSpec *spec)
{
  JsonObject *pt = object_at (tmpl, "spec", "podTemplate");
  g_autoptr (JsonNode) src = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonParser) p = json_parser_new ();
  g_autofree char *text = NULL;
  JsonNode *copy;
  JsonObject *o, *meta, *labels;

  /* A deep copy (json_node_copy shares the object): the labels are edited. */
  json_node_take_object (src, pt ? json_object_ref (pt) : json_object_new ());
  text = nz_json_to_string (src, NULL);
  if (!json_parser_load_from_data (p, text, -1, NULL))
    g_assert_not_reached ();
  copy = json_node_copy (json_parser_get_root (p));
  o = json_node_get_object (copy);
  if ((meta = nz_json_get_object (o, "metadata")) == NULL)
    {
      meta = json_object_new ();
      json_object_set_object_member (o, "metadata", meta);
    }
  if ((labels = nz_json_get_object (meta, "labels")) == NULL)
    {
      labels = json_object_new ();
      json_object_set_object_member (meta, "labels", labels);
    }
  json_object_set_string_member (labels, NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY, spec->template_name);
  if (spec->egress_profile)
    json_object_set_string_member (labels, profile_key (spec), spec->egress_profile);
  return copy;
}

static gboolean
check_spec (const NzKubeWorkspaceSpec *spec, GError **error)
{
  if (!nz_kube_workspace_check_id (spec->workspace_id, error))
    return FALSE;
  if (spec->epoch < NZ_KUBE_NO_EPOCH || spec->epoch > 9007199254740991LL)
    {
      g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_CONFIG,
                   "kubernetes workspace %s: the epoch must be a non-negative safe integer",
                   spec->workspace_id);
      return FALSE;
    }
  if (spec->per_sandbox_egress)
    {
      g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_CONFIG,
                   "kubernetes workspace %s: perSandbox egress is not supported on a workspace",
                   spec->workspace_id);
      return FALSE;
    }
  if (spec->template_name == NULL || spec->template_name[0] == '\0')
    {
      g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_CONFIG,
                   "kubernetes workspace %s: no sandboxTemplateName", spec->workspace_id);
      return FALSE;
    }
  return TRUE;
}

static NzKubeWorkspaceOpened *adopt_with (NzKubeClient *client, const NzKubeWorkspaceSpec *spec,
                                          JsonObject *tmpl, NzKubeWorkspaceMismatch **mismatch,
                                          GError **error);

NzKubeWorkspaceOpened *
nz_kube_workspace_create (NzKubeClient *client, const NzKubeWorkspaceSpec *spec,
                          NzKubeWorkspaceMismatch **mismatch, GError **error)
{
  g_autoptr (JsonObject) tmpl = NULL;
  g_autoptr (JsonNode) pt = NULL;
  g_autofree char *name = NULL;
  g_autofree char *hash = NULL;
  g_autofree char *collection = NULL;
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (GError) local = NULL;
  JsonObject *meta, *labels, *ann, *s;
  JsonArray *vcts;
  JsonObject *res;
  NzKubeWorkspaceOpened *o;

  if (!check_spec (spec, error) || (tmpl = get_template (client, spec, error)) == NULL)
    return NULL;
  name = nz_kube_workspace_name (spec->workspace_id, NULL);
  pt = labelled_pod_template (tmpl, spec);
  if (spec->verify
      && !spec->verify (object_at (json_node_get_object (pt), "metadata", "labels"),
                        spec->verify_data, error))
    return NULL;
  hash = nz_kube_pod_template_hash (pt);
  obj = nz_kube_object_new (NZ_KUBE_SANDBOX_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION, "Sandbox",
                            spec->ns, name, &meta);
  labels = json_object_new ();
  ann = json_object_new ();
  s = json_object_new ();
  json_object_set_string_member (labels, NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY, spec->template_name);
  json_object_set_object_member (meta, "labels", labels);
  if (spec->epoch >= 0)
    {
      g_autofree char *e = g_strdup_printf ("%" G_GINT64_FORMAT, spec->epoch);

      json_object_set_string_member (ann, NZ_KUBE_HOLDER_EPOCH_ANNOTATION, e);
    }
  json_object_set_string_member (ann, NZ_KUBE_POD_TEMPLATE_HASH_ANNOTATION, hash);
  json_object_set_object_member (meta, "annotations", ann);
  json_object_set_member (s, "podTemplate", json_node_ref (pt));
  if ((vcts = nz_json_get_array (nz_json_get_object (tmpl, "spec"), "volumeClaimTemplates")))
    json_object_set_array_member (s, "volumeClaimTemplates", json_array_ref (vcts));
  json_object_set_string_member (s, "operatingMode", "Running");
  json_object_set_boolean_member (s, "service", TRUE);
  json_object_set_object_member (obj, "spec", s);
  collection = nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, spec->ns,
                             "sandboxes", NULL);
  res = nz_kube_create (client, collection, obj, &local);
  if (res == NULL)
    {
      if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFLICT))
        return adopt_with (client, spec, tmpl, mismatch, error); /* D.8.3 step 8 */
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  o = g_new0 (NzKubeWorkspaceOpened, 1);
  o->sandbox_name = g_steal_pointer (&name);
  o->origin = g_strdup ("created");
  o->sandbox = res;
  o->held_epoch = spec->epoch;
  return o;
}

static gboolean
mismatch_error (NzKubeWorkspaceMismatch **mismatch, GError **error, const char *sandbox_name,
                const char *field, const char *expected, const char *actual)
{
  g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_MISMATCH,
               "kubernetes workspace %s: %s mismatch: expected %s%s%s, found %s%s%s", sandbox_name,
               field, expected ? "\"" : "", expected ? expected : "none", expected ? "\"" : "",
               actual ? "\"" : "", actual ? actual : "none", actual ? "\"" : "");
  if (mismatch)
    {
      *mismatch = g_new0 (NzKubeWorkspaceMismatch, 1);
      (*mismatch)->sandbox_name = g_strdup (sandbox_name);
      (*mismatch)->field = g_strdup (field);
      (*mismatch)->expected = g_strdup (expected);
      (*mismatch)->actual = g_strdup (actual);
    }
  return FALSE;
}

static const char *
pod_template_label (JsonObject *sandbox, const char *key)
{
  JsonObject *pt = object_at (sandbox, "spec", "podTemplate");
  JsonObject *labels = object_at (pt, "metadata", "labels");

  return labels ? nz_json_get_string (labels, key) : NULL;
}

static const char *
template_label (JsonObject *sandbox)
{
  JsonObject *labels = object_at (sandbox, "metadata", "labels");
  const char *t = labels ? nz_json_get_string (labels, NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY) : NULL;

  return t ? t : pod_template_label (sandbox, NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY);
}

static const char *
runtime_class (JsonObject *has_pod_template)
{
  JsonObject *pt = object_at (has_pod_template, "spec", "podTemplate");

  return nz_json_get_string (object_at (pt, "spec", NULL), "runtimeClassName");
}

/* D.8.9: the refreshed template may not add VCT names the Sandbox lacks. */
static gboolean
vct_names_known (JsonObject *sandbox, JsonObject *tmpl, GError **error, const char *id)
{
  JsonArray *have = nz_json_get_array (object_at (sandbox, "spec", NULL), "volumeClaimTemplates");
  JsonArray *want = nz_json_get_array (object_at (tmpl, "spec", NULL), "volumeClaimTemplates");

  for (guint i = 0; want && i < json_array_get_length (want); i++)
    {
      const char *n = nz_json_get_string (
          object_at (json_node_get_object (json_array_get_element (want, i)), "metadata", NULL),
          "name");
      gboolean found = FALSE;

      for (guint j = 0; have && j < json_array_get_length (have) && !found; j++)
        found = g_strcmp0 (nz_json_get_string (
                               object_at (json_node_get_object (json_array_get_element (have, j)),
                                          "metadata", NULL),
                               "name"),
                           n)
                == 0;
      if (!found)
        {
          g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_MISMATCH,
                       "kubernetes workspace %s: the refreshed template adds the "
                       "volumeClaimTemplate %s, which the Sandbox lacks (volumeClaimTemplates "
                       "are immutable)",
                       id, n ? n : "?");
          return FALSE;
        }
    }
  return TRUE;
}

static char *
pod_path (const char *ns, const char *sandbox_name)
{
  return nz_kube_path (NULL, "v1", ns, "pods", sandbox_name);
}

static NzKubeWorkspaceOpened *
adopt_with (NzKubeClient *client, const NzKubeWorkspaceSpec *spec, JsonObject *tmpl,
            NzKubeWorkspaceMismatch **mismatch, GError **error)
{
  g_autofree char *name = nz_kube_workspace_name (spec->workspace_id, error);
  g_autofree char *path = name ? nz_kube_workspace_path (spec->ns, spec->workspace_id, NULL) : NULL;
  g_autofree char *source = g_strdup_printf ("sandbox %s", name);
  g_autofree char *ppath = NULL;
  g_autoptr (JsonObject) sb = NULL;
  g_autoptr (JsonObject) pod = NULL;
  g_autoptr (NzKubeWorkspaceOpened) o = NULL;
  gboolean suspended;
  const char *actual;

  if (name == NULL || (sb = nz_kube_get (client, path, error)) == NULL)
    return NULL;
  if (!nz_kube_workspace_assert_block_disk (source, nz_json_get_object (sb, "spec"), error))
    return NULL;
  suspended = g_strcmp0 (mode_of (sb), "Suspended") == 0;
  if (g_strcmp0 ((actual = template_label (sb)), spec->template_name) != 0)
    return mismatch_error (mismatch, error, name, "sandboxTemplateName", spec->template_name,
                           actual),
           NULL;
  if (spec->egress_profile && !(spec->refresh_pod_template && suspended)
      && g_strcmp0 ((actual = pod_template_label (sb, profile_key (spec))), spec->egress_profile)
             != 0)
    return mismatch_error (mismatch, error, name, "egressProfile", spec->egress_profile, actual),
           NULL;
  if (g_strcmp0 (runtime_class (tmpl), runtime_class (sb)) != 0)
    return mismatch_error (mismatch, error, name, "runtimeClassName", runtime_class (tmpl),
                           runtime_class (sb)),
           NULL;
  if (spec->epoch >= 0
      && !nz_kube_workspace_check_epoch (sb, "adopt", spec->workspace_id, (guint64)spec->epoch,
                                         error))
    return NULL;
  o = g_new0 (NzKubeWorkspaceOpened, 1);
  o->sandbox_name = g_strdup (name);
  o->held_epoch = spec->epoch;
  ppath = pod_path (spec->ns, name);
  if ((pod = nz_kube_get (client, ppath, NULL))
      && json_object_has_member (object_at (pod, "metadata", NULL), "deletionTimestamp")
      && !JSON_NODE_HOLDS_NULL (
          json_object_get_member (object_at (pod, "metadata", NULL), "deletionTimestamp")))
    o->draining_pod_uid = g_strdup (nz_json_get_string (object_at (pod, "metadata", NULL), "uid"));
  if (suspended)
    {
      g_autoptr (JsonNode) pt
          = spec->refresh_pod_template ? labelled_pod_template (tmpl, spec) : NULL;
      NzKubeWorkspaceWrite w
          = { .operating_mode = "Running", .pod_template = pt, .require_suspended = pt != NULL };
      gboolean applied = FALSE;
      JsonObject *res;

      if (pt && !vct_names_known (sb, tmpl, error, spec->workspace_id))
        return NULL;
      res = nz_kube_workspace_write (client, spec->ns, spec->workspace_id, "adopt", spec->epoch, &w,
                                     sb, &applied, error);
      if (res == NULL)
        return NULL;
      o->sandbox = res;
      o->woke = applied;
      o->refreshed = applied && pt != NULL;
      o->origin = g_strdup (applied ? "resumed" : "adopted-running");
    }
  else
    {
      NzKubeWorkspaceWrite stamp = { 0 };

      if (spec->epoch >= 0)
        {
          /* Taking over moves the fence even when the object is Running. */
          if ((o->sandbox = nz_kube_workspace_write (client, spec->ns, spec->workspace_id, "adopt",
                                                     spec->epoch, &stamp, sb, NULL, error))
              == NULL)
            return NULL;
        }
      else
        o->sandbox = g_steal_pointer (&sb);
      o->origin = g_strdup ("adopted-running");
    }
  return g_steal_pointer (&o);
}

NzKubeWorkspaceOpened *
nz_kube_workspace_adopt (NzKubeClient *client, const NzKubeWorkspaceSpec *spec,
                         NzKubeWorkspaceMismatch **mismatch, GError **error)
{
  g_autoptr (JsonObject) tmpl = NULL;

  if (!check_spec (spec, error) || (tmpl = get_template (client, spec, error)) == NULL)
    return NULL;
  return adopt_with (client, spec, tmpl, mismatch, error);
}

/* ---- Pods, suspend and resume ---- */

const char *
nz_kube_pod_ip (JsonObject *pod)
{
  JsonObject *st = object_at (pod, "status", NULL);
  const char *ip = st ? nz_json_get_string (st, "podIP") : NULL;
  JsonArray *ips;

  if (ip && ip[0])
    return ip;
  ips = st ? nz_json_get_array (st, "podIPs") : NULL;
  for (guint i = 0; ips && i < json_array_get_length (ips); i++)
    {
      JsonNode *e = json_array_get_element (ips, i);

      if (JSON_NODE_HOLDS_OBJECT (e) && (ip = nz_json_get_string (json_node_get_object (e), "ip"))
          && ip[0])
        return ip;
    }
  return NULL;
}

gboolean
nz_kube_pod_is_stopped (JsonObject *pod)
{
  const char *phase = nz_json_get_string (object_at (pod, "status", NULL), "phase");

  return g_strcmp0 (phase, "Succeeded") == 0 || g_strcmp0 (phase, "Failed") == 0;
}

gboolean
nz_kube_pod_is_live (JsonObject *pod)
{
  JsonObject *meta = object_at (pod, "metadata", NULL);
  JsonNode *del = nz_json_member (meta, "deletionTimestamp");

  return meta != NULL && (del == NULL || JSON_NODE_HOLDS_NULL (del))
         && !nz_kube_pod_is_stopped (pod);
}

/* Sleeps up to @interval_ms but not past @deadline (monotonic us); FALSE once it has passed. */
static gboolean
poll_wait (gint64 deadline, guint interval_ms)
{
  gint64 now = g_get_monotonic_time ();

  if (now >= deadline)
    return FALSE;
  g_usleep (MIN ((gint64)interval_ms * 1000, deadline - now));
  return TRUE;
}

gboolean
nz_kube_workspace_wait_pod_retired (NzKubeClient *client, const char *ns, const char *workspace_id,
                                    guint interval_ms, guint timeout_ms, GError **error)
{
  g_autofree char *name = nz_kube_workspace_name (workspace_id, error);
  g_autofree char *path = name ? pod_path (ns, name) : NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  if (name == NULL)
    return FALSE;
  do
    {
      g_autoptr (GError) local = NULL;
      g_autoptr (JsonObject) pod = nz_kube_get (client, path, &local);

      if (pod == NULL && g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
        return TRUE;
      if (pod == NULL && !g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_TIMED_OUT))
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      if (pod && nz_kube_pod_is_stopped (pod))
        return TRUE;
    }
  while (poll_wait (deadline, interval_ms));
  g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_SUSPEND_TIMEOUT,
               "kubernetes workspace %s: suspend of %s unconfirmed: the pod was not retired "
               "within %ums",
               workspace_id, name, timeout_ms);
  return FALSE;
}

gboolean
nz_kube_workspace_wait_pod_ready (NzKubeClient *client, const char *ns, const char *workspace_id,
                                  const char *retired_uid, guint interval_ms, guint timeout_ms,
                                  char **pod_uid, char **pod_ip, GError **error)
{
  g_autofree char *name = nz_kube_workspace_name (workspace_id, error);
  g_autofree char *path = name ? pod_path (ns, name) : NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  if (name == NULL)
    return FALSE;
  do
    {
      g_autoptr (GError) local = NULL;
      g_autoptr (JsonObject) pod = nz_kube_get (client, path, &local);
      const char *uid = pod ? nz_json_get_string (object_at (pod, "metadata", NULL), "uid") : NULL;

      if (pod == NULL && !g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE)
          && !g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_TIMED_OUT))
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      if (pod && uid && uid[0] && g_strcmp0 (uid, retired_uid) != 0 && nz_kube_pod_is_live (pod)
          && nz_kube_pod_ip (pod))
        {
          if (pod_uid)
            *pod_uid = g_strdup (uid);
          if (pod_ip)
            *pod_ip = g_strdup (nz_kube_pod_ip (pod));
          return TRUE;
        }
    }
  while (poll_wait (deadline, interval_ms));
  g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_RESUME_TIMEOUT,
               "kubernetes workspace %s: no new live pod %s with an IP within %ums", workspace_id,
               name, timeout_ms);
  return FALSE;
}

gboolean
nz_kube_workspace_suspend (NzKubeClient *client, const char *ns, const char *workspace_id,
                           gint64 epoch, NzKubeWorkspaceStepFunc before_patch, gpointer data,
                           guint interval_ms, guint timeout_ms, gboolean *already, GError **error)
{
  g_autofree char *path = nz_kube_workspace_path (ns, workspace_id, error);
  g_autoptr (JsonObject) sb = NULL;
  g_autoptr (JsonObject) res = NULL;
  NzKubeWorkspaceWrite w = { .operating_mode = "Suspended" };

  if (already)
    *already = FALSE;
  if (path == NULL || (sb = nz_kube_get (client, path, error)) == NULL)
    return FALSE;
  /* The epoch gate, before any irreversible local step. */
  if (epoch >= 0
      && !nz_kube_workspace_check_epoch (sb, "suspend", workspace_id, (guint64)epoch, error))
    return FALSE;
  if (g_strcmp0 (mode_of (sb), "Suspended") == 0)
    {
      if (already)
        *already = TRUE;
      return TRUE;
    }
  if (before_patch && !before_patch (sb, data, error))
    return FALSE;
  if ((res
       = nz_kube_workspace_write (client, ns, workspace_id, "suspend", epoch, &w, sb, NULL, error))
      == NULL)
    return FALSE;
  return nz_kube_workspace_wait_pod_retired (client, ns, workspace_id, interval_ms, timeout_ms,
                                             error);
}

gboolean
nz_kube_workspace_resume (NzKubeClient *client, const char *ns, const char *workspace_id,
                          gint64 epoch, JsonNode *refresh_template, const char *retired_uid,
                          guint interval_ms, guint timeout_ms, char **pod_uid, char **pod_ip,
                          gboolean *woke, GError **error)
{
  g_autofree char *path = nz_kube_workspace_path (ns, workspace_id, error);
  g_autoptr (JsonObject) sb = NULL;
  g_autoptr (JsonObject) res = NULL;
  gboolean suspended, applied = FALSE;

  if (woke)
    *woke = FALSE;
  if (path == NULL || (sb = nz_kube_get (client, path, error)) == NULL)
    return FALSE;
  suspended = g_strcmp0 (mode_of (sb), "Suspended") == 0;
  if (epoch >= 0
      && !nz_kube_workspace_check_epoch (sb, "resume", workspace_id, (guint64)epoch, error))
    return FALSE;
  if (suspended || epoch >= 0)
    {
      NzKubeWorkspaceWrite w = { .operating_mode = suspended ? "Running" : NULL,
                                 .pod_template = suspended ? refresh_template : NULL,
                                 .require_suspended = suspended && refresh_template != NULL };

      if ((res = nz_kube_workspace_write (client, ns, workspace_id, "resume", epoch, &w, sb,
                                          &applied, error))
          == NULL)
        return FALSE;
      if (woke)
        *woke = suspended && applied;
    }
  return nz_kube_workspace_wait_pod_ready (client, ns, workspace_id, retired_uid, interval_ms,
                                           timeout_ms, pod_uid, pod_ip, error);
}

/* ---- Standalone reads ---- */

void
nz_kube_workspace_info_free (NzKubeWorkspaceInfo *i)
{
  if (i == NULL)
    return;
  g_free (i->workspace_id);
  g_free (i->operating_mode);
  g_free (i->template);
  g_free (i->created_at);
  g_free (i->mode_changed_at);
  g_free (i);
}

GPtrArray *
nz_kube_workspace_list (NzKubeClient *client, const char *ns, GError **error)
{
  g_autofree char *path = nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, ns,
                                        "sandboxes", NULL);
  g_autoptr (JsonObject) list = nz_kube_get (client, path, error);
  JsonArray *items;
  GPtrArray *out;

  if (list == NULL)
    return NULL;
  out = g_ptr_array_new_with_free_func ((GDestroyNotify)nz_kube_workspace_info_free);
  items = nz_json_get_array (list, "items");
  for (guint i = 0; items && i < json_array_get_length (items); i++)
    {
      JsonNode *n = json_array_get_element (items, i);
      JsonObject *sb = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      JsonObject *meta = object_at (sb, "metadata", NULL);
      const char *name = nz_json_get_string (meta, "name");
      const char *tmpl = sb ? template_label (sb) : NULL;
      NzKubeWorkspaceInfo *info;
      guint64 e;

      if (name == NULL || !g_str_has_prefix (name, NZ_KUBE_WORKSPACE_NAME_PREFIX) || tmpl == NULL
          || tmpl[0] == '\0')
        continue;
      info = g_new0 (NzKubeWorkspaceInfo, 1);
      info->workspace_id = g_strdup (name + strlen (NZ_KUBE_WORKSPACE_NAME_PREFIX));
      info->operating_mode = g_strdup (mode_of (sb));
      info->template = g_strdup (tmpl);
      info->created_at = g_strdup (nz_json_get_string (meta, "creationTimestamp"));
      info->mode_changed_at = g_strdup (annotation_of (sb, NZ_KUBE_MODE_CHANGED_AT_ANNOTATION));
      info->holder_epoch = nz_kube_workspace_stored_epoch (sb, &e, NULL) ? (gint64)e : -1;
      g_ptr_array_add (out, info);
    }
  return out;
}

void
nz_kube_workspace_identity_free (NzKubeWorkspaceIdentity *i)
{
  if (i == NULL)
    return;
  g_free (i->sandbox_uid);
  g_clear_pointer (&i->volume_claim_uids, g_hash_table_unref);
  g_free (i->pod_uid);
  g_free (i);
}

NzKubeWorkspaceIdentity *
nz_kube_workspace_read_identity (NzKubeClient *client, const char *ns, const char *workspace_id,
                                 const char *expected_sandbox_uid, GError **error)
{
  g_autofree char *name = nz_kube_workspace_name (workspace_id, error);
  g_autofree char *path = name ? nz_kube_workspace_path (ns, workspace_id, NULL) : NULL;
  g_autofree char *ppath = name ? pod_path (ns, name) : NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonObject) sb = NULL;
  g_autoptr (JsonObject) pod = NULL;
  NzKubeWorkspaceIdentity *id;
  const char *uid;
  JsonArray *vcts;

  if (name == NULL)
    return NULL;
  sb = nz_kube_get (client, path, &local);
  if (sb == NULL && !g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  uid = sb ? nz_json_get_string (object_at (sb, "metadata", NULL), "uid") : NULL;
  if (expected_sandbox_uid ? g_strcmp0 (uid, expected_sandbox_uid) != 0 : sb == NULL)
    {
      if (expected_sandbox_uid == NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
      g_set_error (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_REPLACED,
                   "kubernetes workspace %s: %s was replaced (expected uid %s, found %s)",
                   workspace_id, name, expected_sandbox_uid, uid ? uid : "none");
      return NULL;
    }
  id = g_new0 (NzKubeWorkspaceIdentity, 1);
  id->sandbox_uid = g_strdup (uid);
  id->suspended = g_strcmp0 (nz_json_get_string (object_at (sb, "spec", NULL), "operatingMode"),
                             "Suspended")
                  == 0;
  id->volume_claim_uids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  vcts = nz_json_get_array (object_at (sb, "spec", NULL), "volumeClaimTemplates");
  for (guint i = 0; vcts && i < json_array_get_length (vcts); i++)
    {
      JsonNode *v = json_array_get_element (vcts, i);
      const char *vn = JSON_NODE_HOLDS_OBJECT (v) ? nz_json_get_string (
                           object_at (json_node_get_object (v), "metadata", NULL), "name")
                                                  : NULL;
      g_autofree char *pvc_name = vn ? g_strdup_printf ("%s-%s", vn, name) : NULL;
      g_autofree char *pvc_path
          = vn ? nz_kube_path (NULL, "v1", ns, "persistentvolumeclaims", pvc_name) : NULL;
      g_autoptr (JsonObject) pvc = pvc_path ? nz_kube_get (client, pvc_path, NULL) : NULL;
      const char *pu = pvc ? nz_json_get_string (object_at (pvc, "metadata", NULL), "uid") : NULL;

      if (pu) /* best effort: needs get on persistentvolumeclaims */
        g_hash_table_replace (id->volume_claim_uids, g_strdup (vn), g_strdup (pu));
    }
  if ((pod = nz_kube_get (client, ppath, NULL)) && nz_kube_pod_is_live (pod))
    id->pod_uid = g_strdup (nz_json_get_string (object_at (pod, "metadata", NULL), "uid"));
  return id;
}
