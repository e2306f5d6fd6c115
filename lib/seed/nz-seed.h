/* nz-seed.h: sandbox seeds (spec G): make git repositories present under a root inside a
 * sandbox, doing only what is missing, through nothing but the sandbox's exec transport.
 *
 * A seed is {name, repositories:[{name?, url, dir? (alias path), ref?, commit?, depth?}]}.
 * nz_seed_parse() validates it in full without I/O; nz_seed_ensure() checks every repository,
 * refuses drift before cloning anything, clones what is missing into a partial sibling and
 * renames it into place, writes the marker and sweeps stale partials. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-agent-client.h"

G_BEGIN_DECLS

/* The seed tier's own error domain: the reference's SandboxSeedErrorCode (spec G.1). */
#define NZ_SEED_ERROR (nz_seed_error_quark ())
GQuark nz_seed_error_quark (void);

typedef enum
{
  NZ_SEED_ERROR_INVALID,      /* "invalid": the seed, the root, or what the root holds */
  NZ_SEED_ERROR_TOOL_MISSING, /* "tool-missing": the sandbox lacks sh, git, find, ... */
  NZ_SEED_ERROR_CLONE_FAILED, /* "clone-failed" */
  NZ_SEED_ERROR_DRIFT,        /* "drift": refused, nothing was changed */
} NzSeedErrorCode;

/* "invalid" | "tool-missing" | "clone-failed" | "drift", or NULL for another domain. */
const char *nz_seed_error_code_name (const GError *error);

/* Every message starts with this (spec G.1: SandboxSeedError's message prefix). */
#define NZ_SEED_MESSAGE_PREFIX "sandbox seed: "
/* A clone in progress lives in "<dir>" NZ_SEED_PARTIAL_INFIX "<12 hex>" until its rename. */
#define NZ_SEED_PARTIAL_INFIX ".namzu-partial-"
/* Partials older than this were left by a crashed call (spec G.3 STALE_PARTIAL_MINUTES): a
 * live clone's directory is touched as it writes, so it never looks this old. */
#define NZ_SEED_STALE_PARTIAL_MINUTES 60
/* Clone depth when the seed names none and pins no commit (spec G.3: `depth ?? 1`). */
#define NZ_SEED_DEFAULT_DEPTH 1

typedef struct
{
  char *name;   /* DNS-1123 label, unique in the seed */
  char *url;    /* https:// or http://, no credentials */
  char *dir;    /* relative to root; defaults to name */
  char *ref;    /* branch or tag, or NULL for the remote's default branch */
  char *commit; /* full lowercase SHA-1/SHA-256, or NULL */
  gint64 depth; /* 0 = unset */
} NzSeedRepo;

typedef struct
{
  char *name;
  GPtrArray *repos; /* NzSeedRepo *, seed order */
} NzSeed;

void nz_seed_free (NzSeed *seed);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzSeed, nz_seed_free)

/* Parses and validates a seed document (spec G.2). Every refusal is NZ_SEED_ERROR_INVALID and
 * names the member, e.g. "sandbox seed: repositories[1].url: ...". Unknown members are
 * ignored. */
NzSeed *nz_seed_parse (const char *data, gssize len, GError **error);

/* The URL rule alone (spec G.2 refuseUrl): https/http only, no credentials, no scp-style
 * address, no whitespace. @field names the member in the message; the URL itself is never
 * echoed, since it may carry a credential. */
gboolean nz_seed_check_url (const char *url, const char *field, GError **error);

/* TRUE for a full lowercase SHA-1 or SHA-256 object id (spec G.2 COMMIT_ID). */
gboolean nz_seed_is_commit_id (const char *s);

/* Hex SHA-256 of the seed's canonical JSON (spec G.2 sandboxSeedDigest). Returns a new string. */
char *nz_seed_digest (const NzSeed *seed);

/* The root rule (spec G.3 step 0): absolute, no ".." segment, no whitespace. */
gboolean nz_seed_check_root (const char *root, GError **error);

/* The layout rule: the root must not be in @collected_dir, the sandbox directory the host
 * collects as the task's output (the backend's layout says which: on container:docker and
 * container:runsc the outputs bind, the worker's workspace; NULL: none), named
 * @collected_name in the refusal. Paths are compared as the kernel resolves them. */
gboolean nz_seed_check_root_layout (const char *root, const char *collected_dir,
                                    const char *collected_name, GError **error);

/* Called before each step, for a progress line on a terminal. */
typedef void (*NzSeedProgressFunc) (const char *message, gpointer user_data);

typedef struct
{
  const char *root;      /* required; checked with nz_seed_check_root() */
  gint64 timeout_ms;     /* per exec; 0 = the transport's default */
  gboolean report_drift; /* onDrift 'report': report drift instead of refusing */
  NzSeedProgressFunc progress;
  gpointer progress_data;
} NzSeedOptions;

/* Makes @seed present under @opts->root in the sandbox behind @client (spec G.3).
 *
 * *@out_report (may be NULL) receives the report once the check ran, also on failure:
 * {seed, digest, root, repositories:[{name, dir, status, commit}]} with status "present",
 * "cloned", "drifted", or "missing" (not cloned because drift was refused); commit is HEAD or
 * null. Drift (unless @opts->report_drift) fails with NZ_SEED_ERROR_DRIFT before anything is
 * cloned or written. Transport errors come through as lib/client reports them (including
 * G_IO_ERROR_CANCELLED once a cancelled remote command was confirmed stopped). */
gboolean nz_seed_ensure (NzAgentClient *client, const NzSeed *seed, const NzSeedOptions *opts,
                         JsonObject **out_report, GCancellable *cancellable, GError **error);

G_END_DECLS
