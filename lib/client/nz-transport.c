#include "nz-transport.h"

#include <string.h>

NzTransport *
nz_transport_new (const char *endpoint, const char *token)
{
  NzTransport *t = g_new0 (NzTransport, 1);

  g_return_val_if_fail (endpoint != NULL, NULL);
  t->endpoint = g_strdup (endpoint);
  if (token != NULL && *token != '\0')
    {
      t->credential.kind = NZ_CREDENTIAL_BEARER;
      t->credential.token = g_strdup (token);
    }
  return t;
}

NzTransport *
nz_transport_new_tls (const char *endpoint, const char *cert_pem, const char *key_pem,
                      const char *ca_pem)
{
  NzTransport *t = nz_transport_new (endpoint, NULL);

  g_return_val_if_fail (cert_pem != NULL && key_pem != NULL && ca_pem != NULL, t);
  t->credential.kind = NZ_CREDENTIAL_TLS_CLIENT;
  t->credential.cert_pem = g_strdup (cert_pem);
  t->credential.key_pem = g_strdup (key_pem);
  t->credential.ca_pem = g_strdup (ca_pem);
  return t;
}

static void
wipe_free (char *secret)
{
  if (secret == NULL)
    return;
  explicit_bzero (secret, strlen (secret));
  g_free (secret);
}

void
nz_transport_free (NzTransport *t)
{
  if (t == NULL)
    return;
  g_free (t->endpoint);
  wipe_free (t->credential.token);
  wipe_free (t->credential.key_pem);
  g_free (t->credential.cert_pem);
  g_free (t->credential.ca_pem);
  g_free (t->sandbox_id);
  g_free (t);
}

const char *
nz_credential_kind_name (NzCredentialKind kind)
{
  switch (kind)
    {
    case NZ_CREDENTIAL_NONE:
      return "none";
    case NZ_CREDENTIAL_BEARER:
      return "bearer";
    case NZ_CREDENTIAL_TLS_CLIENT:
      return "tls-client";
    }
  return "none";
}
