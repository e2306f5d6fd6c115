#include "nz-guest.h"

#include "nz-token.h"
#include "nz-jstext.h"

#include <string.h>

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
  return guest;
}

void
nz_guest_free (NzGuest *guest)
{
  if (guest == NULL)
    return;
  nz_jail_free (guest->jail);
  nz_exec_registry_free (guest->registry);
  g_free (guest->boot_id);
  g_free (guest->retire_reason);
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

char **
nz_guest_child_environ (JsonObject *overlay)
{
  g_auto (GStrv) env = g_get_environ ();
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; env[i] != NULL; i++)
    {
      /* The token and the agent's own knobs never reach a workload (spec B.3). */
      if (g_str_has_prefix (env[i], "NAMZU_AGENT_") || g_str_has_prefix (env[i], "NAMZU_SANDBOX_"))
        continue;
      g_ptr_array_add (out, g_strdup (env[i]));
    }
  g_ptr_array_add (out, NULL);

  {
    g_auto (GStrv) result = (char **)g_ptr_array_steal (out, NULL);

    if (overlay != NULL)
      {
        g_autoptr (GList) members = json_object_get_members (overlay);

        for (GList *l = members; l != NULL; l = l->next)
          {
            const char *key = l->data;
            g_autofree char *value = nz_jstext_from_json (json_object_get_member (overlay, key));

            /* A key with '=' or an empty key cannot be expressed in an environ block. */
            if (*key == '\0' || strchr (key, '=') != NULL)
              continue;
            result = g_environ_setenv (result, key, value, TRUE);
          }
      }
    return g_steal_pointer (&result);
  }
}
