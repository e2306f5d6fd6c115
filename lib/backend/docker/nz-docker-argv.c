#include "nz-docker-argv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-proxy-config.h"
#include "nz-token.h"
#include "nz-docker-options.h"

/* Spec B.1 DEFAULT_WRITABLE_ROOTFS_PATHS, in that order. */
static const char *const default_writable[] = { "/tmp", "/var/tmp", "/workspace", "/home/namzu" };

static void
add (GPtrArray *argv, const char *arg)
{
  g_ptr_array_add (argv, g_strdup (arg));
}

static void
add2 (GPtrArray *argv, const char *a, const char *b)
{
  add (argv, a);
  add (argv, b);
}

gboolean
nz_docker_check_cpus (double cpus, GError **error)
{
  /* No upper bound: the daemon's CPU count is unknowable here, and it refuses at run. */
  if (!isfinite (cpus) || cpus <= 0)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "cpuLimit must be a finite number greater than 0 (docker's --cpus takes a "
                     "decimal, e.g. 1.5); got %g.", cpus);
  return TRUE;
}

char *
nz_docker_format_cpus (double cpus)
{
  /* The shortest text that reads back as the same double, like JS String(n). */
  for (int prec = 1; prec <= 17; prec++)
    {
      char fmt[8];
      char buf[G_ASCII_DTOSTR_BUF_SIZE];

      g_snprintf (fmt, sizeof fmt, "%%.%dg", prec);
      g_ascii_formatd (buf, sizeof buf, fmt, cpus);
      if (g_ascii_strtod (buf, NULL) == cpus)
        return g_strdup (buf);
    }
  return g_strdup_printf ("%.17g", cpus);
}

/* Spec B.2 cleanContainerPath: split on '/', drop empty and '.', '..' pops, leading '/'. */
static char *
clean_container_path (const char *p)
{
  g_auto (GStrv) parts = g_strsplit (p, "/", -1);
  g_autoptr (GPtrArray) out = g_ptr_array_new ();
  g_autofree char *joined = NULL;

  for (char **s = parts; *s != NULL; s++)
    {
      if (**s == '\0' || strcmp (*s, ".") == 0)
        continue;
      if (strcmp (*s, "..") == 0)
        {
          if (out->len > 0)
            g_ptr_array_remove_index (out, out->len - 1);
          continue;
        }
      g_ptr_array_add (out, *s);
    }
  g_ptr_array_add (out, NULL);
  joined = g_strjoinv ("/", (char **)out->pdata);
  return g_strconcat ("/", joined, NULL);
}

static gboolean
contains (GPtrArray *arr, const char *s)
{
  for (guint i = 0; i < arr->len; i++)
    if (strcmp (arr->pdata[i], s) == 0)
      return TRUE;
  return FALSE;
}

GPtrArray *
nz_docker_writable_paths (const NzCreateOptions *opts, GError **error)
{
  g_autoptr (GPtrArray) mounted = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);

  if (!opts->read_only_rootfs)
    {
      /* Two requests that contradict: a writable root has no tmpfs set to extend. */
      if (opts->writable_paths->len > 0)
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "writableRootfsPaths names paths, but readOnlyRootfs is false: the "
                          "whole root filesystem is writable then, so there is nothing to add. "
                          "Drop one of the two."), NULL);
      return g_steal_pointer (&out);
    }
  for (guint i = 0; i < opts->mounts->len; i++)
    g_ptr_array_add (mounted, clean_container_path (((NzMount *)opts->mounts->pdata[i])
                                                      ->container_path));
  for (guint i = 0; i < opts->writable_paths->len; i++)
    {
      const char *p = opts->writable_paths->pdata[i];

      if (!nz_container_path_is_normalised (p))
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "writableRootfsPaths entry \"%s\" is not a normalised absolute path "
                          "inside the container. Name it like /var/cache/app: a leading '/', "
                          "no empty, '.' or '..' segment, no trailing '/'.", p), NULL);
      if (contains (mounted, p))
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "writableRootfsPaths names %s, which this layout already mounts. "
                          "Docker refuses two mounts at one destination (\"Duplicate mount "
                          "point\"); drop it from writableRootfsPaths.", p), NULL);
    }
  /* A default the layout mounts is skipped: the layout's own mount is what the host asked. */
  for (gsize i = 0; i < G_N_ELEMENTS (default_writable); i++)
    if (!contains (mounted, default_writable[i]))
      add (out, default_writable[i]);
  for (guint i = 0; i < opts->writable_paths->len; i++)
    if (!contains (out, opts->writable_paths->pdata[i]))
      add (out, opts->writable_paths->pdata[i]);
  return g_steal_pointer (&out);
}

/* Spec B.4 renderLayoutMountArgs order: outputs, uploads, scratch, toolResults, skills,
 * transcripts. */
static int
mount_rank (const NzMount *m)
{
  static const char *const order[] = { "outputs", "uploads", "scratch", "toolResults" };

  for (gsize i = 0; i < G_N_ELEMENTS (order); i++)
    if (strcmp (m->label, order[i]) == 0)
      return (int)i;
  if (g_str_has_prefix (m->label, "skill:"))
    return 4;
  return 5; /* transcripts */
}

static GPtrArray *
ordered_mounts (const NzCreateOptions *opts)
{
  GPtrArray *out = g_ptr_array_new ();

  /* Stable by construction: one pass per rank keeps skills in their given order. */
  for (int rank = 0; rank <= 5; rank++)
    for (guint i = 0; i < opts->mounts->len; i++)
      if (mount_rank (opts->mounts->pdata[i]) == rank)
        g_ptr_array_add (out, opts->mounts->pdata[i]);
  return out;
}

static const char *
outputs_path (const NzCreateOptions *opts)
{
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];

      if (strcmp (m->label, "outputs") == 0)
        return m->container_path;
    }
  return NZ_LAYOUT_OUTPUTS_PATH;
}

/* Colon-joined, de-duplicated roots: the workspace first, then the mounts (all, or the
 * writable ones), in the spec's order. */
static char *
join_roots (GPtrArray *mounts, const char *workspace, gboolean writable_only)
{
  g_autoptr (GPtrArray) roots = g_ptr_array_new ();

  g_ptr_array_add (roots, (gpointer)workspace);
  for (guint i = 0; i < mounts->len; i++)
    {
      NzMount *m = mounts->pdata[i];

      if ((!writable_only || m->writable) && !contains (roots, m->container_path))
        g_ptr_array_add (roots, m->container_path);
    }
  g_ptr_array_add (roots, NULL);
  return g_strjoinv (":", (char **)roots->pdata);
}

static gboolean
check_labels (GPtrArray *labels, GError **error)
{
  for (guint i = 0; labels != NULL && i + 1 < labels->len; i += 2)
    {
      const char *k = labels->pdata[i];

      if (*k == '\0' || strchr (k, '=') != NULL)
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "docker label key \"%s\" is invalid (empty or contains '=')", k);
    }
  return TRUE;
}

/* `run --detach --rm --name N [--hostname H] --network NET` and the hardening baseline, shared
 * by the sandbox and its proxy: no capability (CAP_DAC_OVERRIDE walks past read-only binds,
 * NET_ADMIN would put a route back), no setuid re-escalation, an IPC namespace nobody can join
 * by name. */
static void
add_run_baseline (GPtrArray *argv, const char *name, const char *hostname, const char *network)
{
  add (argv, "run");
  add (argv, "--detach");
  add (argv, "--rm");
  add2 (argv, "--name", name);
  if (hostname != NULL)
    add2 (argv, "--hostname", hostname);
  add2 (argv, "--network", network);
  add (argv, "--cap-drop=ALL");
  add (argv, "--security-opt=no-new-privileges");
  add2 (argv, "--ipc", "private");
}

/* Executable tmpfs: docker's default is noexec, which breaks `cc -o /tmp/a && /tmp/a`; 1777
 * because the image's uid is not known here. */
static void
add_tmpfs (GPtrArray *argv, const char *path, gint64 disk_mb)
{
  add (argv, "--tmpfs");
  /* --disk-mb: the size= the baseline leaves out (the kernel's default is half the RAM). */
  if (disk_mb > 0)
    g_ptr_array_add (argv, g_strdup_printf ("%s:" NZ_DOCKER_TMPFS_OPTIONS ",size=%" G_GINT64_FORMAT
                                            "m", path, disk_mb));
  else
    g_ptr_array_add (argv, g_strdup_printf ("%s:" NZ_DOCKER_TMPFS_OPTIONS, path));
}

static void
add_labels (GPtrArray *argv, GPtrArray *labels)
{
  for (guint i = 0; labels != NULL && i + 1 < labels->len; i += 2)
    {
      add (argv, "--label");
      g_ptr_array_add (argv, g_strdup_printf ("%s=%s", (const char *)labels->pdata[i],
                                              (const char *)labels->pdata[i + 1]));
    }
}

GPtrArray *
nz_docker_build_run_argv (const NzDockerPlan *plan, GError **error)
{
  const NzCreateOptions *opts = plan->opts;
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) writable = NULL;
  g_autoptr (GPtrArray) mounts = NULL;
  const char *ws = outputs_path (opts);

  g_return_val_if_fail (plan->name != NULL && plan->network != NULL, NULL);
  g_return_val_if_fail (opts->image != NULL, NULL);
  /* Checked again here, not only at construction: a caller may skip that. */
  if (opts->cpus != 0 && !nz_docker_check_cpus (opts->cpus, error))
    return NULL;
  writable = nz_docker_writable_paths (opts, error);
  if (writable == NULL)
    return NULL;
  if (!check_labels (nz_docker_options (opts)->labels, error))
    return NULL;

  /* The baseline, always, whatever readOnlyRootfs says. */
  add_run_baseline (argv, plan->name, NULL, plan->network);
  if (opts->read_only_rootfs)
    {
      add (argv, "--read-only");
      for (guint i = 0; i < writable->len; i++)
        add_tmpfs (argv, writable->pdata[i], opts->disk_mb);
    }
  /* /dev/shm is docker's own tmpfs (64 MiB): bounded like the others. */
  if (opts->disk_mb > 0)
    {
      add (argv, "--shm-size");
      g_ptr_array_add (argv, g_strdup_printf ("%" G_GINT64_FORMAT "m", opts->disk_mb));
    }
  if (plan->run_as_user != NULL)
    add2 (argv, "--user", plan->run_as_user);
  else
    {
      /* Privsep (docs/security.md): the worker starts as root with only the three capabilities
       * it needs, switches at once to a uid of its own (non-dumpable) and starts every command
       * as the image's uid 1001 with none. A host-named user runs both, as the reference does. */
      add2 (argv, "--user", "0:0");
      add (argv, "--cap-add=SETUID");
      add (argv, "--cap-add=SETGID");
      add (argv, "--cap-add=KILL");
      add2 (argv, "--env", "NAMZU_WORKER_UID=" G_STRINGIFY (NZ_DOCKER_WORKER_UID));
      add2 (argv, "--env", "NAMZU_WORKER_GID=" G_STRINGIFY (NZ_DOCKER_WORKER_UID));
      add2 (argv, "--env", "NAMZU_WORKER_WORKLOAD_UID=" G_STRINGIFY (NZ_DOCKER_WORKLOAD_UID));
      add2 (argv, "--env", "NAMZU_WORKER_WORKLOAD_GID=" G_STRINGIFY (NZ_DOCKER_WORKLOAD_UID));
    }
  add_labels (argv, nz_docker_options (opts)->labels);
  mounts = ordered_mounts (opts);
  for (guint i = 0; i < mounts->len; i++)
    {
      NzMount *m = mounts->pdata[i];

      add (argv, "--volume");
      g_ptr_array_add (argv, g_strdup_printf ("%s:%s:%s", m->host_path, m->container_path,
                                              m->writable ? "rw" : "ro"));
    }
  /* These only direct traffic to the proxy; the internal network is the boundary. */
  if (plan->proxy_env)
    {
      static const char *const names[] = { "HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
                                           "https_proxy" };

      for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
        {
          add (argv, "--env");
          g_ptr_array_add (argv, g_strdup_printf ("%s=" NZ_DOCKER_PROXY_URL, names[i]));
        }
      add2 (argv, "--env", "NO_PROXY=" NZ_DOCKER_NO_PROXY);
      add2 (argv, "--env", "no_proxy=" NZ_DOCKER_NO_PROXY);
    }
  {
    g_autofree char *read_roots = join_roots (mounts, ws, FALSE);
    g_autofree char *write_roots = join_roots (mounts, ws, TRUE);

    add (argv, "--env");
    g_ptr_array_add (argv, g_strdup_printf ("NAMZU_SANDBOX_WORKSPACE=%s", ws));
    add (argv, "--env");
    g_ptr_array_add (argv, g_strdup_printf ("NAMZU_SANDBOX_READ_ROOTS=%s", read_roots));
    add (argv, "--env");
    g_ptr_array_add (argv, g_strdup_printf ("NAMZU_SANDBOX_WRITE_ROOTS=%s", write_roots));
  }
  /* The worker is the container's pid 1 and the container runs --rm: when its lifetime ends
   * it exits, and the daemon removes the container. */
  if (plan->expires_at_ms > 0)
    {
      add (argv, "--env");
      g_ptr_array_add (argv, g_strdup_printf ("NAMZU_SANDBOX_EXPIRES_AT_MS=%" G_GINT64_FORMAT,
                                              plan->expires_at_ms));
    }
  if (plan->idle_timeout_ms > 0)
    {
      add (argv, "--env");
      g_ptr_array_add (argv, g_strdup_printf ("NAMZU_SANDBOX_IDLE_TIMEOUT_MS=%" G_GINT64_FORMAT,
                                              plan->idle_timeout_ms));
    }
  /* Loopback only, on an ephemeral host port read back after the run. */
  if (plan->host_port)
    add2 (argv, "--publish", "127.0.0.1::2024");
  if (plan->runtime != NULL)
    add2 (argv, "--runtime", plan->runtime);
  if (opts->memory_mb > 0)
    {
      add (argv, "--memory");
      g_ptr_array_add (argv, g_strdup_printf ("%" G_GINT64_FORMAT "m", opts->memory_mb));
    }
  if (opts->max_processes > 0)
    {
      add (argv, "--pids-limit");
      g_ptr_array_add (argv, g_strdup_printf ("%" G_GINT64_FORMAT, opts->max_processes));
    }
  if (opts->cpus != 0)
    {
      add (argv, "--cpus");
      g_ptr_array_add (argv, nz_docker_format_cpus (opts->cpus));
    }
  /* Spec B.2: options.env in its order, after the limits and before the token, so it can
   * override nothing namzu sets (its reserved names are refused before this anyway). The
   * values are in docker's argv and the container's config, as the reference has them. */
  for (guint i = 0; i < opts->env->len; i++)
    add2 (argv, "--env", opts->env->pdata[i]);
  /* Valueless and last among --env: docker takes the value from its own environment, so the
   * token is in no argv, and nothing before it can override it. */
  add2 (argv, "--env", NZ_DOCKER_TOKEN_ENV);
  /* The image last, so nothing after it is read as a flag. */
  add (argv, opts->image);
  return g_steal_pointer (&argv);
}

GPtrArray *
nz_docker_build_proxy_argv (const NzDockerProxyPlan *plan, GError **error)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);

  g_return_val_if_fail (plan->name != NULL && plan->internal_network != NULL, NULL);
  g_return_val_if_fail (plan->config_env != NULL, NULL);
  if (plan->image == NULL || *plan->image == '\0')
    return (nz_throw (error, NZ_ERROR_FAILED,
                      "internal error: the egress proxy container was planned without an image"),
            NULL);
  /* Its first leg must be a route out: 'none' has none, and the internal network is the one
   * the sandbox is shut in. */
  if (strcmp (plan->upstream_network, "none") == 0
      || strcmp (plan->upstream_network, plan->internal_network) == 0)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "egressProxyUpstreamNetwork '%s' gives the egress proxy no route out: it "
                      "must be a network that reaches the world (default 'bridge'), neither "
                      "'none' nor the sandbox's internal network '%s'",
                      plan->upstream_network, plan->internal_network),
            NULL);
  if (!check_labels (plan->labels, error))
    return NULL;
  /* The upstream network first: a container created on an internal network never gets a
   * default route; the internal leg is attached afterwards (nz_docker_build_proxy_attach_argv). */
  add_run_baseline (argv, plan->name, NZ_DOCKER_PROXY_ALIAS, plan->upstream_network);
  add (argv, "--read-only");
  add_tmpfs (argv, "/tmp", 0);
  add_labels (argv, plan->labels);
  /* Valueless: the configuration (credentials included) is in the docker CLI's environment. */
  add2 (argv, "--env", plan->config_env);
  add (argv, plan->image);
  return g_steal_pointer (&argv);
}

GPtrArray *
nz_docker_build_proxy_attach_argv (const char *internal_network, const char *proxy_name)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  add2 (argv, "network", "connect");
  add2 (argv, "--alias", NZ_DOCKER_PROXY_ALIAS);
  add2 (argv, internal_network, proxy_name);
  return argv;
}

GPtrArray *
nz_docker_build_isolate_argv (const char *sandbox_name, const char *image)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);

  add2 (argv, "run", "--rm");
  g_ptr_array_add (argv, g_strconcat ("--network=container:", sandbox_name, NULL));
  /* Root in the sandbox's network namespace, with exactly the one capability it needs. */
  add2 (argv, "--user", "0:0");
  add (argv, "--cap-drop=ALL");
  add (argv, "--cap-add=NET_ADMIN");
  add (argv, "--security-opt=no-new-privileges");
  add (argv, "--read-only");
  /* On the image's PATH: the packaged /usr/bin/namzu-egress, or /usr/local/bin in an image
   * built before the images installed the .debs. */
  add2 (argv, "--entrypoint", "namzu-egress");
  add2 (argv, image, "isolate");
  return argv;
}

gboolean
nz_docker_check_proxy_label (const char *image, const char *label_output, GError **error)
{
  g_autofree char *s = g_strdup (label_output != NULL ? label_output : "");
  guint64 v = 0;

  /* Number(label.trim()) must be an integer >= 2; "" (no label), "1" (V1 only), "<no value>"
   * and an unreadable answer (no such image: inspect does not pull) are all refused. */
  if (label_output == NULL || !g_ascii_string_to_unsigned (g_strstrip (s), 10, 2, G_MAXINT, &v,
                                                           NULL))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "egress proxy image '%s' does not read port rules: its label "
                     NZ_EGRESS_PROXY_IMAGE_CONFIG_LABEL " is '%s', and this profile has port "
                     "rules, which need configuration version 2 (NAMZU_EGRESS_PROXY_CONFIG_V2). "
                     "Rebuild the image from images/egress-proxy (scripts/build-images), or pull "
                     "it onto this daemon first: the label is read without pulling",
                     image, label_output != NULL ? g_strstrip (s) : "missing");
  return TRUE;
}

gboolean
nz_docker_network_is_internal (const char *inspect_output)
{
  g_autofree char *s = g_strdup (inspect_output != NULL ? inspect_output : "");

  return strcmp (g_strstrip (s), "true") == 0;
}

gboolean
nz_docker_check_network (const char *network, gboolean host_port, NzNetwork egress,
                         gboolean internal, GError **error)
{
  /* 1. A published port needs a route the host can take: none and --internal have none. */
  if (host_port && (strcmp (network, "none") == 0 || internal))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "cannot publish the worker's port on network '%s': it has no route to the "
                     "host (docker publishes nothing from 'none' or an --internal network). Use "
                     "a bridge network (--docker-network bridge, config backend.network), or set "
                     "hostReachability: 'container-network' and reach the worker on that network",
                     network);
  /* 2. deny-all is a boundary only when the daemon says the network is internal. */
  if (egress == NZ_NETWORK_DENY_ALL && !internal)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "a deny-all egress policy needs an --internal docker network, and the "
                     "daemon says network '%s' is not one: a container on it can still reach "
                     "the world. Name no network (the backend then creates one for the sandbox "
                     "alone), or create one with `docker network create --internal "
                     "%s-internal` and name it (with hostReachability: 'container-network'), or "
                     "choose --network allow-all",
                     network, strcmp (network, "none") == 0 ? "namzu" : network);
  /* 3. An allowlist is enforced by a proxy on an internal network, never by a name. */
  if (egress == NZ_NETWORK_ALLOWLIST && !internal)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "an egress allowlist needs an --internal docker network, and the daemon "
                     "says network '%s' is not one: the sandbox could route around the proxy. "
                     "Name no network (the backend then creates one for the sandbox alone), or "
                     "create one with `docker network create --internal %s-internal` and name it "
                     "(with hostReachability: 'container-network')",
                     network, strcmp (network, "none") == 0 ? "namzu" : network);
  return TRUE;
}

/* "K=V" -> "K=<redacted>"; a valueless "K" (or "=V") is kept. */
static char *
redact_entry (const char *entry)
{
  const char *eq = strchr (entry, '=');

  if (eq == NULL || eq == entry)
    return g_strdup (entry);
  return g_strdup_printf ("%.*s=<redacted>", (int)(eq - entry), entry);
}

static char *
redact_attached (const char *flag, const char *entry)
{
  g_autofree char *r = redact_entry (entry);

  return g_strconcat (flag, r, NULL);
}

char *
nz_docker_redact_argv (const char *const *argv, gsize n)
{
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);

  for (gsize i = 0; i < n; i++)
    {
      const char *a = argv[i];

      if ((strcmp (a, "--env") == 0 || strcmp (a, "-e") == 0) && i + 1 < n)
        {
          add (out, a);
          g_ptr_array_add (out, redact_entry (argv[++i]));
        }
      else if (g_str_has_prefix (a, "--env="))
        g_ptr_array_add (out, redact_attached ("--env=", a + 6));
      else if (g_str_has_prefix (a, "-e="))
        g_ptr_array_add (out, redact_attached ("-e=", a + 3));
      else if (g_str_has_prefix (a, "-e") && strlen (a) > 2 && !g_str_has_prefix (a, "--"))
        g_ptr_array_add (out, redact_attached ("-e", a + 2));
      else
        add (out, a);
    }
  g_ptr_array_add (out, NULL);
  return g_strjoinv (" ", (char **)out->pdata);
}

char *
nz_docker_mint_token (GError **error)
{
  g_autofree char *hex = nz_token_mint (error);
  guint8 raw[NZ_TOKEN_RANDOM_BYTES];
  g_autofree char *b64 = NULL;
  GString *s;

  if (hex == NULL)
    return NULL;
  for (gsize i = 0; i < sizeof raw; i++)
    raw[i] = (guint8)((g_ascii_xdigit_value (hex[2 * i]) << 4)
                      | g_ascii_xdigit_value (hex[2 * i + 1]));
  explicit_bzero (hex, strlen (hex));
  b64 = g_base64_encode (raw, sizeof raw);
  explicit_bzero (raw, sizeof raw);
  /* base64url, no padding: 43 characters any header can carry. */
  s = g_string_new (NULL);
  for (const char *p = b64; *p != '\0' && *p != '='; p++)
    g_string_append_c (s, *p == '+' ? '-' : *p == '/' ? '_' : *p);
  explicit_bzero (b64, strlen (b64));
  return g_string_free (s, FALSE);
}
