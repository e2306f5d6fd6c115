#include "nz-worker-preauth.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

/* A connection until it sends the headers of an authorised request: a member of the
 * pre-auth pool, with its deadline. Owned by the connection's GSocket (object data), so it
 * goes when libsoup lets the connection go. */
struct _NzWorkerPreauth
{
  NzPreauthPool *pool;
  /* Members by peer address ("ip:port"): libsoup hands a request its connection's addresses,
   * not the GSocket we accepted (a connection taken from an iostream has none). */
  GHashTable *by_peer;
};

typedef struct
{
  NzWorkerPreauth *owner; /* NULL once it is gone */
  GSocket *sock;          /* not a reference: it owns us */
  char *peer;
  NzPreauthSlot slot;
  guint deadline_id;
  guint idle_id;
  guint idle_ms;
} PreauthConn;

#define CONN_KEY "nz-worker-preauth"

static char *
peer_key (GSocketAddress *addr)
{
  g_autofree char *ip = NULL;

  if (!G_IS_INET_SOCKET_ADDRESS (addr))
    return NULL;
  ip = g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (addr)));
  return g_strdup_printf ("%s:%u", ip, g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (addr)));
}

/* Out of the pool: no bound applies any more. */
static void
conn_lift (PreauthConn *p)
{
  if (p->owner != NULL && p->slot.link != NULL)
    nz_preauth_pool_leave (p->owner->pool, &p->slot);
  if (p->owner != NULL && p->peer != NULL
      && g_hash_table_lookup (p->owner->by_peer, p->peer) == p)
    g_hash_table_remove (p->owner->by_peer, p->peer);
  g_clear_handle_id (&p->deadline_id, g_source_remove);
  g_clear_handle_id (&p->idle_id, g_source_remove);
}

static void
conn_free (PreauthConn *p)
{
  conn_lift (p);
  g_free (p->peer);
  g_free (p);
}

/* Out of the pool and off the wire: shut down, not closed, so libsoup sees the end on its own
 * next read and lets go of the connection the usual way (no fd it holds is reused). */
static void
conn_drop (PreauthConn *p, const char *why)
{
  g_debug ("worker connection: %s", why);
  conn_lift (p);
  g_socket_shutdown (p->sock, TRUE, TRUE, NULL);
}

static gboolean
conn_deadline (gpointer user_data)
{
  PreauthConn *p = user_data;

  p->deadline_id = 0;
  conn_drop (p, "pre-auth header deadline expired");
  return G_SOURCE_REMOVE;
}

/* Milliseconds since the last byte arrived, or -1 when the stack does not say. */
static gint64
ms_since_data (GSocket *sock)
{
  struct tcp_info ti;
  socklen_t len = sizeof ti;

  memset (&ti, 0, sizeof ti);
  if (getsockopt (g_socket_get_fd (sock), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0
      || len < offsetof (struct tcp_info, tcpi_last_data_recv) + sizeof ti.tcpi_last_data_recv)
    return -1;
  return ti.tcpi_last_data_recv;
}

static gboolean
conn_idle (gpointer user_data)
{
  PreauthConn *p = user_data;
  gint64 quiet = ms_since_data (p->sock);

  p->idle_id = 0;
  if (quiet < 0)
    return G_SOURCE_REMOVE;
  if (quiet >= p->idle_ms)
    {
      conn_drop (p, "pre-auth idle timeout expired");
      return G_SOURCE_REMOVE;
    }
  /* Bytes came since: look again when this silence would reach the timeout. */
  p->idle_id = g_timeout_add ((guint)(p->idle_ms - quiet), conn_idle, p);
  return G_SOURCE_REMOVE;
}

void
nz_worker_preauth_lift (NzWorkerPreauth *preauth, GSocketAddress *peer)
{
  g_autofree char *key = peer_key (peer);
  PreauthConn *p = key != NULL ? g_hash_table_lookup (preauth->by_peer, key) : NULL;

  if (p == NULL)
    return;
  conn_lift (p);
}

/* Mirrors the agent's pre-auth pool (spec A.4.2): the newcomer is always served and the
 * oldest unauthenticated connection evicted, so a flood of idle connections neither exhausts
 * the worker's fds nor locks out the caller that arrives last. */
void
nz_worker_preauth_start (NzWorkerPreauth *preauth, const NzWorkerConfig *config,
                         GSocketConnection *connection, GSocketAddress *peer)
{
  PreauthConn *p = g_new0 (PreauthConn, 1);
  PreauthConn *evicted;

  p->owner = preauth;
  p->peer = peer_key (peer);
  if (p->peer != NULL)
    g_hash_table_replace (preauth->by_peer, g_strdup (p->peer), p);
  p->sock = g_socket_connection_get_socket (connection);
  g_object_set_data_full (G_OBJECT (p->sock), CONN_KEY, p, (GDestroyNotify)conn_free);
  p->deadline_id = g_timeout_add ((guint)MIN (config->preauth_deadline_ms, G_MAXUINT),
                                  conn_deadline, p);
  /* An idle timeout at or past the deadline could never fire first. */
  if (config->preauth_idle_timeout_ms < config->preauth_deadline_ms)
    {
      p->idle_ms = (guint)MIN (config->preauth_idle_timeout_ms, G_MAXUINT);
      p->idle_id = g_timeout_add (p->idle_ms, conn_idle, p);
    }
  evicted = nz_preauth_pool_join (preauth->pool, &p->slot, p);
  if (evicted != NULL)
    conn_drop (evicted, "too many unauthenticated connections");
}

NzWorkerPreauth *
nz_worker_preauth_new (const NzWorkerConfig *config)
{
  NzWorkerPreauth *preauth = g_new0 (NzWorkerPreauth, 1);

  /* Nothing is charged: libsoup holds what a connection sent, and caps headers itself. */
  preauth->pool = nz_preauth_pool_new ((guint64)config->max_preauth_connections, G_MAXUINT64);
  preauth->by_peer = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return preauth;
}

void
nz_worker_preauth_free (NzWorkerPreauth *preauth)
{
  PreauthConn *p;

  if (preauth == NULL)
    return;
  /* Connections still pending outlive this only until the process exits. */
  while ((p = nz_preauth_pool_oldest (preauth->pool)) != NULL)
    {
      conn_lift (p);
      p->owner = NULL;
    }
  nz_preauth_pool_free (preauth->pool);
  g_hash_table_unref (preauth->by_peer);
  g_free (preauth);
}
