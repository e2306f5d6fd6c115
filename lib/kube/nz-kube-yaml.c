/* nz-kube-yaml.c: a kubeconfig's YAML as a JSON tree (libyaml's event parser). Only what a
 * kubeconfig uses is read; a construct we would have to interpret (anchors, aliases, several
 * documents) is refused rather than guessed at. */
#include "nz-kube-access.h"

#include <yaml.h>

/* A kubeconfig nests a few levels; far deeper input is hostile or not a kubeconfig. */
#define NZ_KUBE_YAML_MAX_DEPTH 64

typedef struct
{
  yaml_parser_t parser;
  const char *what;
} YamlReader;

static gboolean
yaml_next (YamlReader *r, yaml_event_t *ev, GError **error)
{
  if (yaml_parser_parse (&r->parser, ev))
    return TRUE;
  g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG, "%s: YAML error at line %zu: %s",
               r->what, r->parser.problem_mark.line + 1,
               r->parser.problem != NULL ? r->parser.problem : "unreadable");
  return FALSE;
}

static gboolean
refuse (YamlReader *r, const yaml_event_t *ev, const char *construct, GError **error)
{
  g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
               "%s: line %zu: YAML %s are not supported in a kubeconfig here", r->what,
               ev->start_mark.line + 1, construct);
  return FALSE;
}

static JsonNode *read_node (YamlReader *r, yaml_event_t *ev, int depth, GError **error);

/* Reads the rest of a collection whose start event was consumed. */
static JsonNode *
read_collection (YamlReader *r, gboolean mapping, int depth, GError **error)
{
  g_autoptr (JsonObject) obj = mapping ? json_object_new () : NULL;
  g_autoptr (JsonArray) arr = mapping ? NULL : json_array_new ();
  JsonNode *node;

  for (;;)
    {
      yaml_event_t ev;
      g_autoptr (JsonNode) key = NULL, value = NULL;

      if (!yaml_next (r, &ev, error))
        return NULL;
      if (ev.type == (mapping ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT))
        {
          yaml_event_delete (&ev);
          break;
        }
      key = read_node (r, &ev, depth + 1, error);
      yaml_event_delete (&ev);
      if (key == NULL)
        return NULL;
      if (!mapping)
        {
          json_array_add_element (arr, g_steal_pointer (&key));
          continue;
        }
      if (JSON_NODE_TYPE (key) != JSON_NODE_VALUE)
        {
          g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                       "%s: a mapping key is not a scalar", r->what);
          return NULL;
        }
      if (!yaml_next (r, &ev, error))
        return NULL;
      value = read_node (r, &ev, depth + 1, error);
      yaml_event_delete (&ev);
      if (value == NULL)
        return NULL;
      /* A repeated key is ambiguous (which one would kubectl use?): refuse. */
      if (json_object_has_member (obj, json_node_get_string (key)))
        {
          g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG, "%s: duplicate key '%s'",
                       r->what, json_node_get_string (key));
          return NULL;
        }
      json_object_set_member (obj, json_node_get_string (key), g_steal_pointer (&value));
    }
  node = json_node_alloc ();
  if (mapping)
    json_node_init_object (node, obj);
  else
    json_node_init_array (node, arr);
  return node;
}

static JsonNode *
read_node (YamlReader *r, yaml_event_t *ev, int depth, GError **error)
{
  if (depth > NZ_KUBE_YAML_MAX_DEPTH)
    {
      g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG, "%s: nested too deeply", r->what);
      return NULL;
    }
  switch (ev->type)
    {
    case YAML_ALIAS_EVENT:
      return refuse (r, ev, "aliases", error), NULL;
    case YAML_SCALAR_EVENT:
      {
        JsonNode *node;

        if (ev->data.scalar.anchor != NULL)
          return refuse (r, ev, "anchors", error), NULL;
        /* A plain "null", "~" or empty scalar is YAML's null: an absent value. */
        if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE
            && (ev->data.scalar.length == 0
                || g_strcmp0 ((const char *)ev->data.scalar.value, "null") == 0
                || g_strcmp0 ((const char *)ev->data.scalar.value, "~") == 0))
          return json_node_new (JSON_NODE_NULL);
        if (strlen ((const char *)ev->data.scalar.value) != ev->data.scalar.length)
          {
            g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                         "%s: line %zu: a scalar holds a NUL byte", r->what,
                         ev->start_mark.line + 1);
            return NULL;
          }
        node = json_node_new (JSON_NODE_VALUE);
        json_node_set_string (node, (const char *)ev->data.scalar.value);
        return node;
      }
    case YAML_SEQUENCE_START_EVENT:
      if (ev->data.sequence_start.anchor != NULL)
        return refuse (r, ev, "anchors", error), NULL;
      return read_collection (r, FALSE, depth, error);
    case YAML_MAPPING_START_EVENT:
      if (ev->data.mapping_start.anchor != NULL)
        return refuse (r, ev, "anchors", error), NULL;
      return read_collection (r, TRUE, depth, error);
    default:
      g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG, "%s: unexpected YAML event",
                   r->what);
      return NULL;
    }
}

JsonNode *
nz_kube_yaml_parse (const char *text, gsize len, const char *what, GError **error)
{
  YamlReader r = { .what = what };
  g_autoptr (JsonNode) root = NULL;
  yaml_event_t ev;
  gboolean ok = TRUE;

  g_return_val_if_fail (text != NULL, NULL);
  if (!yaml_parser_initialize (&r.parser))
    {
      g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_FAILED, "%s: no memory for YAML", what);
      return NULL;
    }
  yaml_parser_set_input_string (&r.parser, (const unsigned char *)text, len);
  /* STREAM-START, then one DOCUMENT-START (or an empty stream: an empty kubeconfig). */
  for (int i = 0; ok && i < 2; i++)
    {
      ok = yaml_next (&r, &ev, error);
      if (ok && i == 1 && ev.type == YAML_DOCUMENT_START_EVENT)
        {
          yaml_event_delete (&ev);
          ok = yaml_next (&r, &ev, error);
          if (ok)
            {
              root = read_node (&r, &ev, 0, error);
              ok = root != NULL;
              yaml_event_delete (&ev);
            }
          if (ok)
            ok = yaml_next (&r, &ev, error);
          if (ok)
            yaml_event_delete (&ev); /* DOCUMENT-END */
          if (ok)
            ok = yaml_next (&r, &ev, error);
          if (ok && ev.type != YAML_STREAM_END_EVENT)
            {
              yaml_event_delete (&ev);
              g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                           "%s: more than one YAML document", what);
              ok = FALSE;
            }
          else if (ok)
            yaml_event_delete (&ev);
        }
      else if (ok)
        yaml_event_delete (&ev);
    }
  yaml_parser_delete (&r.parser);
  if (!ok)
    return NULL;
  if (root == NULL)
    root = json_node_new (JSON_NODE_NULL);
  return g_steal_pointer (&root);
}
