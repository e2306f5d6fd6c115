/* nz-proxy.h: the egress proxy (spec E.3/E.4): HTTP forward proxy and CONNECT on GIO. */
#pragma once

#include <gio/gio.h>

#include "nz-proxy-config.h"

G_BEGIN_DECLS

typedef struct
{
  NzProxyConfig *config;    /* borrowed */
  const char *bind_host;    /* TCP listen address; NULL with @unix_path set = no TCP */
  const char *unix_path;    /* also (or only) listen on this unix socket; may be NULL */
  const char *log_path;     /* decision log; NULL = stderr */
  guint max_connections;    /* concurrent client connections; more are refused with 503 */
  guint idle_timeout_s;     /* a connection with no traffic either way for this long is closed */
  const char *test_resolve; /* TEST ONLY: "name=addr[;addr],..." replaces DNS entirely */
  const char *ca_file;      /* extra trust anchors for upstream TLS; NULL = system store */
} NzProxyOptions;

/* Binds, prints the listening line on stdout, serves until SIGTERM/SIGINT. Returns the exit
 * code (0 after a signal). */
int nz_proxy_run (const NzProxyOptions *opts, GError **error);

G_END_DECLS
