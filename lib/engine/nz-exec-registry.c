#include "nz-exec-registry.h"

#include <string.h>

#include "nz-errors.h"
#include "nz-token.h"

struct _NzExecRegistry
{
  GHashTable *records; /* id -> NzExecRecord (ref) */
  gint64 max_tracked;
  gint64 lease_ttl_ms;
  gint64 terminal_ttl_ms;
  gint64 retained_ttl_ms;
};

NzExecRecord *
nz_exec_record_new (const char *id)
{
  NzExecRecord *rec = g_new0 (NzExecRecord, 1);

  rec->ref_count = 1;
  rec->id = g_strdup (id);
  rec->state = NZ_EXEC_STATE_RESERVED;
  return rec;
}

NzExecRecord *
nz_exec_record_ref (NzExecRecord *rec)
{
  g_return_val_if_fail (rec != NULL, NULL);
  rec->ref_count++;
  return rec;
}

void
nz_exec_record_unref (NzExecRecord *rec)
{
  if (rec == NULL || --rec->ref_count > 0)
    return;
  /* The process state holds a reference to its record, so proc is gone by now. */
  g_warn_if_fail (rec->proc == NULL);
  nz_output_log_free (rec->log);
  if (rec->observers != NULL)
    g_ptr_array_unref (rec->observers);
  g_free (rec->id);
  g_free (rec->error);
  g_free (rec);
}

typedef struct
{
  NzExecObserverFuncs funcs;
  gpointer user_data;
} NzExecObserver;

void
nz_exec_record_add_observer (NzExecRecord *rec, const NzExecObserverFuncs *funcs,
                             gpointer user_data)
{
  NzExecObserver *o;

  g_return_if_fail (rec != NULL && funcs != NULL);
  if (rec->observers == NULL)
    rec->observers = g_ptr_array_new_with_free_func (g_free);
  o = g_new0 (NzExecObserver, 1);
  o->funcs = *funcs;
  o->user_data = user_data;
  g_ptr_array_add (rec->observers, o);
}

void
nz_exec_record_remove_observer (NzExecRecord *rec, gpointer user_data)
{
  if (rec->observers == NULL)
    return;
  for (guint i = 0; i < rec->observers->len; i++)
    if (((NzExecObserver *)rec->observers->pdata[i])->user_data == user_data)
      {
        g_ptr_array_remove_index (rec->observers, i);
        return;
      }
}

void
nz_exec_record_retain_output (NzExecRecord *rec, int stream, const guint8 *data, gsize len)
{
  guint64 offset;

  if (rec->log == NULL || len == 0)
    return;
  /* Appended before any frame is written, so an attach never misses a chunk it was sent. */
  offset = nz_output_log_append (rec->log, stream, data, len);
  if (rec->observers == NULL)
    return;
  /* An observer may remove itself (slow reader); walk a snapshot. */
  {
    g_autoptr (GPtrArray) snapshot = g_ptr_array_new ();

    for (guint i = 0; i < rec->observers->len; i++)
      g_ptr_array_add (snapshot, rec->observers->pdata[i]);
    for (guint i = 0; i < snapshot->len; i++)
      {
        NzExecObserver *o = snapshot->pdata[i];

        if (rec->observers != NULL && g_ptr_array_find (rec->observers, o, NULL)
            && o->funcs.output != NULL)
          o->funcs.output (rec, stream, offset, data, len, o->user_data);
      }
  }
}

const char *
nz_exec_state_to_string (NzExecState state)
{
  switch (state)
    {
    case NZ_EXEC_STATE_RESERVED:
      return "reserved";
    case NZ_EXEC_STATE_STARTING:
      return "starting";
    case NZ_EXEC_STATE_RUNNING:
      return "running";
    case NZ_EXEC_STATE_EXITED:
      return "exited";
    case NZ_EXEC_STATE_TERMINAL:
      return "terminal";
    default:
      return "unknown";
    }
}

const char *
nz_exec_outcome_to_string (NzExecOutcome outcome)
{
  switch (outcome)
    {
    case NZ_EXEC_OUTCOME_COMPLETED:
      return "completed";
    case NZ_EXEC_OUTCOME_FAILED:
      return "failed";
    case NZ_EXEC_OUTCOME_CANCELLED:
      return "cancelled";
    case NZ_EXEC_OUTCOME_NONE:
    default:
      return "none";
    }
}

gboolean
nz_exec_state_is_terminal (NzExecState state)
{
  return state == NZ_EXEC_STATE_TERMINAL;
}

gboolean
nz_exec_id_is_valid (const char *id)
{
  static const int group_len[] = { 8, 4, 4, 4, 12 };
  const char *p;

  if (id == NULL || !g_str_has_prefix (id, "exec_"))
    return FALSE;
  p = id + 5;
  for (int g = 0; g < 5; g++)
    {
      for (int i = 0; i < group_len[g]; i++, p++)
        {
          if (!g_ascii_isxdigit (*p))
            return FALSE;
          /* Version digit: first of group 3, 1-5. Variant digit: first of group 4, 8/9/a/b. */
          if (g == 2 && i == 0 && !(*p >= '1' && *p <= '5'))
            return FALSE;
          if (g == 3 && i == 0 && strchr ("89abAB", *p) == NULL)
            return FALSE;
        }
      if (g < 4 && *p++ != '-')
        return FALSE;
    }
  return *p == '\0';
}

NzExecRegistry *
nz_exec_registry_new (gint64 max_tracked, gint64 lease_ttl_ms, gint64 terminal_ttl_ms,
                      gint64 retained_ttl_ms)
{
  NzExecRegistry *reg = g_new0 (NzExecRegistry, 1);

  reg->records
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify)nz_exec_record_unref);
  reg->max_tracked = max_tracked;
  reg->lease_ttl_ms = lease_ttl_ms;
  reg->terminal_ttl_ms = terminal_ttl_ms;
  reg->retained_ttl_ms = retained_ttl_ms;
  return reg;
}

void
nz_exec_registry_free (NzExecRegistry *reg)
{
  if (reg == NULL)
    return;
  g_hash_table_unref (reg->records);
  g_free (reg);
}

guint
nz_exec_registry_size (NzExecRegistry *reg)
{
  return g_hash_table_size (reg->records);
}

NzExecRecord *
nz_exec_registry_lookup (NzExecRegistry *reg, const char *id)
{
  g_return_val_if_fail (reg != NULL, NULL);
  if (id == NULL)
    return NULL;
  return g_hash_table_lookup (reg->records, id);
}

void
nz_exec_registry_foreach (NzExecRegistry *reg, NzExecRecordFunc func, gpointer user_data)
{
  GHashTableIter it;
  gpointer value;

  g_return_if_fail (reg != NULL && func != NULL);
  g_hash_table_iter_init (&it, reg->records);
  while (g_hash_table_iter_next (&it, NULL, &value))
    func (value, user_data);
}

void
nz_exec_registry_prune (NzExecRegistry *reg, gint64 now_ms)
{
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, reg->records);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      NzExecRecord *rec = value;

      /* Only records nobody is running: a starting or running record has no expiry. */
      if ((rec->state == NZ_EXEC_STATE_RESERVED || rec->state == NZ_EXEC_STATE_TERMINAL)
          && rec->expires_at != 0 && rec->expires_at <= now_ms)
        g_hash_table_iter_remove (&it);
    }
}

/* makeRoomForReservation: evict terminal records, oldest expiry first. Live ones never go. */
static gboolean
make_room (NzExecRegistry *reg)
{
  while ((gint64)g_hash_table_size (reg->records) >= reg->max_tracked)
    {
      GHashTableIter it;
      gpointer value;
      NzExecRecord *oldest = NULL;

      g_hash_table_iter_init (&it, reg->records);
      while (g_hash_table_iter_next (&it, NULL, &value))
        {
          NzExecRecord *rec = value;

          if (rec->state == NZ_EXEC_STATE_TERMINAL
              && (oldest == NULL || rec->expires_at < oldest->expires_at))
            oldest = rec;
        }
      if (oldest == NULL)
        return FALSE;
      g_hash_table_remove (reg->records, oldest->id);
    }
  return TRUE;
}

NzExecRecord *
nz_exec_registry_reserve (NzExecRegistry *reg, const char *id, gint64 now_ms,
                          gboolean *out_existing, GError **error)
{
  NzExecRecord *rec;
  g_autofree char *minted = NULL;

  g_return_val_if_fail (reg != NULL, NULL);
  g_return_val_if_fail (id == NULL || nz_exec_id_is_valid (id), NULL);

  if (out_existing != NULL)
    *out_existing = FALSE;
  if (id != NULL && (rec = g_hash_table_lookup (reg->records, id)) != NULL)
    {
      /* Idempotent: a command never runs twice under one id while its record lives. */
      if (out_existing != NULL)
        *out_existing = TRUE;
      return rec;
    }
  if (!make_room (reg))
    {
      nz_throw (error, NZ_ERROR_BUSY, "execution_capacity");
      return NULL;
    }
  if (id == NULL)
    {
      g_autofree char *uuid = nz_uuid_v4 ();

      minted = g_strconcat ("exec_", uuid, NULL);
      id = minted;
    }
  rec = nz_exec_record_new (id);
  rec->expires_at = now_ms + reg->lease_ttl_ms;
  g_hash_table_replace (reg->records, rec->id, rec);
  return rec;
}

void
nz_exec_registry_remember_terminal (NzExecRegistry *reg, NzExecRecord *rec, NzExecOutcome outcome,
                                    const NzExecResult *result, const char *error, gint64 now_ms)
{
  g_return_if_fail (reg != NULL && rec != NULL);

  rec->started = rec->started || rec->proc != NULL;
  rec->state = NZ_EXEC_STATE_TERMINAL;
  rec->outcome = outcome;
  rec->has_result = result != NULL;
  if (result != NULL)
    rec->result = *result;
  g_free (rec->error);
  rec->error = g_strdup (error);
  rec->expires_at = now_ms + (rec->has_log ? reg->retained_ttl_ms : reg->terminal_ttl_ms);
  /* Broadcast the end to every attachment, then forget them. */
  if (rec->observers != NULL)
    {
      g_autoptr (GPtrArray) observers = g_steal_pointer (&rec->observers);

      nz_exec_record_ref (rec);
      for (guint i = 0; i < observers->len; i++)
        {
          NzExecObserver *o = observers->pdata[i];

          if (o->funcs.finished != NULL)
            o->funcs.finished (rec, o->user_data);
        }
      nz_exec_record_unref (rec);
    }
}

static guint
live_log_count (NzExecRegistry *reg)
{
  GHashTableIter it;
  gpointer value;
  guint n = 0;

  g_hash_table_iter_init (&it, reg->records);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      NzExecRecord *rec = value;

      if (rec->log != NULL && !nz_output_log_is_discarded (rec->log))
        n++;
    }
  return n;
}

gboolean
nz_exec_registry_make_room_for_log (NzExecRegistry *reg, gint64 max_logs)
{
  g_return_val_if_fail (reg != NULL, FALSE);
  while ((gint64)live_log_count (reg) >= max_logs)
    {
      GHashTableIter it;
      gpointer value;
      NzExecRecord *oldest = NULL;

      g_hash_table_iter_init (&it, reg->records);
      while (g_hash_table_iter_next (&it, NULL, &value))
        {
          NzExecRecord *rec = value;

          if (rec->state == NZ_EXEC_STATE_TERMINAL && rec->log != NULL
              && !nz_output_log_is_discarded (rec->log)
              && (oldest == NULL || rec->expires_at < oldest->expires_at))
            oldest = rec;
        }
      if (oldest == NULL)
        return FALSE;
      /* The record and its result survive; an attach then reports everything dropped. */
      nz_output_log_discard (oldest->log);
    }
  return TRUE;
}

void
nz_exec_registry_mark_starting (NzExecRegistry *reg, NzExecRecord *rec, gint64 now_ms)
{
  g_return_if_fail (reg != NULL && rec != NULL);
  rec->state = NZ_EXEC_STATE_STARTING;
  rec->started_at = now_ms;
  rec->expires_at = 0;
}

gboolean
nz_exec_worker_id_is_valid (const char *id)
{
  if (id == NULL || !g_str_has_prefix (id, "exec_") || strlen (id) != 41)
    return FALSE;
  for (const char *p = id + 5; *p != '\0'; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
      return FALSE;
  return TRUE;
}
