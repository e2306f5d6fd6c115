#include "nz-backend.h"

#include <math.h>
#include <string.h>
#include <sys/statvfs.h>

#include "nz-backend-config.h"
#include "nz-bwrap-egress.h"
#include "nz-bwrap.h"
#include "nz-docker-egress.h"
#include "nz-docker.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"
#include "nz-sandbox-env.h"
#ifdef NZ_HAVE_KUBE
#include "nz-kube-backend.h"
#include "nz-kube-task-egress.h"
#include "nz-kube-ws.h"
#endif

/* ---- the table ---------------------------------------------------------------------- */

static const NzBackend bwrap_backend = {
  .name = "container:bwrap",
  .tier = "container",
  .transport = "agent",
  .config_keys = nz_bwrap_config_keys,
  .parse_config = nz_bwrap_parse_config,
  .check = nz_bwrap_check,
  .create = nz_bwrap_create,
  .destroy = nz_bwrap_destroy,
  .status = nz_bwrap_status,
  .describe = nz_bwrap_describe,
  .open_transport = nz_backend_bearer_transport,
  .set_network_policy = nz_bwrap_egress_set,
};

/* container:runsc is container:docker with `--runtime runsc` (spec A.1): the same
 * functions under another name, so one initialiser serves both and they cannot drift. */
#define DOCKER_FAMILY_BACKEND(backend_name)                                                        \
  {                                                                                                \
    .name = (backend_name), .tier = "container", .transport = "worker",                            \
    .config_keys = nz_docker_config_keys, .parse_config = nz_docker_parse_config,                  \
    .check = nz_docker_check, .create = nz_docker_create, .destroy = nz_docker_destroy,            \
    .status = nz_docker_status, .describe = nz_docker_describe, .layout = nz_docker_layout,        \
    .retire = nz_docker_retire,                                                                    \
    .open_transport = nz_backend_bearer_transport, .set_network_policy = nz_docker_egress_set,     \
  }

static const NzBackend docker_backend = DOCKER_FAMILY_BACKEND ("container:docker");
static const NzBackend runsc_backend = DOCKER_FAMILY_BACKEND ("container:runsc");

#ifdef NZ_HAVE_KUBE
/* microvm:kubernetes: a pod of the agent-sandbox controller, its agent over TCP with the pod
 * uid as the token; open_transport renews the lease (nz-kube-backend.h); set_network_policy
 * only with backend.egress.perSandbox (nz-kube-task-egress.h). */
static const NzBackend kube_backend = {
  .name = NZ_KUBE_BACKEND_NAME,
  .tier = "microvm",
  .transport = "agent",
  .config_keys = nz_kube_config_keys,
  .parse_config = nz_kube_parse_config,
  .check = nz_kube_backend_check,
  .create = nz_kube_backend_create,
  .destroy = nz_kube_backend_destroy,
  .status = nz_kube_backend_status,
  .describe = nz_kube_backend_describe,
  .open_transport = nz_kube_backend_open_transport,
  .set_network_policy = nz_kube_backend_set_network_policy,
  .suspend = nz_kube_ws_suspend,
  .resume = nz_kube_ws_resume,
};
#define KUBE_BACKEND (&kube_backend)
#else
#define KUBE_BACKEND NULL
#endif

/* Named now so a config written for them is recognised and refused by name, rather than
 * reported as a typo. NULL = not in this build yet. */
static const struct
{
  const char *name;
  const NzBackend *impl;
} backend_table[] = {
  { "container:bwrap", &bwrap_backend },
  { "container:docker", &docker_backend },
  { "container:runsc", &runsc_backend },
  { "microvm:firecracker", NULL },
  { "microvm:kubernetes", KUBE_BACKEND },
  { "container:aci-standby-pool", NULL },
};

const char *const *
nz_backend_names (void)
{
  static const char *names[G_N_ELEMENTS (backend_table) + 1];

  for (gsize i = 0; i < G_N_ELEMENTS (backend_table); i++)
    names[i] = backend_table[i].name;
  return names;
}

const NzBackend *
nz_backend_lookup (const char *name, GError **error)
{
  g_autofree char *known = NULL;

  if (name == NULL)
    name = NZ_BACKEND_DEFAULT;
  for (gsize i = 0; i < G_N_ELEMENTS (backend_table); i++)
    if (strcmp (backend_table[i].name, name) == 0)
      {
        g_autoptr (GStrvBuilder) avail = NULL;
        g_auto (GStrv) names = NULL;

        if (backend_table[i].impl != NULL)
          return backend_table[i].impl;
        /* What the user can pick instead, so the refusal is also the way forward. */
        avail = g_strv_builder_new ();
        for (gsize j = 0; j < G_N_ELEMENTS (backend_table); j++)
          if (backend_table[j].impl != NULL)
            g_strv_builder_add (avail, backend_table[j].name);
        names = g_strv_builder_end (avail);
        known = g_strjoinv (", ", names);
        return (nz_throw (error, NZ_ERROR_UNSUPPORTED,
                          "backend '%s' is not available in this build yet (available: %s)", name,
                          known), NULL);
      }
  known = g_strjoinv (", ", (char **)nz_backend_names ());
  return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "unknown backend '%s' (known: %s)", name, known),
          NULL);
}

const char *
nz_sandbox_status_name (NzSandboxStatus status)
{
  switch (status)
    {
    case NZ_SANDBOX_RUNNING:
      return "running";
    case NZ_SANDBOX_UNRESPONSIVE:
      return "unresponsive";
    case NZ_SANDBOX_EXPIRED:
      return "expired";
    case NZ_SANDBOX_SUSPENDED:
      return "suspended";
    case NZ_SANDBOX_DEAD:
    default:
      return "dead";
    }
}

NzHandle *
nz_backend_create (const NzCreateOptions *opts, GError **error)
{
  const NzBackend *b = nz_backend_lookup (opts->backend, error);

  if (b == NULL || !nz_create_options_validate (opts, error)
      || !nz_create_options_check_disk (opts, error))
    return NULL;
  /* Settings parsed for another backend (a config for docker, then --backend container:bwrap)
   * are meaningless here: refused, not dropped. */
  if (opts->backend_opts != NULL && strstr (opts->backend_opts_for, b->name) == NULL)
    return (nz_throw (error, NZ_ERROR_UNSUPPORTED,
                      "the config's backend settings are for %s; %s does not read them",
                      opts->backend_opts_for, b->name),
            NULL);
  if (!b->check (opts, error))
    return NULL;
  return b->create (opts, error);
}

gboolean
nz_backend_destroy (NzHandle *h, GError **error)
{
  const NzBackend *b = nz_backend_lookup (h->backend, error);
  g_autoptr (GError) local = NULL;

  if (b == NULL || !b->destroy (h, error))
    return FALSE;
  /* Only a convenience for the next destroy of this id: its failure fails nothing. */
  if (!nz_state_bury (h->id, &local))
    g_debug ("sandbox %s: no tombstone: %s", h->id, local->message);
  return TRUE;
}

gboolean
nz_backend_destroy_id (const char *id, gboolean *already_gone, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (NzHandle) h = nz_handle_load (id, &local);
  NzSandboxStatus st;

  *already_gone = FALSE;
  if (h == NULL)
    {
      /* Destroyed before (its tombstone says so): done, like a delete answered 404/410. */
      if (g_error_matches (local, NZ_ERROR, NZ_ERROR_NOT_FOUND) && nz_state_is_buried (id))
        {
          *already_gone = TRUE;
          return TRUE;
        }
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  /* Its processes or container already gone (its lifetime ended, or it died): the destroy
   * still removes what is left (state, cgroups, an egress proxy, networks). */
  st = nz_backend_status (h, 0);
  *already_gone = st == NZ_SANDBOX_DEAD || st == NZ_SANDBOX_EXPIRED;
  return nz_backend_destroy (h, error);
}

gboolean
nz_backend_retire (NzHandle *h, GError **error)
{
  const NzBackend *b = nz_backend_lookup (h->backend, error);

  if (b == NULL)
    return FALSE;
  return b->retire != NULL ? b->retire (h, error) : b->destroy (h, error);
}

NzSandboxStatus
nz_backend_status (NzHandle *h, guint timeout_ms)
{
  const NzBackend *b = nz_backend_lookup (h->backend, NULL);

  return b != NULL ? b->status (h, timeout_ms) : NZ_SANDBOX_DEAD;
}

gboolean
nz_backend_set_network_policy (NzHandle *h, const char *const *hosts, gboolean *changed,
                               GError **error)
{
  const NzBackend *b = nz_backend_lookup (h->backend, error);

  *changed = FALSE;
  if (b == NULL)
    return FALSE;
  if (b->set_network_policy == NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "This sandbox cannot change its network policy: backend '%s' has no egress "
                     "proxy to change", b->name);
  return b->set_network_policy (h, hosts, changed, error);
}

NzTransport *
nz_backend_bearer_transport (NzHandle *h, GError **error)
{
  if (h->endpoint == NULL)
    return (nz_throw (error, NZ_ERROR_FAILED, "sandbox '%s' has no transport endpoint", h->id),
            NULL);
  return nz_transport_new (h->endpoint, h->token);
}

NzTransport *
nz_backend_open_transport (NzHandle *h, GError **error)
{
  const NzBackend *b = nz_backend_lookup (h->backend, error);

  return b != NULL ? b->open_transport (h, error) : NULL;
}

gboolean
nz_backend_suspend (NzHandle *h, const NzSuspendOptions *o, JsonObject *report, GError **error)
{
  const NzBackend *b = nz_backend_lookup (h->backend, error);

  if (b == NULL)
    return FALSE;
  if (b->suspend == NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "sandbox '%s' (%s) cannot be suspended: only a microvm:kubernetes workspace "
                     "(namzu-create --workspace) keeps its disk without its processes",
                     h->id, h->backend);
  return b->suspend (h, o, report, error);
}

gboolean
nz_backend_resume (NzHandle *h, gint64 epoch, JsonObject *report, GError **error)
{
  const NzBackend *b = nz_backend_lookup (h->backend, error);

  if (b == NULL)
    return FALSE;
  if (b->resume == NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "sandbox '%s' (%s) cannot be resumed: only a microvm:kubernetes workspace "
                     "(namzu-create --workspace) is ever suspended",
                     h->id, h->backend);
  return b->resume (h, epoch, report, error);
}

NzTransport *
nz_sandbox_open (const char *endpoint, const char *sandbox, gboolean stdin_ok, NzHandle **handle,
                 GError **error)
{
  g_autoptr (NzHandle) h = NULL;
  NzTransport *t;

  if (handle != NULL)
    *handle = NULL;
  if (endpoint != NULL)
    return nz_transport_new (endpoint, g_getenv ("NAMZU_TOKEN"));
  h = nz_handle_resolve (sandbox, stdin_ok, error);
  if (h == NULL || (t = nz_backend_open_transport (h, error)) == NULL)
    return NULL;
  if (handle != NULL)
    *handle = g_steal_pointer (&h);
  return t;
}

NzAgentClient *
nz_sandbox_open_client (const char *endpoint, const char *sandbox, gboolean stdin_ok,
                        NzHandle **handle, GError **error)
{
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (NzTransport) t = nz_sandbox_open (endpoint, sandbox, stdin_ok, &h, error);
  NzAgentClient *c = t != NULL ? nz_agent_client_new_for (t, error) : NULL;

  if (c != NULL && handle != NULL)
    *handle = g_steal_pointer (&h);
  return c;
}

void
nz_layout_clear (NzLayout *layout)
{
  g_clear_pointer (&layout->collected_dir, g_free);
  layout->collected_name = NULL;
}

void
nz_backend_layout (NzHandle *h, NzLayout *out)
{
  const NzBackend *b = nz_backend_lookup (h->backend, NULL);

  *out = (NzLayout){ 0 };
  if (b != NULL && b->layout != NULL)
    b->layout (h, out);
}

JsonObject *
nz_backend_public_handle (NzHandle *h)
{
  const NzBackend *b = nz_backend_lookup (h->backend, NULL);
  JsonObject *obj = json_object_new ();
  JsonArray *env_names;

  json_object_set_string_member (obj, "id", h->id);
  json_object_set_string_member (obj, "backend", h->backend);
  json_object_set_string_member (obj, "tier", h->tier);
  json_object_set_int_member (obj, "createdAt", h->created_at_ms);
  if (h->expires_at_ms > 0)
    {
      g_autofree char *when = nz_json_format_time_ms (h->expires_at_ms);

      json_object_set_string_member (obj, "expiresAt", when);
    }
  if (h->idle_timeout_ms > 0)
    json_object_set_int_member (obj, "idleTimeoutMs", h->idle_timeout_ms);
  if (b != NULL)
    b->describe (h, obj);
  /* Names only: a value may be a secret the host handed its workload. */
  if ((env_names = nz_json_get_array (h->priv, "envNames")) != NULL)
    json_object_set_array_member (obj, "envNames", json_array_ref (env_names));
  return obj;
}

void
nz_handle_set_lifetime (NzHandle *h, const NzCreateOptions *opts)
{
  h->expires_at_ms = opts->ttl_ms > 0 ? h->created_at_ms + opts->ttl_ms : 0;
  h->idle_timeout_ms = MAX (opts->idle_timeout_ms, 0);
}

gboolean
nz_handle_is_past_deadline (const NzHandle *h)
{
  return h->expires_at_ms > 0 && g_get_real_time () / 1000 >= h->expires_at_ms;
}

/* ---- options ------------------------------------------------------------------------ */

static void
mount_free (NzMount *m)
{
  g_free (m->label);
  g_free (m->host_path);
  g_free (m->container_path);
  g_free (m);
}

NzCreateOptions *
nz_create_options_new (void)
{
  NzCreateOptions *opts = g_new0 (NzCreateOptions, 1);

  opts->network = NZ_NETWORK_DENY_ALL;
  opts->egress_hosts = g_ptr_array_new_with_free_func (g_free);
  opts->mounts = g_ptr_array_new_with_free_func ((GDestroyNotify)mount_free);
  opts->writable_paths = g_ptr_array_new_with_free_func (g_free);
  opts->env = g_ptr_array_new_with_free_func (g_free);
  opts->ready_timeout_ms = NZ_READY_TIMEOUT_MS_DEFAULT;
  opts->read_only_rootfs = TRUE;
  return opts;
}

void
nz_create_options_free (NzCreateOptions *opts)
{
  if (opts == NULL)
    return;
  g_free (opts->backend);
  g_free (opts->image);
  g_ptr_array_unref (opts->egress_hosts);
  g_free (opts->egress_profile);
  g_free (opts->egress_credentials);
  g_ptr_array_unref (opts->mounts);
  g_ptr_array_unref (opts->writable_paths);
  g_ptr_array_unref (opts->env);
  if (opts->backend_opts != NULL)
    opts->backend_opts_free (opts->backend_opts);
  g_free (opts);
}

static const char *
default_container_path (const char *label)
{
  if (strcmp (label, "outputs") == 0)
    return NZ_LAYOUT_OUTPUTS_PATH;
  if (strcmp (label, "uploads") == 0)
    return NZ_LAYOUT_UPLOADS_PATH;
  if (strcmp (label, "scratch") == 0)
    return NZ_LAYOUT_SCRATCH_PATH;
  if (strcmp (label, "toolResults") == 0)
    return NZ_LAYOUT_TOOL_RESULTS_PATH;
  if (strcmp (label, "transcripts") == 0)
    return NZ_LAYOUT_TRANSCRIPTS_PATH;
  return NULL;
}

/* Spec B.4: outputs and scratch are writable, everything else is read-only. */
static gboolean
label_is_writable (const char *label)
{
  return strcmp (label, "outputs") == 0 || strcmp (label, "scratch") == 0;
}

static void
put_mount (NzCreateOptions *opts, const char *label, const char *host_path,
           const char *container_path)
{
  NzMount *m = g_new0 (NzMount, 1);

  for (guint i = 0; i < opts->mounts->len; i++)
    if (strcmp (((NzMount *)opts->mounts->pdata[i])->label, label) == 0)
      {
        g_ptr_array_remove_index (opts->mounts, i);
        break;
      }
  m->label = g_strdup (label);
  m->host_path = g_strdup (host_path);
  m->container_path = g_strdup (container_path);
  m->writable = label_is_writable (label);
  g_ptr_array_add (opts->mounts, m);
}

gboolean
nz_create_options_set_mount (NzCreateOptions *opts, const char *label, const char *host_path,
                             GError **error)
{
  const char *path = default_container_path (label);
  g_autofree char *abs = NULL;

  g_return_val_if_fail (path != NULL, FALSE);
  if (host_path == NULL || *host_path == '\0')
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "--%s needs a host directory", label);
  abs = g_canonicalize_filename (host_path, NULL);
  put_mount (opts, label, abs, path);
  return TRUE;
}

gboolean
nz_container_path_is_normalised (const char *p)
{
  g_auto (GStrv) parts = NULL;

  if (p == NULL || p[0] != '/' || p[1] == '\0')
    return FALSE;
  parts = g_strsplit (p + 1, "/", -1);
  for (char **s = parts; *s != NULL; s++)
    if (**s == '\0' || strcmp (*s, ".") == 0 || strcmp (*s, "..") == 0)
      return FALSE;
  return TRUE;
}

static gboolean
path_is_under (const char *p, const char *dir)
{
  gsize n = strlen (dir);

  return strncmp (p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Places the sandbox builds itself: a mount there would hide or replace them. */
static const char *const reserved_paths[] = { "/proc", "/dev", "/run/namzu", "/usr", "/etc",
                                              "/bin", "/sbin", "/lib", "/lib64", "/lib32" };

static void
check_container_path (GPtrArray *reasons, const char *field, const char *p)
{
  if (!nz_container_path_is_normalised (p))
    {
      g_ptr_array_add (reasons, g_strdup_printf ("%s: \"%s\" is not a normalised absolute path "
                                                 "inside the sandbox", field, p ? p : ""));
      return;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (reserved_paths); i++)
    if (path_is_under (p, reserved_paths[i]))
      g_ptr_array_add (reasons, g_strdup_printf ("%s: \"%s\" is inside %s, which the sandbox "
                                                 "provides itself", field, p,
                                                 reserved_paths[i]));
}

static gboolean
throw_reasons (GError **error, GPtrArray *reasons, const char *what)
{
  g_autofree char *joined = NULL;

  if (reasons->len == 0)
    return TRUE;
  g_ptr_array_add (reasons, NULL);
  joined = g_strjoinv ("; ", (char **)reasons->pdata);
  return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s: %s", what, joined);
}

gboolean
nz_cpus_check (double cpus, const char *field, GError **error)
{
  guint host = g_get_num_processors ();

  if (!isfinite (cpus) || cpus < NZ_CPUS_MIN || cpus > (double)host)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s must be a number from %.2f to %u (this host's CPUs), got %g", field,
                     NZ_CPUS_MIN, host, cpus);
  return TRUE;
}

/* --disk-mb bounds the sandbox's own scratch filesystems (tmpfs, sized). A writable host
 * directory is the host's disk, which no tmpfs size covers, unless the filesystem it is on is
 * itself no bigger than the bound (a sized tmpfs or loop mount the caller made there); a
 * writable root (docker's readOnlyRootfs:false) is the image's layer, which needs xfs project
 * quotas to bound. Refused rather than bounded in name only. */
gboolean
nz_create_options_check_disk (const NzCreateOptions *opts, GError **error)
{
  g_autoptr (GPtrArray) reasons = g_ptr_array_new_with_free_func (g_free);
  guint64 bound = (guint64)opts->disk_mb * 1024 * 1024;

  if (opts->disk_mb == 0)
    return TRUE;
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];
      struct statvfs sv;

      if (!m->writable)
        continue;
      if (statvfs (m->host_path, &sv) == 0 && (guint64)sv.f_blocks * sv.f_frsize <= bound)
        continue;
      g_ptr_array_add (reasons, g_strdup_printf ("--disk-mb cannot bound layout.%s: it is a "
                                                 "writable host directory (%s) on a filesystem "
                                                 "larger than %" G_GINT64_FORMAT " MiB; mount "
                                                 "one no larger there, or drop --disk-mb",
                                                 m->label, m->host_path, opts->disk_mb));
    }
  if (!opts->read_only_rootfs)
    g_ptr_array_add (reasons, g_strdup ("--disk-mb cannot bound a writable root filesystem "
                                        "(backend.readOnlyRootfs false): docker sizes it only "
                                        "on xfs with project quotas"));
  return throw_reasons (error, reasons, "invalid sandbox options");
}

gboolean
nz_create_options_validate (const NzCreateOptions *opts, GError **error)
{
  g_autoptr (GPtrArray) reasons = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) local = NULL;

  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];
      g_autofree char *field = g_strdup_printf ("layout.%s", m->label);

      if (m->host_path == NULL || !g_path_is_absolute (m->host_path))
        g_ptr_array_add (reasons, g_strdup_printf ("%s: hostPath must be an absolute host path",
                                                   field));
      check_container_path (reasons, field, m->container_path);
      for (guint j = 0; j < i; j++)
        {
          NzMount *o = opts->mounts->pdata[j];

          if (g_strcmp0 (o->container_path, m->container_path) == 0)
            g_ptr_array_add (reasons, g_strdup_printf ("duplicate containerPath \"%s\" declared "
                                                       "by both %s and %s", m->container_path,
                                                       o->label, m->label));
        }
    }
  for (guint i = 0; i < opts->writable_paths->len; i++)
    {
      const char *p = opts->writable_paths->pdata[i];

      check_container_path (reasons, "backend.writableRootfsPaths", p);
      for (guint j = 0; j < opts->mounts->len; j++)
        if (g_strcmp0 (((NzMount *)opts->mounts->pdata[j])->container_path, p) == 0)
          g_ptr_array_add (reasons, g_strdup_printf ("backend.writableRootfsPaths: names %s, "
                                                     "which this layout already mounts", p));
    }
  if (opts->memory_mb < 0 || opts->memory_mb > NZ_LIMIT_MB_MAX)
    g_ptr_array_add (reasons, g_strdup_printf ("--memory-mb must be an integer between 1 and %"
                                               G_GINT64_FORMAT, NZ_LIMIT_MB_MAX));
  if (opts->disk_mb < 0 || opts->disk_mb > NZ_LIMIT_MB_MAX)
    g_ptr_array_add (reasons, g_strdup_printf ("--disk-mb must be an integer between 1 and %"
                                               G_GINT64_FORMAT, NZ_LIMIT_MB_MAX));
  if (opts->max_processes < 0 || opts->max_processes > G_MAXINT32)
    g_ptr_array_add (reasons, g_strdup ("--max-processes must be a positive integer"));
  if (opts->cpus != 0 && !nz_cpus_check (opts->cpus, "--cpus", &local))
    g_ptr_array_add (reasons, g_strdup (local->message));
  if (opts->network == NZ_NETWORK_ALLOWLIST && opts->egress_hosts->len == 0)
    g_ptr_array_add (reasons, g_strdup ("--egress needs at least one host"));
  nz_sandbox_env_check_all (opts->env, opts->network == NZ_NETWORK_ALLOWLIST, reasons);
  return throw_reasons (error, reasons, "invalid sandbox options");
}

JsonObject *
nz_create_options_limits (const NzCreateOptions *opts)
{
  JsonObject *limits = json_object_new ();

  if (opts->memory_mb > 0)
    json_object_set_int_member (limits, "memoryMb", opts->memory_mb);
  if (opts->max_processes > 0)
    json_object_set_int_member (limits, "maxProcesses", opts->max_processes);
  if (opts->cpus > 0)
    json_object_set_double_member (limits, "cpus", opts->cpus);
  if (opts->disk_mb > 0)
    json_object_set_int_member (limits, "diskMb", opts->disk_mb);
  return limits;
}

/* ---- the reference provider config -------------------------------------------------- */

typedef struct
{
  NzCreateOptions *opts;
  GPtrArray *reasons;
} ConfigCtx;

void
nz_config_refuse (GPtrArray *reasons, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_ptr_array_add (reasons, g_strdup_vprintf (fmt, ap));
  va_end (ap);
}

#define refuse(c, ...) nz_config_refuse ((c)->reasons, __VA_ARGS__)

gint64
nz_config_positive_int (GPtrArray *reasons, JsonObject *obj, const char *member,
                        const char *field, gint64 max)
{
  JsonNode *n = json_object_get_member (obj, member);
  double v;

  if (n == NULL)
    return 0;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) == G_TYPE_STRING
      || json_node_get_value_type (n) == G_TYPE_BOOLEAN)
    {
      nz_config_refuse (reasons, "%s: must be a positive integer", field);
      return 0;
    }
  v = json_node_get_double (n);
  if (!nz_is_safe_integer (v) || v <= 0 || v > (double)max)
    {
      nz_config_refuse (reasons,
                        "%s: must be a positive integer of at most %" G_GINT64_FORMAT ", got %g",
                        field, max, v);
      return 0;
    }
  return (gint64)v;
}

#define positive_int(c, ...) nz_config_positive_int ((c)->reasons, __VA_ARGS__)

static JsonObject *
object_member (ConfigCtx *c, JsonObject *obj, const char *member, const char *field)
{
  JsonNode *n = json_object_get_member (obj, member);

  if (n == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (n))
    {
      refuse (c, "%s: must be an object", field);
      return NULL;
    }
  return json_node_get_object (n);
}

static const char *
string_member (ConfigCtx *c, JsonObject *obj, const char *member, const char *field)
{
  JsonNode *n = json_object_get_member (obj, member);

  if (n == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    {
      refuse (c, "%s: must be a string", field);
      return NULL;
    }
  return json_node_get_string (n);
}

static void
refuse_unknown (ConfigCtx *c, JsonObject *obj, const char *prefix, const char *const *known)
{
  g_autoptr (GList) members = json_object_get_members (obj);

  for (GList *l = members; l != NULL; l = l->next)
    if (!g_strv_contains (known, l->data))
      refuse (c, "%s%s: unknown field", prefix, (const char *)l->data);
}

static void
parse_mount (ConfigCtx *c, JsonObject *m, const char *label, const char *field,
             const char *default_path)
{
  JsonObject *source = object_member (c, m, "source", field);
  const char *type, *host, *path;
  g_autofree char *f_source = g_strdup_printf ("%s.source", field);
  g_autofree char *f_type = g_strdup_printf ("%s.source.type", field);
  g_autofree char *f_host = g_strdup_printf ("%s.source.hostPath", field);
  g_autofree char *f_path = g_strdup_printf ("%s.containerPath", field);

  path = string_member (c, m, "containerPath", f_path);
  if (source == NULL)
    {
      refuse (c, "%s: is required ({\"type\":\"hostDir\",\"hostPath\":\"...\"})", f_source);
      return;
    }
  type = string_member (c, source, "type", f_type);
  /* Only a host directory can be bound into a namespace sandbox. */
  if (g_strcmp0 (type, "hostDir") != 0)
    {
      if (g_str_has_prefix (c->opts->backend ? c->opts->backend : "", "container:docker")
          || g_strcmp0 (c->opts->backend, "container:runsc") == 0)
        refuse (c, "%s: docker backend cannot consume mount source type \"%s\" for %s; "
                "expected 'hostDir'", f_type, type ? type : "", label);
      else
        refuse (c, "%s: container:bwrap cannot consume mount source type \"%s\"; expected "
                "'hostDir'", f_type, type ? type : "");
      return;
    }
  host = string_member (c, source, "hostPath", f_host);
  if (host == NULL || !g_path_is_absolute (host))
    {
      refuse (c, "%s: must be an absolute host path", f_host);
      return;
    }
  put_mount (c->opts, label, host, path ? path : default_path);
}

static void
parse_layout (ConfigCtx *c, JsonObject *layout)
{
  static const char *const known[] = { "outputs", "uploads", "scratch", "toolResults",
                                       "transcripts", "skills", NULL };
  static const char *const labels[] = { "outputs", "uploads", "scratch", "toolResults",
                                        "transcripts" };
  JsonNode *skills;

  refuse_unknown (c, layout, "layout.", known);
  for (gsize i = 0; i < G_N_ELEMENTS (labels); i++)
    {
      g_autofree char *field = g_strdup_printf ("layout.%s", labels[i]);
      JsonObject *m = object_member (c, layout, labels[i], field);

      if (m != NULL)
        parse_mount (c, m, labels[i], field, default_container_path (labels[i]));
    }
  skills = json_object_get_member (layout, "skills");
  if (skills != NULL && !JSON_NODE_HOLDS_ARRAY (skills))
    refuse (c, "layout.skills: must be an array");
  else if (skills != NULL)
    {
      JsonArray *arr = json_node_get_array (skills);

      for (guint i = 0; i < json_array_get_length (arr); i++)
        {
          JsonNode *n = json_array_get_element (arr, i);
          g_autofree char *field = g_strdup_printf ("layout.skills[%u]", i);
          g_autofree char *f_id = g_strdup_printf ("%s.id", field);
          g_autofree char *label = NULL, *def = NULL;
          const char *id;

          if (!JSON_NODE_HOLDS_OBJECT (n))
            {
              refuse (c, "%s: must be an object", field);
              continue;
            }
          id = string_member (c, json_node_get_object (n), "id", f_id);
          if (id == NULL || *id == '\0'
              || !g_regex_match_simple ("^[a-zA-Z0-9_.-]+$", id, 0, 0))
            {
              refuse (c, "%s: skill id \"%s\" contains characters outside [a-zA-Z0-9_.-]", f_id,
                      id ? id : "");
              continue;
            }
          if (strstr (id, "..") != NULL)
            {
              refuse (c, "%s: skill id \"%s\" contains a path-traversal segment ('..')", f_id, id);
              continue;
            }
          label = g_strdup_printf ("skill:%s", id);
          for (guint j = 0; j < c->opts->mounts->len; j++)
            if (strcmp (((NzMount *)c->opts->mounts->pdata[j])->label, label) == 0)
              refuse (c, "%s: duplicate skill id \"%s\"", f_id, id);
          def = g_strdup_printf ("%s/%s", NZ_LAYOUT_SKILLS_PARENT, id);
          parse_mount (c, json_node_get_object (n), label, field, def);
        }
    }
}

static void
parse_host_list (ConfigCtx *c, JsonNode *n, const char *field, gboolean profile)
{
  JsonArray *arr;

  if (n == NULL || !JSON_NODE_HOLDS_ARRAY (n))
    {
      refuse (c, "%s: must be an array", field);
      return;
    }
  arr = json_node_get_array (n);
  for (guint i = 0; i < json_array_get_length (arr); i++)
    {
      JsonNode *e = json_array_get_element (arr, i);
      const char *host = NULL;

      if (profile && JSON_NODE_HOLDS_OBJECT (e))
        host = nz_json_get_string (json_node_get_object (e), "host");
      else if (!profile && JSON_NODE_HOLDS_VALUE (e)
               && json_node_get_value_type (e) == G_TYPE_STRING)
        host = json_node_get_string (e);
      if (host == NULL || *host == '\0')
        refuse (c, "%s[%u]: must be %s", field, i,
                profile ? "an object with a \"host\" string" : "a host name string");
      else
        g_ptr_array_add (c->opts->egress_hosts, g_strdup (host));
    }
}

static void
parse_egress (ConfigCtx *c, JsonObject *root)
{
  JsonObject *eg = object_member (c, root, "defaultEgress", "defaultEgress");
  JsonObject *profile = object_member (c, root, "egressProfile", "egressProfile");

  if (eg != NULL && profile != NULL)
    {
      refuse (c, "egressProfile: cannot be combined with defaultEgress; use one");
      return;
    }
  if (eg != NULL)
    {
      const char *kind = string_member (c, eg, "kind", "defaultEgress.kind");

      if (g_strcmp0 (kind, "deny-all") == 0)
        c->opts->network = NZ_NETWORK_DENY_ALL;
      else if (g_strcmp0 (kind, "allow-all") == 0)
        c->opts->network = NZ_NETWORK_ALLOW_ALL;
      else if (g_strcmp0 (kind, "static") == 0)
        {
          c->opts->network = NZ_NETWORK_ALLOWLIST;
          parse_host_list (c, json_object_get_member (eg, "allowedHosts"),
                           "defaultEgress.allowedHosts", FALSE);
        }
      else if (g_strcmp0 (kind, "resolver") == 0)
        refuse (c, "defaultEgress.kind: 'resolver' takes a function and cannot be written in a "
                "JSON config; use 'static' with allowedHosts");
      else
        refuse (c, "defaultEgress.kind: must be 'deny-all', 'allow-all' or 'static'");
    }
  if (profile != NULL)
    {
      JsonNode *hosts = json_object_get_member (profile, "hosts");

      if (string_member (c, profile, "name", "egressProfile.name") == NULL)
        refuse (c, "egressProfile.name: is required");
      parse_host_list (c, hosts, "egressProfile.hosts", TRUE);
      g_free (c->opts->egress_profile);
      c->opts->egress_profile = nz_json_object_to_string (profile, NULL);
      /* A profile with no hosts is deny-all (spec E.6). */
      c->opts->network = c->opts->egress_hosts->len == 0 ? NZ_NETWORK_DENY_ALL
                                                         : NZ_NETWORK_ALLOWLIST;
    }
}

/* Is @key read by some backend other than @self? Its name, or NULL. The table says so: no
 * backend lists another's keys. */
static const char *
reader_of (const char *key, const NzBackend *self)
{
  for (gsize i = 0; i < G_N_ELEMENTS (backend_table); i++)
    {
      const NzBackend *b = backend_table[i].impl;

      if (b != NULL && b != self && b->config_keys != NULL
          && g_strv_contains (b->config_keys, key))
        return b->name;
    }
  return NULL;
}

static void
parse_backend (ConfigCtx *c, JsonObject *b)
{
  static const char *const selectors[] = { "tier", "runtime", "service", NULL };
  const char *tier = string_member (c, b, "tier", "backend.tier");
  const char *runtime = string_member (c, b, "runtime", "backend.runtime");
  const char *service = string_member (c, b, "service", "backend.service");
  g_autoptr (GList) members = json_object_get_members (b);
  const NzBackend *impl = NULL;

  if (g_strcmp0 (tier, "container") == 0)
    c->opts->backend = g_strdup_printf ("container:%s", runtime ? runtime : "docker");
  else if (g_strcmp0 (tier, "microvm") == 0)
    c->opts->backend = g_strdup (g_strcmp0 (service, "kubernetes") == 0 ? "microvm:kubernetes"
                                                                         : "microvm:firecracker");
  else
    {
      refuse (c, "backend.tier: must be 'container' or 'microvm'");
      return;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (backend_table); i++)
    if (strcmp (backend_table[i].name, c->opts->backend) == 0)
      impl = backend_table[i].impl;
  /* Each key is the chosen backend's, another's (meaningless here: refused, naming whose it
   * is), or nobody's (a typo). A backend this build does not have is refused by name in
   * nz_backend_lookup(); its keys are only checked for typos. */
  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *key = l->data, *other;

      if (g_strv_contains (selectors, key)
          || (impl != NULL && g_strv_contains (impl->config_keys, key)))
        continue;
      other = reader_of (key, impl);
      if (other == NULL)
        refuse (c, "backend.%s: unknown field", key);
      else if (impl != NULL)
        refuse (c, "backend.%s: not supported by %s (a %s setting)", key, impl->name, other);
    }
  if (impl != NULL)
    impl->parse_config (b, c->opts, c->reasons);
}

gboolean
nz_create_options_set_backend_flags (NzCreateOptions *opts, JsonObject *keys,
                                     const char *const *flag_of, GError **error)
{
  const NzBackend *impl = nz_backend_lookup (opts->backend, error);
  g_autoptr (GPtrArray) reasons = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GList) members = json_object_get_members (keys);

  if (impl == NULL)
    return FALSE;
  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *key = l->data, *flag = key, *other;

      for (guint i = 0; flag_of[i] != NULL && flag_of[i + 1] != NULL; i += 2)
        if (strcmp (flag_of[i], key) == 0)
          flag = flag_of[i + 1];
      if (!g_strv_contains (impl->config_keys, key))
        {
          other = reader_of (key, impl);
          return nz_throw (error, NZ_ERROR_UNSUPPORTED, "%s: not supported by %s%s%s%s", flag,
                           impl->name, other != NULL ? " (a " : "", other != NULL ? other : "",
                           other != NULL ? " setting)" : "");
        }
    }
  impl->parse_config (keys, opts, reasons);
  /* The refusals name the config key; the flag is what was given. */
  for (guint i = 0; i < reasons->len; i++)
    for (guint k = 0; flag_of[k] != NULL && flag_of[k + 1] != NULL; k += 2)
      {
        g_autofree char *prefix = g_strdup_printf ("backend.%s", flag_of[k]);
        char *r = reasons->pdata[i];
        gsize n = strlen (prefix);

        if (g_str_has_prefix (r, prefix) && (r[n] == ':' || r[n] == '[' || r[n] == '.'))
          {
            reasons->pdata[i] = g_strconcat (flag_of[k + 1], r + n, NULL);
            g_free (r);
            break;
          }
      }
  return throw_reasons (error, reasons, "invalid flags");
}

gboolean
nz_create_options_load_config (NzCreateOptions *opts, const char *data, gssize len,
                               GError **error)
{
  static const char *const known[] = { "backend", "layout", "defaultEgress", "egressProfile",
                                       "defaultTimeoutMs", "defaultMemoryLimitMb",
                                       "defaultMaxProcesses", "defaultDiskLimitMb", "env",
                                       "ttlMs", "idleTimeoutMs", NULL };
  g_autoptr (JsonObject) root = NULL;
  g_autoptr (GPtrArray) reasons = g_ptr_array_new_with_free_func (g_free);
  ConfigCtx c = { opts, reasons };
  JsonObject *b, *layout;
  JsonNode *env;

  g_return_val_if_fail (opts != NULL && data != NULL, FALSE);
  if (nz_json_text_has_nul (data, len < 0 ? strlen (data) : (gsize)len))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "config: a string holds \\u0000 (NUL), which no name, path or "
                     "environment value can carry");
  root = nz_json_parse_object (data, len, error);
  if (root == NULL)
    {
      if (error != NULL && *error != NULL)
        (*error)->code = NZ_ERROR_INVALID_ARGS;
      return nz_prefix_error (error, "config");
    }
  refuse_unknown (&c, root, "", known);
  b = object_member (&c, root, "backend", "backend");
  if (b != NULL)
    {
      parse_backend (&c, b);
      /* An unavailable backend is refused by name, before its fields are judged. */
      if (opts->backend != NULL && nz_backend_lookup (opts->backend, error) == NULL)
        return nz_prefix_error (error, "config backend");
    }
  layout = object_member (&c, root, "layout", "layout");
  if (layout != NULL)
    parse_layout (&c, layout);
  parse_egress (&c, root);
  opts->default_timeout_ms = positive_int (&c, root, "defaultTimeoutMs", "defaultTimeoutMs",
                                           NZ_MAX_SAFE_INTEGER);
  opts->memory_mb = positive_int (&c, root, "defaultMemoryLimitMb", "defaultMemoryLimitMb",
                                  NZ_LIMIT_MB_MAX);
  /* Ours, not the reference's (it has no disk bound): named like its memory limit. */
  opts->disk_mb = positive_int (&c, root, "defaultDiskLimitMb", "defaultDiskLimitMb",
                                NZ_LIMIT_MB_MAX);
  opts->max_processes = positive_int (&c, root, "defaultMaxProcesses", "defaultMaxProcesses",
                                      G_MAXINT32);
  /* Spec A.1 SandboxBackendOptions.env: the sandbox's environment. */
  if ((env = json_object_get_member (root, "env")) != NULL)
    nz_sandbox_env_parse_config (env, opts->env, reasons);
  /* Ours (the reference's sandboxes live until destroyed): docs/backends.md "Lifetimes". */
  opts->ttl_ms = positive_int (&c, root, "ttlMs", "ttlMs", NZ_LIFETIME_MAX_MS);
  opts->idle_timeout_ms = positive_int (&c, root, "idleTimeoutMs", "idleTimeoutMs",
                                        NZ_LIFETIME_MAX_MS);
  return throw_reasons (error, reasons, "invalid config");
}

gint64
nz_handle_stream_heartbeat_ms (NzHandle *h)
{
  double v = -1;

  if (h == NULL || h->priv == NULL || !nz_json_get_number (h->priv, "streamHeartbeatMs", &v)
      || v < 0 || v > G_MAXINT32)
    return -1;
  return (gint64)v;
}

gint64
nz_backend_stream_heartbeat_ms (NzHandle *h, const char *opt, gint64 parsed)
{
  gint64 own = nz_handle_stream_heartbeat_ms (h);

  if (opt != NULL || g_getenv ("NAMZU_STREAM_HEARTBEAT_MS") != NULL || own < 0)
    return parsed;
  return own;
}
