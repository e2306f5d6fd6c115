/* container:bwrap's keys of the reference config's backend section. */
#include "nz-bwrap.h"

#include "nz-backend-config.h"
#include "nz-errors.h"

const char *const nz_bwrap_config_keys[] = {
  "image", "cpuLimit", "readyTimeoutMs", "readyPollIntervalMs", "readOnlyRootfs",
  "writableRootfsPaths", NULL,
};

void
nz_bwrap_parse_config (JsonObject *b, NzCreateOptions *opts, GPtrArray *reasons)
{
  g_autoptr (GError) local = NULL;
  JsonNode *n;

  /* Read only to say why: a namespace sandbox's root is the host's system directories. */
  if (json_object_has_member (b, "image"))
    nz_config_refuse (reasons, "backend.image: container:bwrap runs no image (its root is a "
                               "read-only view of the host's system directories)");
  n = json_object_get_member (b, "cpuLimit");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) == G_TYPE_STRING
          || json_node_get_value_type (n) == G_TYPE_BOOLEAN)
        nz_config_refuse (reasons,
                          "backend.cpuLimit: must be a finite number greater than 0 (e.g. 1.5)");
      else if (!nz_cpus_check (json_node_get_double (n), "backend.cpuLimit", &local))
        nz_config_refuse (reasons, "%s", local->message);
      else
        opts->cpus = json_node_get_double (n);
    }
  if (json_object_has_member (b, "readyTimeoutMs"))
    {
      gint64 v = nz_config_positive_int (reasons, b, "readyTimeoutMs", "backend.readyTimeoutMs",
                                         G_MAXINT32);

      if (v > 0)
        opts->ready_timeout_ms = (guint)v;
    }
  nz_config_positive_int (reasons, b, "readyPollIntervalMs", "backend.readyPollIntervalMs",
                          G_MAXINT32);
  n = json_object_get_member (b, "readOnlyRootfs");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
        nz_config_refuse (reasons, "backend.readOnlyRootfs: must be a boolean");
      else if (!json_node_get_boolean (n))
        nz_config_refuse (reasons, "backend.readOnlyRootfs: container:bwrap cannot offer a "
                                   "writable root: it is the host's own system directories");
    }
  n = json_object_get_member (b, "writableRootfsPaths");
  if (n != NULL)
    {
      JsonArray *arr = JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;

      if (arr == NULL)
        nz_config_refuse (reasons, "backend.writableRootfsPaths: must be an array of paths");
      for (guint i = 0; arr != NULL && i < json_array_get_length (arr); i++)
        {
          JsonNode *e = json_array_get_element (arr, i);

          if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
            nz_config_refuse (reasons, "backend.writableRootfsPaths[%u]: must be a string", i);
          else
            g_ptr_array_add (opts->writable_paths, g_strdup (json_node_get_string (e)));
        }
    }
}
