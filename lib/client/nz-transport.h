/* nz-transport.h: how a host reaches a sandbox's agent or worker — an endpoint and the
 * credential it must present, as a type. A backend's open_transport returns one
 * (nz-backend.h); the client dials it (nz_agent_client_new_for). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  NZ_CREDENTIAL_NONE,       /* nothing to present (a unix socket only we can reach) */
  NZ_CREDENTIAL_BEARER,     /* the per-instance token, in the envelope or Authorization */
  NZ_CREDENTIAL_TLS_CLIENT, /* a client certificate and key, and the CA the server's
                             * certificate must chain to (pinned: the system store is not
                             * consulted) */
} NzCredentialKind;

typedef struct
{
  NzCredentialKind kind;
  char *token;    /* BEARER */
  char *cert_pem; /* TLS_CLIENT: the client certificate chain */
  char *key_pem;  /* TLS_CLIENT: its private key */
  char *ca_pem;   /* TLS_CLIENT: the pinned CA */
} NzCredential;

typedef struct _NzTransport NzTransport;

/* Where sandbox @sandbox_id's agent is now (spec D.7 rebind: a replaced pod has a new address
 * and a new token): a new transport, or NULL with @error. */
typedef NzTransport *(*NzTransportRebindFunc) (const char *sandbox_id, GError **error);

struct _NzTransport
{
  /* unix:/PATH, tcp:HOST:PORT, http://HOST:PORT (a namzu-worker), vsock:CID:PORT */
  char *endpoint;
  NzCredential credential;
  /* Set by a backend whose agent can move (microvm:kubernetes); a client made from this
   * transport then rebinds once when a call could not dial or its token was refused
   * (nz_agent_client_new_for). */
  NzTransportRebindFunc rebind;
  char *sandbox_id;
};

/* @endpoint with @token as a bearer credential, or none when @token is NULL or empty. */
NzTransport *nz_transport_new (const char *endpoint, const char *token);
/* @endpoint with a TLS client credential (PEM texts, copied). */
NzTransport *nz_transport_new_tls (const char *endpoint, const char *cert_pem,
                                   const char *key_pem, const char *ca_pem);
/* Frees @t; the secrets (token, key) are wiped first. */
void nz_transport_free (NzTransport *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzTransport, nz_transport_free)

/* "bearer", "none", "tls-client". */
const char *nz_credential_kind_name (NzCredentialKind kind);

G_END_DECLS
