#include "nz-netlink.h"

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <sys/socket.h>

#include "nz-errors.h"

/* autoptr typedefs for the libnl handles used here (STYLE.md). */
typedef struct nl_sock NzNlSock;
typedef struct nl_cache NzNlCache;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzNlSock, nl_socket_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzNlCache, nl_cache_free)

static gboolean
netlink_open (struct nl_sock **out, GError **error)
{
  g_autoptr (NzNlSock) sk = nl_socket_alloc ();
  int err;

  if (sk == NULL)
    return nz_throw (error, NZ_ERROR_FAILED, "netlink: cannot allocate a socket");
  err = nl_connect (sk, NETLINK_ROUTE);
  if (err < 0)
    return nz_throw (error, NZ_ERROR_FAILED, "netlink: connect: %s", nl_geterror (err));
  *out = g_steal_pointer (&sk);
  return TRUE;
}

GPtrArray *
nz_netlink_local_addresses (GError **error)
{
  g_autoptr (NzNlSock) sk = NULL;
  g_autoptr (NzNlCache) cache = NULL;
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_object_unref);
  int err;

  if (!netlink_open (&sk, error))
    return NULL;
  err = rtnl_addr_alloc_cache (sk, &cache);
  if (err < 0)
    return (nz_throw (error, NZ_ERROR_FAILED, "netlink: address dump: %s", nl_geterror (err)),
            NULL);
  for (struct nl_object *o = nl_cache_get_first (cache); o != NULL; o = nl_cache_get_next (o))
    {
      struct rtnl_addr *a = (struct rtnl_addr *)o;
      struct nl_addr *local = rtnl_addr_get_local (a); /* borrowed */
      GSocketFamily family;
      gsize want;

      if (local == NULL)
        continue;
      switch (nl_addr_get_family (local))
        {
        case AF_INET:
          family = G_SOCKET_FAMILY_IPV4;
          want = 4;
          break;
        case AF_INET6:
          family = G_SOCKET_FAMILY_IPV6;
          want = 16;
          break;
        default:
          continue;
        }
      if (nl_addr_get_len (local) != want)
        continue;
      g_ptr_array_add (out,
                       g_inet_address_new_from_bytes (nl_addr_get_binary_addr (local), family));
    }
  return g_steal_pointer (&out);
}

gboolean
nz_netlink_drop_default_routes (guint *n_dropped, GError **error)
{
  g_autoptr (NzNlSock) sk = NULL;
  guint dropped = 0;

  if (!netlink_open (&sk, error))
    return FALSE;
  for (int family = AF_INET; family != 0; family = family == AF_INET ? AF_INET6 : 0)
    {
      g_autoptr (NzNlCache) cache = NULL;
      int err = rtnl_route_alloc_cache (sk, family, 0, &cache);

      if (err < 0)
        return nz_throw (error, NZ_ERROR_FAILED, "netlink: route dump: %s", nl_geterror (err));
      for (struct nl_object *o = nl_cache_get_first (cache); o != NULL;
           o = nl_cache_get_next (o))
        {
          struct rtnl_route *r = (struct rtnl_route *)o;
          struct nl_addr *dst = rtnl_route_get_dst (r); /* borrowed */

          /* A default route is the one whose destination prefix is 0 bits long. */
          if (dst != NULL && nl_addr_get_prefixlen (dst) != 0)
            continue;
          err = rtnl_route_delete (sk, r, 0);
          if (err < 0)
            return nz_throw (error, NZ_ERROR_FAILED, "netlink: delete the default route: %s",
                             nl_geterror (err));
          dropped++;
        }
    }
  if (n_dropped != NULL)
    *n_dropped = dropped;
  return TRUE;
}
