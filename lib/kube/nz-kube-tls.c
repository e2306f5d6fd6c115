/* nz-kube-tls.c: the kube client's verifying GTlsDatabase (nz-kube-tls.h). */
#include "nz-kube-tls.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "nz-kube-error.h"

struct _NzKubeTlsDatabase
{
  GTlsDatabase parent;
  GTlsDatabase *inner;
  char *server_name;
  gboolean insecure;
  GTlsCertificateFlags last_errors;
};

G_DEFINE_FINAL_TYPE (NzKubeTlsDatabase, nz_kube_tls_database, G_TYPE_TLS_DATABASE)

/* A database of ours is the TLS backend's default (nz_kube_tls_database_new); the tools make
 * their clients from one thread. */
static gboolean default_replaced;

static GTlsCertificateFlags
verify_chain (GTlsDatabase *database, GTlsCertificate *chain, const gchar *purpose,
              GSocketConnectable *identity, GTlsInteraction *interaction,
              GTlsDatabaseVerifyFlags flags, GCancellable *cancellable, GError **error)
{
  NzKubeTlsDatabase *self = NZ_KUBE_TLS_DATABASE (database);
  g_autoptr (GSocketConnectable) name = NULL;
  GTlsCertificateFlags f;

  if (self->insecure)
    return 0; /* insecure-skip-tls-verify, warned about when the kubeconfig was read */
  if (self->server_name != NULL)
    name = g_network_address_new (self->server_name, 0);
  f = g_tls_database_verify_chain (self->inner, chain, purpose, name != NULL ? name : identity,
                                   interaction, flags, cancellable, error);
  self->last_errors = f;
  return f;
}

static gchar *
create_certificate_handle (GTlsDatabase *database, GTlsCertificate *certificate)
{
  return g_tls_database_create_certificate_handle (NZ_KUBE_TLS_DATABASE (database)->inner,
                                                   certificate);
}

static GTlsCertificate *
lookup_certificate_for_handle (GTlsDatabase *database, const gchar *handle,
                               GTlsInteraction *interaction, GTlsDatabaseLookupFlags flags,
                               GCancellable *cancellable, GError **error)
{
  return g_tls_database_lookup_certificate_for_handle (
      NZ_KUBE_TLS_DATABASE (database)->inner, handle, interaction, flags, cancellable, error);
}

static GTlsCertificate *
lookup_certificate_issuer (GTlsDatabase *database, GTlsCertificate *certificate,
                           GTlsInteraction *interaction, GTlsDatabaseLookupFlags flags,
                           GCancellable *cancellable, GError **error)
{
  return g_tls_database_lookup_certificate_issuer (
      NZ_KUBE_TLS_DATABASE (database)->inner, certificate, interaction, flags, cancellable, error);
}

static GList *
lookup_certificates_issued_by (GTlsDatabase *database, GByteArray *issuer_raw_dn,
                               GTlsInteraction *interaction, GTlsDatabaseLookupFlags flags,
                               GCancellable *cancellable, GError **error)
{
  return g_tls_database_lookup_certificates_issued_by (NZ_KUBE_TLS_DATABASE (database)->inner,
                                                       issuer_raw_dn, interaction, flags,
                                                       cancellable, error);
}

static void
nz_kube_tls_database_finalize (GObject *object)
{
  NzKubeTlsDatabase *self = NZ_KUBE_TLS_DATABASE (object);

  g_clear_object (&self->inner);
  g_free (self->server_name);
  G_OBJECT_CLASS (nz_kube_tls_database_parent_class)->finalize (object);
}

static void
nz_kube_tls_database_class_init (NzKubeTlsDatabaseClass *klass)
{
  GTlsDatabaseClass *db = G_TLS_DATABASE_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = nz_kube_tls_database_finalize;
  db->verify_chain = verify_chain;
  db->create_certificate_handle = create_certificate_handle;
  db->lookup_certificate_for_handle = lookup_certificate_for_handle;
  db->lookup_certificate_issuer = lookup_certificate_issuer;
  db->lookup_certificates_issued_by = lookup_certificates_issued_by;
}

static void
nz_kube_tls_database_init (NzKubeTlsDatabase *self)
{
}

/* GIO 2.74 builds a CA database only from a file: the bundle goes through a private temp file
 * that is gone again before this returns. */
static GTlsDatabase *
database_from_pem (const char *ca_pem, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree char *path = NULL;
  GTlsDatabase *db;
  int fd = g_file_open_tmp ("nz-kube-ca-XXXXXX.pem", &path, &local);

  if (fd < 0)
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_FAILED, "the cluster CA: %s",
                        local->message),
           NULL;
  close (fd);
  if (!g_file_set_contents (path, ca_pem, -1, &local))
    {
      g_unlink (path);
      return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_FAILED, "the cluster CA: %s",
                          local->message),
             NULL;
    }
  db = g_tls_file_database_new (path, &local);
  g_unlink (path);
  if (db == NULL)
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                        "the cluster CA is not a PEM certificate bundle: %s", local->message),
           NULL;
  return db;
}

GTlsDatabase *
nz_kube_tls_database_new (const char *ca_pem, const char *server_name, gboolean insecure,
                          GError **error)
{
  g_autoptr (NzKubeTlsDatabase) self = g_object_new (NZ_TYPE_KUBE_TLS_DATABASE, NULL);

  if (ca_pem != NULL)
    {
      if (strstr (ca_pem, "-----BEGIN CERTIFICATE-----") == NULL)
        return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                            "the cluster CA holds no PEM certificate"),
               NULL;
      self->inner = database_from_pem (ca_pem, error);
      if (self->inner == NULL)
        return NULL;
      /* glib-networking asks the backend's default database while it constructs each
       * connection (before libsoup sets ours) and builds GnuTLS credentials from it: left
       * unset, that is the system bundle, read and parsed twice (~20 ms of a create). Ours is
       * small; verification still goes through this database, which the session sets. */
    }
  else
    {
      /* The system store: if a client of this process put its own database in the
       * backend's default (below), the system's is made again. Returns a new reference. */
      if (default_replaced)
        g_tls_backend_set_default_database (g_tls_backend_get_default (), NULL);
      default_replaced = FALSE;
      self->inner = g_tls_backend_get_default_database (g_tls_backend_get_default ());
      if (self->inner == NULL)
        return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                            "no system trust store and no cluster CA"),
               NULL;
    }
  self->server_name = g_strdup (server_name);
  self->insecure = insecure;
  /* glib-networking asks the backend's default database while it constructs each
   * connection, before libsoup sets ours, and builds GnuTLS credentials from it; left unset
   * that is the system bundle, read and parsed twice per connection (~25 ms of CPU a create).
   * The verdict is still ours: the session sets this database on each connection and
   * verification asks it. */
  if (ca_pem != NULL)
    {
      g_tls_backend_set_default_database (g_tls_backend_get_default (), G_TLS_DATABASE (self));
      default_replaced = TRUE;
    }
  return G_TLS_DATABASE (g_steal_pointer (&self));
}

GTlsCertificateFlags
nz_kube_tls_database_last_errors (NzKubeTlsDatabase *db)
{
  return db->last_errors;
}

void
nz_kube_tls_database_reset (NzKubeTlsDatabase *db)
{
  db->last_errors = 0;
}
