/* nz-kube-tls.h: the GTlsDatabase the kube client verifies the API server with (private to
 * lib/kube). It delegates to the cluster CA bundle's database (or the system's) and verifies
 * against tls-server-name when set, or accepts anything under insecure-skip-tls-verify: the
 * verdict is always ours, never a fallback of the TLS backend's. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define NZ_TYPE_KUBE_TLS_DATABASE (nz_kube_tls_database_get_type ())
G_DECLARE_FINAL_TYPE (NzKubeTlsDatabase, nz_kube_tls_database, NZ, KUBE_TLS_DATABASE, GTlsDatabase)

/* @ca_pem NULL: the system trust store. @server_name NULL: the name the TLS backend passes
 * (the URL's host). */
GTlsDatabase *nz_kube_tls_database_new (const char *ca_pem, const char *server_name,
                                        gboolean insecure, GError **error);

/* The flags of the last refused verification (0 when none was refused). */
GTlsCertificateFlags nz_kube_tls_database_last_errors (NzKubeTlsDatabase *db);
void nz_kube_tls_database_reset (NzKubeTlsDatabase *db);

G_END_DECLS
