#include "nz-preauth.h"

struct _NzPreauthPool
{
  GQueue members; /* oldest first */
  guint64 max_members;
  guint64 max_buffer;
  guint64 charged;
};

NzPreauthPool *
nz_preauth_pool_new (guint64 max_members, guint64 max_buffer_bytes)
{
  NzPreauthPool *pool = g_new0 (NzPreauthPool, 1);

  g_queue_init (&pool->members);
  pool->max_members = max_members;
  pool->max_buffer = max_buffer_bytes;
  return pool;
}

void
nz_preauth_pool_free (NzPreauthPool *pool)
{
  if (pool == NULL)
    return;
  /* Only at exit: connections still open then are dropped with the process. */
  g_queue_clear (&pool->members);
  g_free (pool);
}

gpointer
nz_preauth_pool_join (NzPreauthPool *pool, NzPreauthSlot *slot, gpointer member)
{
  g_return_val_if_fail (pool != NULL && slot != NULL && slot->link == NULL, NULL);
  g_queue_push_tail (&pool->members, member);
  slot->link = pool->members.tail;
  slot->charged = 0;
  /* Evict the oldest, not the newcomer: a flood of idle connections must not lock out the
   * legitimate caller that arrives last. */
  if (pool->members.length > pool->max_members && pool->members.head != slot->link)
    return pool->members.head->data;
  return NULL;
}

void
nz_preauth_pool_leave (NzPreauthPool *pool, NzPreauthSlot *slot)
{
  g_return_if_fail (pool != NULL && slot != NULL);
  if (slot->link != NULL)
    {
      g_queue_delete_link (&pool->members, slot->link);
      slot->link = NULL;
    }
  pool->charged -= MIN (pool->charged, slot->charged);
  slot->charged = 0;
}

gboolean
nz_preauth_pool_charge (NzPreauthPool *pool, NzPreauthSlot *slot, gsize buffered)
{
  g_return_val_if_fail (pool != NULL && slot != NULL, FALSE);
  pool->charged -= MIN (pool->charged, slot->charged);
  pool->charged += buffered;
  slot->charged = buffered;
  return pool->charged <= pool->max_buffer;
}

guint
nz_preauth_pool_size (NzPreauthPool *pool)
{
  return pool->members.length;
}

gpointer
nz_preauth_pool_oldest (NzPreauthPool *pool)
{
  return pool->members.head != NULL ? pool->members.head->data : NULL;
}

guint64
nz_preauth_pool_get_max_members (NzPreauthPool *pool)
{
  return pool->max_members;
}

guint64
nz_preauth_pool_get_max_buffer (NzPreauthPool *pool)
{
  return pool->max_buffer;
}

guint64
nz_preauth_pool_get_charged (NzPreauthPool *pool)
{
  return pool->charged;
}
