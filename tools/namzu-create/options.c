/* namzu-create's flags: the option table and how the flags and a --config land in the
 * backend's create options, validated in full before any I/O. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"
#include "nz-lite-exec.h"
#include "nz-profile.h"

#include "options.h"

static char *opt_backend, *opt_network, *opt_image, *opt_memory, *opt_procs, *opt_cpus, *opt_disk;
static char *opt_outputs, *opt_uploads, *opt_config, *opt_ready;
static char **opt_egress;
static char *opt_profile;
static char **opt_credential;
static char *opt_docker_network, *opt_reachability;
static char *opt_kubeconfig, *opt_kube_context, *opt_kube_namespace, *opt_kube_template;
static char *opt_kube_pool, *opt_kube_address, *opt_kube_workspace, *opt_kube_epoch;
static gboolean opt_kube_refresh;
static gboolean opt_agent_shares_uid;
static char **opt_labels;
static char *opt_proxy_image, *opt_upstream;
static char **opt_inward;
static char **opt_env, **opt_env_file;
static char *opt_ttl, *opt_idle;

const GOptionEntry nz_create_entries[] = {
  { "backend", 0, 0, G_OPTION_ARG_STRING, &opt_backend,
    "Backend to create on (default: container:bwrap)", "NAME" },
  { "network", 0, 0, G_OPTION_ARG_STRING, &opt_network,
    "Egress: deny-all (default, loopback only) or allow-all", "POLICY" },
  { "egress", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_egress,
    "Allow egress only to these hosts (comma-separated, repeatable)", "HOST,..." },
  { "profile", 0, 0, G_OPTION_ARG_FILENAME, &opt_profile,
    "Egress profile JSON {name, hosts:[{host, ports?}]} (no hosts = deny-all)", "FILE" },
  { "credential", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_credential,
    "Brokered credential: the egress proxy sets HEADER to the value of the environment "
    "variable VAR on requests to HOST (repeatable; the value never enters the sandbox)",
    "HOST:HEADER:VAR" },
  { "image", 0, 0, G_OPTION_ARG_STRING, &opt_image, "Image (image-based backends only)", "IMAGE" },
  { "memory-mb", 0, 0, G_OPTION_ARG_STRING, &opt_memory, "Memory limit in MiB", "N" },
  { "max-processes", 0, 0, G_OPTION_ARG_STRING, &opt_procs, "Process/thread limit", "N" },
  { "cpus", 0, 0, G_OPTION_ARG_STRING, &opt_cpus, "CPU limit, e.g. 1.5 (0.01 to the host's CPUs)",
    "X" },
  { "disk-mb", 0, 0, G_OPTION_ARG_STRING, &opt_disk,
    "Bound each writable scratch filesystem (workspace, /tmp, /var/tmp, home) to N MiB; "
    "refused beside a writable host directory", "N" },
  { "outputs", 0, 0, G_OPTION_ARG_FILENAME, &opt_outputs,
    "Host directory bound writable at /mnt/user-data/outputs (the workspace)", "DIR" },
  { "uploads", 0, 0, G_OPTION_ARG_FILENAME, &opt_uploads,
    "Host directory bound read-only at /mnt/user-data/uploads", "DIR" },
  { "config", 0, 0, G_OPTION_ARG_FILENAME, &opt_config,
    "Provider config (reference JSON) from FILE, or - for stdin; flags win", "FILE" },
  { "docker-network", 0, 0, G_OPTION_ARG_STRING, &opt_docker_network,
    "container:docker/runsc: the sandbox's docker network (default none)", "NAME" },
  { "agent-shares-uid", 0, 0, G_OPTION_ARG_NONE, &opt_agent_shares_uid,
    "container:bwrap for a user with no subordinate ids: run the agent under the workload's "
    "uid, where the workload can signal it (refused without this; docs/security.md)",
    NULL },
  { "host-reachability", 0, 0, G_OPTION_ARG_STRING, &opt_reachability,
    "container:docker/runsc: host-port (default) or container-network", "HOW" },
  { "label", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_labels,
    "container:docker/runsc: a container label (repeatable)", "KEY=VALUE" },
  { "egress-proxy-image", 0, 0, G_OPTION_ARG_STRING, &opt_proxy_image,
    "container:docker/runsc: the egress proxy container's image (needed by --egress/--profile)",
    "IMAGE" },
  { "egress-upstream-network", 0, 0, G_OPTION_ARG_STRING, &opt_upstream,
    "container:docker/runsc: the proxy's route out (default bridge)", "NAME" },
  { "allow-inward-for", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_inward,
    "container:docker/runsc: a host the proxy may reach on a private address (repeatable)",
    "HOST" },
  { "kubeconfig", 0, 0, G_OPTION_ARG_FILENAME, &opt_kubeconfig,
    "microvm:kubernetes: the kubeconfig (default $KUBECONFIG, then ~/.kube/config)", "FILE" },
  { "context", 0, 0, G_OPTION_ARG_STRING, &opt_kube_context,
    "microvm:kubernetes: the kubeconfig context (default its current-context)", "NAME" },
  { "namespace", 0, 0, G_OPTION_ARG_STRING, &opt_kube_namespace,
    "microvm:kubernetes: the namespace (default the context's)", "NS" },
  { "template", 0, 0, G_OPTION_ARG_STRING, &opt_kube_template,
    "microvm:kubernetes: the SandboxTemplate (backend.sandboxTemplateName; required)", "NAME" },
  { "warm-pool", 0, 0, G_OPTION_ARG_STRING, &opt_kube_pool,
    "microvm:kubernetes: claim from this SandboxWarmPool (without it: a Sandbox of its own)",
    "NAME" },
  { "agent-address", 0, 0, G_OPTION_ARG_STRING, &opt_kube_address,
    "microvm:kubernetes: reach the agent at the sandbox's service (default) or its pod-ip",
    "HOW" },
  { "workspace", 0, 0, G_OPTION_ARG_STRING, &opt_kube_workspace,
    "microvm:kubernetes: a persistent workspace namzu-ws-ID (created, or adopted when it "
    "exists; its disk survives namzu-suspend), instead of a task sandbox",
    "ID" },
  { "epoch", 0, 0, G_OPTION_ARG_STRING, &opt_kube_epoch,
    "microvm:kubernetes --workspace: hold it at holder epoch N (a writer with a lower epoch is "
    "refused from then on)",
    "N" },
  { "refresh-pod-template", 0, 0, G_OPTION_ARG_NONE, &opt_kube_refresh,
    "microvm:kubernetes --workspace: adopt a suspended workspace with its template's current "
    "pod template",
    NULL },
  { "env", 'e', 0, G_OPTION_ARG_STRING_ARRAY, &opt_env,
    "Set NAME for every command of the sandbox (repeatable; a bare NAME takes this "
    "environment's value; namzu-exec --env wins per command)", "NAME=VALUE" },
  { "env-file", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_env_file,
    "Read NAME=VALUE lines (docker's format: # comments, blank lines) for every command "
    "(repeatable; --env wins)", "FILE" },
  { "ttl", 0, 0, G_OPTION_ARG_STRING, &opt_ttl,
    "End the sandbox this long after it is created, e.g. 90s, 30m, 2h (its own agent or worker "
    "exits; namzu-destroy still cleans up)", "DURATION" },
  { "idle-timeout", 0, 0, G_OPTION_ARG_STRING, &opt_idle,
    "End the sandbox once no request is open and no command runs for this long (default: "
    "never on container:bwrap, the worker's 5m on container:docker/runsc)", "DURATION" },
  { "ready-timeout", 0, 0, G_OPTION_ARG_STRING, &opt_ready,
    "Milliseconds to wait for the agent (default 30000)", "MS" },
  { NULL }
};

static gboolean
parse_positive (const char *flag, const char *text, gint64 max, gint64 *out, GError **error)
{
  guint64 v = 0;

  if (!g_ascii_string_to_unsigned (text, 10, 1, (guint64)max, &v, NULL))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s must be an integer between 1 and %" G_GINT64_FORMAT ", got '%s'", flag,
                     max, text);
  *out = (gint64)v;
  return TRUE;
}

/* --ttl / --idle-timeout: 500ms, 90s, 30m, 2h or plain milliseconds, like namzu-exec
 * --timeout; at least 1 ms and at most NZ_LIFETIME_MAX_MS. */
static gboolean
parse_duration (const char *flag, const char *text, gint64 *out, GError **error)
{
  long long v = nz_lite_exec_parse_timeout_ms (text);

  if (v < 1 || v > NZ_LIFETIME_MAX_MS)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s must be a positive duration such as 500ms, 90s, 30m or 2h (at most "
                     "100 years), got '%s'", flag, text);
  *out = (gint64)v;
  return TRUE;
}

/* Plain decimal only ("1", "1.5", ".5"): no sign, exponent, hex, "inf"/"nan" or surrounding
 * space, which strtod and JavaScript's Number() would both take. */
static gboolean
parse_cpus (const char *text, double *out, GError **error)
{
  gsize digits = strspn (text, "0123456789");

  if (text[digits] == '.')
    digits += 1 + strspn (text + digits + 1, "0123456789");
  if (digits == 0 || text[digits] != '\0' || strcmp (text, ".") == 0 || digits > 32)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "--cpus must be a decimal number such as 1.5, got '%s'", text);
  *out = g_ascii_strtod (text, NULL);
  return nz_cpus_check (*out, "--cpus", error);
}

/* A flag given replaces what the config said. */
static void
replace_string (char **dst, const char *flag)
{
  if (flag != NULL)
    {
      g_free (*dst);
      *dst = g_strdup (flag);
    }
}

/* The backend's own flags are its config keys (--docker-network is backend.network): the
 * backend @opts names parses them over the config, and refuses them if they are not its own. */
static gboolean
backend_flags (NzCreateOptions *opts, GError **error)
{
  static const char *const flag_of[] = { "network", "--docker-network",
                                         "hostReachability", "--host-reachability",
                                         "labels", "--label",
                                         "egressProxyImage", "--egress-proxy-image",
                                         "egressProxyUpstreamNetwork", "--egress-upstream-network",
                                         "allowInwardFor", "--allow-inward-for",
                                         "kubeconfig", "--kubeconfig",
                                         "context", "--context",
                                         "namespace", "--namespace",
                                         "sandboxTemplateName", "--template",
                                         "warmPoolName", "--warm-pool",
                                         "agentAddress", "--agent-address",
                                         "workspaceId", "--workspace",
                                         "holderEpoch", "--epoch",
                                         "refreshPodTemplate", "--refresh-pod-template",
                                         NULL };
  const struct
  {
    const char *key, *value;
  } kube[] = { { "kubeconfig", opt_kubeconfig },         { "context", opt_kube_context },
               { "namespace", opt_kube_namespace },      { "sandboxTemplateName", opt_kube_template },
               { "warmPoolName", opt_kube_pool },        { "agentAddress", opt_kube_address },
               { "workspaceId", opt_kube_workspace } };
  g_autoptr (JsonObject) keys = json_object_new ();

  if (opt_docker_network != NULL)
    json_object_set_string_member (keys, "network", opt_docker_network);
  if (opt_reachability != NULL)
    json_object_set_string_member (keys, "hostReachability", opt_reachability);
  if (opt_labels != NULL)
    {
      JsonObject *labels = json_object_new ();

      json_object_set_object_member (keys, "labels", labels);
      for (char **l = opt_labels; *l != NULL; l++)
        {
          const char *eq = strchr (*l, '=');
          g_autofree char *key = eq != NULL ? g_strndup (*l, eq - *l) : NULL;

          if (key == NULL || *key == '\0')
            return nz_throw (error, NZ_ERROR_INVALID_ARGS, "--label must be KEY=VALUE, got '%s'",
                             *l);
          json_object_set_string_member (labels, key, eq + 1);
        }
    }
  if (opt_proxy_image != NULL)
    json_object_set_string_member (keys, "egressProxyImage", opt_proxy_image);
  if (opt_upstream != NULL)
    json_object_set_string_member (keys, "egressProxyUpstreamNetwork", opt_upstream);
  if (opt_inward != NULL)
    {
      JsonArray *hosts = json_array_new ();

      json_object_set_array_member (keys, "allowInwardFor", hosts);
      for (char **i = opt_inward; *i != NULL; i++)
        json_array_add_string_element (hosts, *i);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (kube); i++)
    if (kube[i].value != NULL)
      json_object_set_string_member (keys, kube[i].key, kube[i].value);
  if (opt_kube_epoch != NULL)
    {
      guint64 epoch = 0;

      if (!g_ascii_string_to_unsigned (opt_kube_epoch, 10, 0, 9007199254740991ull, &epoch, NULL))
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "--epoch must be a non-negative integer, got '%s'", opt_kube_epoch);
      json_object_set_int_member (keys, "holderEpoch", (gint64)epoch);
    }
  if (opt_kube_refresh)
    json_object_set_boolean_member (keys, "refreshPodTemplate", TRUE);
  if (json_object_get_size (keys) == 0)
    return TRUE;
  return nz_create_options_set_backend_flags (opts, keys, flag_of, error);
}

/* The config first, then the flags over it (DESIGN.md "Configuration"). */
gboolean
nz_create_build_options (NzCreateOptions *opts, GError **error)
{
  if (opt_config != NULL)
    {
      gsize len = 0;
      g_autofree char *data = nz_create_read_config (opt_config, &len, error);

      if (data == NULL || !nz_create_options_load_config (opts, data, (gssize)len, error))
        return FALSE;
    }
  replace_string (&opts->backend, opt_backend);
  replace_string (&opts->image, opt_image);
  if (opt_network != NULL)
    {
      if (strcmp (opt_network, "deny-all") == 0)
        opts->network = NZ_NETWORK_DENY_ALL;
      else if (strcmp (opt_network, "allow-all") == 0)
        opts->network = NZ_NETWORK_ALLOW_ALL;
      else
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "--network must be deny-all or allow-all, got '%s' (an allowlist is "
                         "--egress HOST,...)", opt_network);
      g_ptr_array_set_size (opts->egress_hosts, 0);
    }
  if (opt_egress != NULL)
    {
      if (opt_network != NULL)
        return nz_throw (error, NZ_ERROR_INVALID_ARGS, "--egress cannot be combined with --network");
      g_ptr_array_set_size (opts->egress_hosts, 0);
      for (char **e = opt_egress; *e != NULL; e++)
        {
          g_auto (GStrv) hosts = g_strsplit (*e, ",", -1);

          for (char **hst = hosts; *hst != NULL; hst++)
            if (*g_strstrip (*hst) != '\0')
              g_ptr_array_add (opts->egress_hosts, g_strdup (*hst));
        }
      opts->network = NZ_NETWORK_ALLOWLIST;
    }
  if (opt_profile != NULL
      && !nz_create_apply_profile (opts, opt_profile, opt_config,
                                   opt_egress != NULL || opt_network != NULL, error))
    return FALSE;
  if (opt_credential != NULL && !nz_create_apply_credentials (opts, opt_credential, error))
    return FALSE;
  if (!nz_create_apply_env (opts, opt_env_file, opt_env, error))
    return FALSE;
  if (opt_memory != NULL
      && !parse_positive ("--memory-mb", opt_memory, NZ_LIMIT_MB_MAX, &opts->memory_mb, error))
    return FALSE;
  if (opt_disk != NULL
      && !parse_positive ("--disk-mb", opt_disk, NZ_LIMIT_MB_MAX, &opts->disk_mb, error))
    return FALSE;
  if (opt_procs != NULL
      && !parse_positive ("--max-processes", opt_procs, G_MAXINT32, &opts->max_processes, error))
    return FALSE;
  if (opt_cpus != NULL && !parse_cpus (opt_cpus, &opts->cpus, error))
    return FALSE;
  if (opt_ttl != NULL && !parse_duration ("--ttl", opt_ttl, &opts->ttl_ms, error))
    return FALSE;
  if (opt_idle != NULL
      && !parse_duration ("--idle-timeout", opt_idle, &opts->idle_timeout_ms, error))
    return FALSE;
  if (opt_ready != NULL)
    {
      gint64 v = 0;

      if (!parse_positive ("--ready-timeout", opt_ready, G_MAXINT32, &v, error))
        return FALSE;
      opts->ready_timeout_ms = (guint)v;
    }
  opts->agent_shares_uid = opts->agent_shares_uid || opt_agent_shares_uid;
  if (opt_outputs != NULL && !nz_create_options_set_mount (opts, "outputs", opt_outputs, error))
    return FALSE;
  if (opt_uploads != NULL && !nz_create_options_set_mount (opts, "uploads", opt_uploads, error))
    return FALSE;
  return backend_flags (opts, error);
}
