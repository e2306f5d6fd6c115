/* nz-egress-live.h: what every backend with an egress proxy shares: the create-time checks of
 * an allowlist, a profile and brokered credentials (no I/O), and the live policy change (spec
 * B.7 setNetworkPolicy) around a backend's own "stop the proxy" and "start one". */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-backend.h"
#include "nz-state.h"

G_BEGIN_DECLS

/* The lock file in a sandbox's state directory that serialises its policy changes (and, on
 * docker, its teardown against them). */
#define NZ_EGRESS_LOCK_FILE "egress.lock"

/* Parses [{host, header, value}]: each a non-empty string. Returns a new array node. */
JsonNode *nz_egress_parse_credentials (const char *json, GError **error);

/* What needs no I/O: every host matches the allowlist grammar; a profile (JSON text in
 * opts->egress_profile) is valid; every brokered credential (opts->egress_credentials) is
 * well formed and names a host the profile (or, without one, the allowlist) covers. @backend
 * ("bwrap", "docker", "runsc") is named in the refusals. */
gboolean nz_egress_options_check (const NzCreateOptions *opts, const char *backend,
                                  GError **error);

/* Takes the per-sandbox egress lock of @dir (blocking). Returns the fd, or -1 with @error. */
int nz_egress_lock (const char *dir, GError **error);

typedef struct
{
  const char *backend;        /* named in refusals: "bwrap", "docker", "runsc" */
  const char *running_member; /* member of h->priv.egress present while a proxy runs */
  /* Stops the proxy recorded in h->priv.egress and forgets it (checked). */
  gboolean (*stop) (NzHandle *h, GError **error);
  /* Starts a proxy for @hosts and records it (with the hosts) in h->priv.egress. */
  gboolean (*start) (NzHandle *h, const char *const *hosts, GError **error);
} NzEgressSwap;

/* setNetworkPolicy of the loaded sandbox @h: hosts validated and (under a profile) narrowing checked before queueing;
 * then under the lock, re-reading the handle: the same list (same order) with a proxy running
 * is a no-op; otherwise the handle forgets the applied list, the old proxy stops, then the
 * new one starts (fails closed); a failure leaves no proxy and the next call swaps. */
gboolean nz_egress_live_set (NzHandle *h, const char *const *hosts, const NzEgressSwap *swap,
                             gboolean *changed, GError **error);

G_END_DECLS
