/* nz-preauth.h: the pre-authentication pool of a gated agent (spec A.4.2): unauthenticated
 * connections in arrival order, and the byte budget their frame readers share. Pure
 * bookkeeping; nz-agent-conn drives the refusals and timers. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _NzPreauthPool NzPreauthPool;

/* @max_members: NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS; @max_buffer_bytes: the effective
 * NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES (already max(value, pre-auth frame cap)). */
NzPreauthPool *nz_preauth_pool_new (guint64 max_members, guint64 max_buffer_bytes);
void nz_preauth_pool_free (NzPreauthPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzPreauthPool, nz_preauth_pool_free)

/* Per-member state, embedded in the connection. */
typedef struct
{
  GList *link;   /* in the pool's queue; NULL when not a member */
  gsize charged; /* bytes of this member counted in the shared budget */
} NzPreauthSlot;

/* Appends @member (the newest). When the pool now holds more than its limit, returns the
 * oldest *other* member, which the caller must refuse (and so remove); the newcomer is always
 * kept. Otherwise NULL. */
gpointer nz_preauth_pool_join (NzPreauthPool *pool, NzPreauthSlot *slot, gpointer member);
/* Removes the member and uncharges its bytes. Idempotent. */
void nz_preauth_pool_leave (NzPreauthPool *pool, NzPreauthSlot *slot);
/* Charges the member for holding @buffered bytes now (the difference to what it was charged
 * before). Returns FALSE when the shared total is over the budget. */
gboolean nz_preauth_pool_charge (NzPreauthPool *pool, NzPreauthSlot *slot, gsize buffered);

guint nz_preauth_pool_size (NzPreauthPool *pool);
/* The oldest member, or NULL when the pool is empty. */
gpointer nz_preauth_pool_oldest (NzPreauthPool *pool);
guint64 nz_preauth_pool_get_max_members (NzPreauthPool *pool);
guint64 nz_preauth_pool_get_max_buffer (NzPreauthPool *pool);
guint64 nz_preauth_pool_get_charged (NzPreauthPool *pool);

G_END_DECLS
