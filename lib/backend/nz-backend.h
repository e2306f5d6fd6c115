/* nz-backend.h: the backend interface (DESIGN.md "Backends"): create, destroy, capabilities,
 * status, and "give me a transport" (endpoint + token). Tools never switch on the backend;
 * they look it up by name here. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <signal.h>

#include "nz-agent-client.h"
#include "nz-state.h"
#include "nz-transport.h"

G_BEGIN_DECLS

#define NZ_BACKEND_DEFAULT "container:bwrap"

/* Spec A.5: the container paths a layout mount lands on when it names none. */
#define NZ_LAYOUT_OUTPUTS_PATH "/mnt/user-data/outputs"
#define NZ_LAYOUT_UPLOADS_PATH "/mnt/user-data/uploads"
#define NZ_LAYOUT_SCRATCH_PATH "/mnt/user-data/scratch"
#define NZ_LAYOUT_TOOL_RESULTS_PATH "/mnt/user-data/tool_results"
#define NZ_LAYOUT_TRANSCRIPTS_PATH "/mnt/transcripts"
#define NZ_LAYOUT_SKILLS_PARENT "/mnt/skills"

/* Numeric option bounds, one place for the flags and the config (nz_create_options_validate).
 * 1 TiB of MiB: far above any host, far below where MiB -> bytes overflows 64 bits. */
#define NZ_LIMIT_MB_MAX (G_GINT64_CONSTANT (1) << 20)
/* Docker's own floor for --cpus; below it the CFS quota is under the kernel's 1 ms minimum. */
#define NZ_CPUS_MIN 0.01

/* Bound of --ttl and --idle-timeout: 100 years, so created + ttl stays a safe integer. */
#define NZ_LIFETIME_MAX_MS (G_GINT64_CONSTANT (100) * 366 * 24 * 3600 * 1000)

/* Readiness deadline default, spec B.1 (readyTimeoutMs). */
#define NZ_READY_TIMEOUT_MS_DEFAULT 30000

typedef enum
{
  NZ_NETWORK_DENY_ALL,  /* only loopback */
  NZ_NETWORK_ALLOW_ALL, /* the host's network */
  NZ_NETWORK_ALLOWLIST, /* egress only to the listed hosts */
} NzNetwork;

typedef struct
{
  char *label;          /* "outputs", "uploads", ..., "skill:<id>" */
  char *host_path;      /* absolute host directory */
  char *container_path; /* absolute path inside the sandbox */
  gboolean writable;
} NzMount;

/* Everything namzu-create was asked for, from --config and flags (flags win). */
typedef struct
{
  char *backend;              /* NULL means NZ_BACKEND_DEFAULT */
  char *image;                /* only for image-based backends */
  NzNetwork network;
  GPtrArray *egress_hosts;    /* char *, for NZ_NETWORK_ALLOWLIST */
  char *egress_profile;       /* JSON text of an egress profile ({name, hosts}), or NULL */
  char *egress_credentials;   /* JSON [{host, header, value}] for the egress proxy, or NULL;
                               * holds secrets: never printed, never on any argv */
  gint64 memory_mb;           /* 0 = unset */
  gint64 max_processes;       /* 0 = unset */
  double cpus;                /* 0 = unset */
  gint64 disk_mb;             /* 0 = unset; bounds each writable scratch filesystem (tmpfs) */
  gint64 default_timeout_ms;  /* 0 = unset; recorded, the per-exec timeout is the agent's */
  guint ready_timeout_ms;
  /* Lifetime (namzu extension, --ttl / ttlMs, --idle-timeout / idleTimeoutMs): 0 = unset. The
   * sandbox's own server ends it, so nothing on the host has to outlive the create. */
  gint64 ttl_ms;
  gint64 idle_timeout_ms;
  GPtrArray *mounts;          /* NzMount *, layout order */
  GPtrArray *writable_paths;  /* char *, extra writable tmpfs paths */
  gboolean read_only_rootfs;
  /* container:bwrap run by a user with no subordinate ids: accept an agent that shares the
   * workload's uid, which the workload can then signal (--agent-shares-uid). Refused
   * otherwise, and on every other backend. */
  gboolean agent_shares_uid;
  /* The sandbox's environment (nz-sandbox-env.h): char * "NAME=VALUE", names unique, in the
   * order given; every command gets it, under its own per-command env. */
  GPtrArray *env;
  /* The backend's own options, a type private to it (docker/nz-docker-options.h), parsed by
   * its parse_config from the config's backend section and namzu-create's backend flags;
   * NULL until it parsed any. @backend_opts_for names whose they are: a create on another
   * backend refuses them rather than ignoring them. */
  gpointer backend_opts;
  GDestroyNotify backend_opts_free;
  const char *backend_opts_for;
  /* Set (from a signal handler) to abandon a create in progress: it is rolled back and fails
   * with "interrupted". May be NULL. */
  volatile sig_atomic_t *interrupted;
  /* Called now and then (every second at least) while the backend waits for the sandbox to
   * answer, for a waiting line on a terminal. May be NULL. */
  void (*waiting) (gpointer waiting_data);
  gpointer waiting_data;
} NzCreateOptions;

NzCreateOptions *nz_create_options_new (void);
void nz_create_options_free (NzCreateOptions *opts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzCreateOptions, nz_create_options_free)

/* Sets the outputs/uploads host directory (flags --outputs / --uploads), replacing a mount of
 * the same label; the container path is the spec default. */
gboolean nz_create_options_set_mount (NzCreateOptions *opts, const char *label,
                                      const char *host_path, GError **error);

/* Reads the reference provider config (DESIGN.md "Configuration") into @opts. Validates the
 * whole document before returning, without I/O; every refusal names the field, e.g.
 * "defaultMemoryLimitMb: must be a positive integer". */
gboolean nz_create_options_load_config (NzCreateOptions *opts, const char *data, gssize len,
                                        GError **error);

/* namzu-create's backend flags, as the config's backend.* keys they stand for (@keys: e.g.
 * {"network": "n1"} for --docker-network n1), parsed by the backend @opts names, over what the
 * config said. @flag_of maps each key to its flag for refusals (key, flag, ..., NULL). A key
 * the backend does not read is refused (UNSUPPORTED), naming the flag and whose key it is. */
gboolean nz_create_options_set_backend_flags (NzCreateOptions *opts, JsonObject *keys,
                                              const char *const *flag_of, GError **error);

/* Spec B.2: a container path starts with '/', has at least one segment, and no empty, '.' or
 * '..' segment. */
gboolean nz_container_path_is_normalised (const char *path);

/* Checks what needs no I/O and is common to every backend (paths absolute and normalised, no
 * duplicate container paths, limits in range, a disk bound only where it can hold). */
gboolean nz_create_options_validate (const NzCreateOptions *opts, GError **error);

/* Refuses --disk-mb where it cannot hold: beside a writable host directory on a filesystem
 * larger than the bound, or a writable root. Looks at the host directories (statvfs). */
gboolean nz_create_options_check_disk (const NzCreateOptions *opts, GError **error);

/* The limits the handle records and shows: memoryMb, maxProcesses, cpus, diskMb, each only
 * when set. Returns a new reference. */
JsonObject *nz_create_options_limits (const NzCreateOptions *opts);

/* Refuses a CPU limit outside [NZ_CPUS_MIN, the host's CPU count] (NaN and infinities too),
 * naming @field: beyond the host it limits nothing, and a huge double is what json-glib writes
 * as invalid JSON ("1e+17.0"), which would corrupt the handle. */
gboolean nz_cpus_check (double cpus, const char *field, GError **error);

typedef enum
{
  NZ_SANDBOX_RUNNING,      /* processes alive and the agent answers healthz */
  NZ_SANDBOX_UNRESPONSIVE, /* processes alive, agent does not answer */
  NZ_SANDBOX_DEAD,         /* processes gone */
  NZ_SANDBOX_EXPIRED,      /* processes gone, ended by its lifetime (ttl or idle timeout) */
  NZ_SANDBOX_SUSPENDED,    /* no processes, its disk kept: namzu-resume wakes it */
} NzSandboxStatus;

/* Sets h->expires_at_ms and h->idle_timeout_ms from @opts, counted from h->created_at_ms
 * (which must be set). */
void nz_handle_set_lifetime (NzHandle *h, const NzCreateOptions *opts);
/* TRUE when @h has a deadline and the wall clock is past it. */
gboolean nz_handle_is_past_deadline (const NzHandle *h);

const char *nz_sandbox_status_name (NzSandboxStatus status);

/* Where a backend laid a sandbox out, as the tools need it (seed): read from the backend,
 * never from the handle's private record. */
typedef struct
{
  /* The sandbox directory whose contents the host collects as the task's output (the docker
   * outputs bind, the worker's workspace), normalised; NULL when nothing there is shipped. */
  char *collected_dir;
  /* Its name in a refusal, e.g. "docker outputs bind". */
  const char *collected_name;
} NzLayout;

void nz_layout_clear (NzLayout *layout);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzLayout, nz_layout_clear)

/* namzu-suspend's options (spec D.8.5). */
typedef struct
{
  gboolean quiesce; /* stop the workload's processes first */
  gint64 grace_ms;  /* the quiesce's grace (0: the agent's) */
  gboolean flush;   /* flush the workspace filesystem first */
  gint64 epoch;     /* the holder epoch the write carries; -1: the one the handle holds */
} NzSuspendOptions;

typedef struct _NzBackend NzBackend;
struct _NzBackend
{
  const char *name;      /* "container:bwrap" */
  const char *tier;      /* "container" */
  const char *transport; /* "agent" | "worker" */
  /* The reference config's backend.* keys it reads (besides tier, runtime and service), and
   * its parser of them into @opts: every refusal appended to @reasons names the field. A key
   * only another backend reads is refused by the caller, naming that backend. */
  const char *const *config_keys;
  void (*parse_config) (JsonObject *backend, NzCreateOptions *opts, GPtrArray *reasons);
  /* Refuses what this backend cannot enforce, before any I/O. */
  gboolean (*check) (const NzCreateOptions *opts, GError **error);
  /* Starts a sandbox and returns its handle once its transport answers; on failure nothing is
   * left behind. */
  NzHandle *(*create) (const NzCreateOptions *opts, GError **error);
  /* Tears it down, checked; on failure the state is kept so destroy can be retried. */
  gboolean (*destroy) (NzHandle *h, GError **error);
  NzSandboxStatus (*status) (NzHandle *h, guint timeout_ms);
  /* Adds this sandbox's capabilities to the public handle. */
  void (*describe) (NzHandle *h, JsonObject *public_handle);
  /* Fills @out with where this sandbox's directories are (NULL: nothing to say). */
  void (*layout) (NzHandle *h, NzLayout *out);
  /* Tears down a sandbox whose remote outcome is unknown (a cancellation the peer could not
   * confirm) under a bounded deadline, checked like destroy. NULL: destroy is used. */
  gboolean (*retire) (NzHandle *h, GError **error);
  /* How a host reaches the sandbox: its endpoint and the credential it presents (a bearer
   * token for the agent and worker tiers; a TLS client certificate where a tier needs one). */
  NzTransport *(*open_transport) (NzHandle *h, GError **error);
  /* Live policy change (spec B.7 setNetworkPolicy) of the loaded sandbox @h (re-read under
   * its lock). NULL: refused. */
  gboolean (*set_network_policy) (NzHandle *h, const char *const *hosts, gboolean *changed,
                                  GError **error);
  /* Stops a sandbox whose disk outlives its processes (a workspace) and keeps the disk; what
   * was done goes into @report. NULL: refused. */
  gboolean (*suspend) (NzHandle *h, const NzSuspendOptions *o, JsonObject *report,
                       GError **error);
  /* Wakes a suspended one (a new guest on the same disk), under holder epoch @epoch (-1: the
   * handle's). NULL: refused. */
  gboolean (*resume) (NzHandle *h, gint64 epoch, JsonObject *report, GError **error);
};

/* The backend called @name. Known names that this build does not implement are refused with
 * UNSUPPORTED ("backend 'X' is not available in this build yet"); other names with
 * INVALID_ARGS. */
const NzBackend *nz_backend_lookup (const char *name, GError **error);
/* Every backend name namzu knows, implemented or not. */
const char *const *nz_backend_names (void);

/* check + create with the backend @opts names. */
NzHandle *nz_backend_create (const NzCreateOptions *opts, GError **error);
/* destroy with the backend the handle names; then leaves the id's tombstone (nz-state.h). */
gboolean nz_backend_destroy (NzHandle *h, GError **error);
/* Destroys sandbox @id, idempotently: one whose processes or container were already gone, and
 * one destroyed before (a tombstone), succeed with *@already_gone TRUE. An id namzu never knew
 * (or whose tombstone was pruned) stays NOT_FOUND. */
gboolean nz_backend_destroy_id (const char *id, gboolean *already_gone, GError **error);
NzSandboxStatus nz_backend_status (NzHandle *h, guint timeout_ms);
/* After an unconfirmed cancellation: retire (or destroy) with the backend the handle names, so
 * nothing of an execution whose outcome is unknown keeps running. */
gboolean nz_backend_retire (NzHandle *h, GError **error);
/* setNetworkPolicy with the backend the handle names: one change at a time per sandbox, an
 * identical list is a no-op (*changed FALSE), under a profile only narrowing, fails closed. */
gboolean nz_backend_set_network_policy (NzHandle *h, const char *const *hosts, gboolean *changed,
                                        GError **error);
/* suspend / resume with the backend the handle names (UNSUPPORTED where it has none). */
gboolean nz_backend_suspend (NzHandle *h, const NzSuspendOptions *o, JsonObject *report,
                             GError **error);
gboolean nz_backend_resume (NzHandle *h, gint64 epoch, JsonObject *report, GError **error);
/* The heartbeat a long stream to the sandbox asks for by default (spec D.4 streamHeartbeatMs,
 * microvm:kubernetes's backend.streamHeartbeatMs; 0 is none), or -1 when its configuration
 * sets none. */
gint64 nz_handle_stream_heartbeat_ms (NzHandle *h);
/* A tool's heartbeat: @parsed (from --heartbeat, or nz_liveness_parse's default) unless neither
 * --heartbeat (@opt NULL) nor $NAMZU_STREAM_HEARTBEAT_MS was given and the sandbox @h (may be
 * NULL) sets its own. */
gint64 nz_backend_stream_heartbeat_ms (NzHandle *h, const char *opt, gint64 parsed);
/* "Give me a transport": open_transport of the backend the handle names. */
NzTransport *nz_backend_open_transport (NzHandle *h, GError **error);
/* The open_transport of a backend whose handle records its endpoint and per-instance token. */
NzTransport *nz_backend_bearer_transport (NzHandle *h, GError **error);

/* The sandbox a tool talks to, in one place: @endpoint (--endpoint, with $NAMZU_TOKEN as its
 * bearer token: an agent used directly, no sandbox), else the sandbox @sandbox (--sandbox),
 * $NAMZU_SANDBOX or, when @stdin_ok, the handle namzu-create printed, on stdin
 * (nz_handle_resolve), and its backend's transport. *@handle (may be NULL) gets the loaded
 * handle, or NULL with @endpoint. */
NzTransport *nz_sandbox_open (const char *endpoint, const char *sandbox, gboolean stdin_ok,
                              NzHandle **handle, GError **error);
/* nz_sandbox_open, then a client for it (nz_agent_client_new_for). */
NzAgentClient *nz_sandbox_open_client (const char *endpoint, const char *sandbox,
                                       gboolean stdin_ok, NzHandle **handle, GError **error);
/* The layout the backend the handle names reports (zeroed when it has none). Clear it with
 * nz_layout_clear(). */
void nz_backend_layout (NzHandle *h, NzLayout *out);
/* The public handle: id, backend, tier, createdAt, rootDir, capabilities — never the token.
 * Returns a new reference. */
JsonObject *nz_backend_public_handle (NzHandle *h);

G_END_DECLS
