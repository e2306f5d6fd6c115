#include "nz-guest.h"

#include "nz-sessions.h"
#include "nz-token.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-exec.h"

#include <string.h>

typedef struct
{
  const NzGuestProcessProvider *provider;
  gpointer user_data;
} ProviderEntry;

NzGuest *
nz_guest_new (const NzGuestLimits *limits, const char *workspace, const char *read_roots,
              const char *write_roots)
{
  NzGuest *guest;

  g_return_val_if_fail (limits != NULL, NULL);
  g_return_val_if_fail (workspace != NULL, NULL);

  guest = g_new0 (NzGuest, 1);
  guest->limits = *limits;
  guest->jail = nz_jail_new (workspace, read_roots, write_roots);
  guest->registry
      = nz_exec_registry_new (limits->max_tracked_executions, limits->execution_lease_ttl_ms,
                              limits->execution_terminal_ttl_ms, limits->execution_retained_ttl_ms);
  guest->boot_id = nz_uuid_v4 ();
  guest->providers = g_array_new (FALSE, TRUE, sizeof (ProviderEntry));
  guest->parts_in_flight = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  nz_exec_add_process_provider (guest);
  return guest;
}

void
nz_guest_free (NzGuest *guest)
{
  if (guest == NULL)
    return;
  nz_jail_free (guest->jail);
  nz_session_registry_free (guest->sessions);
  nz_exec_registry_free (guest->registry);
  g_free (guest->boot_id);
  g_free (guest->retire_reason);
  g_free (guest->flush_command);
  g_array_unref (guest->providers);
  g_hash_table_unref (guest->parts_in_flight);
  g_free (guest);
}

void
nz_guest_set_retire_func (NzGuest *guest, NzGuestRetireFunc func, gpointer user_data)
{
  guest->retire_func = func;
  guest->retire_data = user_data;
}

void
nz_guest_retire (NzGuest *guest, const char *message)
{
  /* Once fenced, always fenced: a reused numeric pgid or an unconfirmed kill makes every later
   * outcome unknowable, so the host must retire the whole guest. */
  if (guest->retiring)
    return;
  guest->retiring = TRUE;
  guest->retire_reason = g_strdup (message);
  g_debug ("guest retiring: %s", message);
  if (guest->retire_func != NULL)
    guest->retire_func (guest, message, guest->retire_data);
}

gboolean
nz_guest_is_retiring (NzGuest *guest)
{
  return guest->retiring;
}

gint64
nz_guest_now_ms (void)
{
  return g_get_real_time () / 1000;
}

/* Process-wide, like the environment it is laid over: set once at startup, before any
 * child is spawned. */
static char **sandbox_environ;

void
nz_guest_set_sandbox_environ (const char *const *env)
{
  g_strfreev (sandbox_environ);
  sandbox_environ = g_strdupv ((char **)env);
}

static gboolean
is_scrubbed (const char *entry)
{
  return g_str_has_prefix (entry, "NAMZU_AGENT_") || g_str_has_prefix (entry, "NAMZU_SANDBOX_");
}

char **
nz_guest_child_environ (JsonObject *overlay)
{
  g_auto (GStrv) env = g_get_environ ();
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; env[i] != NULL; i++)
    {
      /* The token and the agent's own knobs never reach a workload (spec B.3). */
      if (is_scrubbed (env[i]))
        continue;
      g_ptr_array_add (out, g_strdup (env[i]));
    }
  g_ptr_array_add (out, NULL);

  {
    g_auto (GStrv) result = (char **)g_ptr_array_steal (out, NULL);

    /* The sandbox's environment after the scrub, so it cannot put back what the scrub took,
     * and under the request's env, which wins. */
    for (guint i = 0; sandbox_environ != NULL && sandbox_environ[i] != NULL; i++)
      {
        const char *e = sandbox_environ[i], *eq = strchr (e, '=');
        g_autofree char *name = eq != NULL ? g_strndup (e, eq - e) : NULL;

        if (name != NULL && *name != '\0' && !is_scrubbed (e))
          result = g_environ_setenv (result, name, eq + 1, TRUE);
      }

    if (overlay != NULL)
      {
        g_autoptr (GList) members = json_object_get_members (overlay);

        for (GList *l = members; l != NULL; l = l->next)
          {
            const char *key = l->data;
            g_autofree char *value = nz_json_js_string (json_object_get_member (overlay, key));

            /* A key with '=' or an empty key cannot be expressed in an environ block. */
            if (*key == '\0' || strchr (key, '=') != NULL)
              continue;
            result = g_environ_setenv (result, key, value, TRUE);
          }
      }
    return g_steal_pointer (&result);
  }
}

gboolean
nz_guest_is_quiescing (NzGuest *guest)
{
  return guest->quiesce_in_flight > 0 || guest->terminating;
}

void
nz_guest_add_process_provider (NzGuest *guest, const NzGuestProcessProvider *provider,
                               gpointer user_data)
{
  ProviderEntry e = { provider, user_data };

  g_return_if_fail (guest != NULL && provider != NULL);
  g_array_append_val (guest->providers, e);
}

GArray *
nz_guest_collect_owned_sessions (NzGuest *guest)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint));

  for (guint i = 0; i < guest->providers->len; i++)
    {
      ProviderEntry *e = &g_array_index (guest->providers, ProviderEntry, i);

      if (e->provider->collect_owned != NULL)
        e->provider->collect_owned (guest, ids, e->user_data);
    }
  return ids;
}

void
nz_guest_mark_quiesced (NzGuest *guest)
{
  for (guint i = 0; i < guest->providers->len; i++)
    {
      ProviderEntry *e = &g_array_index (guest->providers, ProviderEntry, i);

      if (e->provider->mark_quiesced != NULL)
        e->provider->mark_quiesced (guest, e->user_data);
    }
}

gboolean
nz_guest_is_unsettled (NzGuest *guest)
{
  for (guint i = 0; i < guest->providers->len; i++)
    {
      ProviderEntry *e = &g_array_index (guest->providers, ProviderEntry, i);

      if (e->provider->unsettled != NULL && e->provider->unsettled (guest, e->user_data))
        return TRUE;
    }
  return FALSE;
}
