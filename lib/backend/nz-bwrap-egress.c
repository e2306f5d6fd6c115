#include "nz-bwrap-egress.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-allowlist.h"
#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"
#include "nz-proxy-config.h"

/* How long the proxy may take to print its listening line. */
#define PROXY_READY_MS 5000
/* How long a stopping proxy gets after SIGTERM before SIGKILL. */
#define PROXY_STOP_MS 2000

/* Parses [{host, header, value}]: each a non-empty string. Returns a new array node. */
static JsonNode *
parse_credentials (const char *json, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *arr;

  if (!json_parser_load_from_data (parser, json, -1, NULL)
      || !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)))
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "backend.brokeredCredentials: must be a list of {host, header, value}"),
            NULL);
  arr = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (arr); i++)
    {
      JsonNode *e = json_array_get_element (arr, i);
      const char *fields[] = { "host", "header", "value" };

      for (guint f = 0; f < G_N_ELEMENTS (fields); f++)
        {
          const char *s = JSON_NODE_HOLDS_OBJECT (e)
                              ? nz_json_get_string (json_node_get_object (e), fields[f])
                              : NULL;

          if (s == NULL || *s == '\0')
            return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                              "backend.brokeredCredentials[%u].%s: must be a non-empty string", i,
                              fields[f]),
                    NULL);
        }
    }
  return json_node_copy (json_parser_get_root (parser));
}

gboolean
nz_bwrap_egress_check (const NzCreateOptions *opts, GError **error)
{
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (JsonNode) creds = NULL;
  g_autoptr (GPtrArray) cred_hosts = g_ptr_array_new ();

  for (guint i = 0; i < opts->egress_hosts->len; i++)
    {
      g_autofree char *path = g_strdup_printf ("--egress[%u]", i);
      g_autofree char *h
          = nz_egress_host_validate (opts->egress_hosts->pdata[i], path, "bwrap", error);

      if (h == NULL)
        return FALSE;
    }
  if (opts->egress_profile != NULL)
    {
      profile = nz_egress_profile_parse (opts->egress_profile, -1, "bwrap", error);
      if (profile == NULL)
        return FALSE;
    }
  if (opts->egress_credentials == NULL)
    return TRUE;
  /* A credential is only ever stamped by the proxy; with no allowlist there is none. */
  if (opts->network != NZ_NETWORK_ALLOWLIST)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "backend.brokeredCredentials: needs an egress allowlist (--egress or "
                     "--profile); with no egress proxy nothing would carry them");
  creds = parse_credentials (opts->egress_credentials, error);
  if (creds == NULL)
    return FALSE;
  for (guint i = 0; i < json_array_get_length (json_node_get_array (creds)); i++)
    {
      JsonObject *o = json_array_get_object_element (json_node_get_array (creds), i);

      g_ptr_array_add (cred_hosts, (gpointer)nz_json_get_string (o, "host"));
    }
  g_ptr_array_add (cred_hosts, NULL);
  if (profile != NULL)
    return nz_egress_profile_check_credentials (profile, (const char *const *)cred_hosts->pdata,
                                                "bwrap", error);
  /* Without a profile the allowlist plays its part: the secret goes nowhere it does not. */
  for (guint i = 0; cred_hosts->pdata[i] != NULL; i++)
    {
      gboolean covered = FALSE;

      for (guint k = 0; k < opts->egress_hosts->len && !covered; k++)
        covered = nz_allowlist_entry_matches (opts->egress_hosts->pdata[k], cred_hosts->pdata[i]);
      if (!covered)
        {
          g_autofree char *path = g_strdup_printf ("backend.brokeredCredentials[%u].host", i);

          return nz_egress_profile_throw (error, NZ_EGRESS_ERROR_CONFLICTING_POLICY, path, "bwrap",
                                          "\"%s\" is not on the egress allowlist",
                                          (const char *)cred_hosts->pdata[i]);
        }
    }
  return TRUE;
}

char *
nz_bwrap_egress_find_binary (GError **error)
{
  const char *env = g_getenv ("NAMZU_EGRESS_BIN");
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autoptr (GPtrArray) tried = g_ptr_array_new_with_free_func (g_free);

  if (env != NULL && *env != '\0')
    {
      if (g_path_is_absolute (env) && g_file_test (env, G_FILE_TEST_IS_EXECUTABLE))
        return g_strdup (env);
      return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                        "NAMZU_EGRESS_BIN=%s is not an executable absolute path", env),
              NULL);
    }
  if (self != NULL)
    {
      g_autofree char *dir = g_path_get_dirname (self);

      g_ptr_array_add (tried, g_build_filename (dir, "namzu-egress", NULL));
    }
  g_ptr_array_add (tried, g_strdup ("/usr/bin/namzu-egress"));
  g_ptr_array_add (tried, g_strdup ("/usr/local/bin/namzu-egress"));
  for (guint i = 0; i < tried->len; i++)
    if (g_file_test (tried->pdata[i], G_FILE_TEST_IS_EXECUTABLE)
        && !g_file_test (tried->pdata[i], G_FILE_TEST_IS_DIR))
      return g_canonicalize_filename (tried->pdata[i], NULL);
  return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                    "namzu-egress not found next to this tool or in /usr; set NAMZU_EGRESS_BIN"),
          NULL);
}

static guint64
start_time (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *data = NULL;
  const char *p;
  guint64 v = 0;

  if (pid <= 0 || !g_file_get_contents (path, &data, NULL, NULL))
    return 0;
  p = strrchr (data, ')');
  /* Field 22 (starttime); after ')' come fields 3.. separated by single spaces. */
  for (int field = 2; p != NULL && field < 22; field++)
    p = strchr (p + 1, ' ');
  if (p != NULL)
    v = g_ascii_strtoull (p + 1, NULL, 10);
  return v;
}

static void
close_fd_setsid (gpointer data)
{
  /* The proxy outlives namzu-create, like the sandbox, and takes no terminal signals. */
  setsid ();
}

gboolean
nz_bwrap_egress_start (NzHandle *h, const char *egress_bin, const char *const *hosts,
                       const char *profile_json, const char *credentials_json, const char *sock_dir,
                       GError **error)
{
  g_autofree char *sock = g_build_filename (sock_dir, "egress.sock", NULL);
  g_autofree char *log = g_build_filename (h->dir, "egress.log", NULL);
  g_autofree char *sock_arg = g_strdup_printf ("--unix=%s", sock);
  g_autofree char *log_arg = g_strdup_printf ("--log=%s", log);
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (JsonNode) config = NULL;
  g_autofree char *config_text = NULL;
  g_auto (GStrv) envp = g_get_environ ();
  const char *env_name = NULL;
  char *argv[] = { (char *)egress_bin, "proxy", "--no-tcp", sock_arg, log_arg, NULL };
  nz_autofd int out = -1;
  GString *line = g_string_new (NULL);
  g_autofree char *first = NULL;
  gint64 deadline = g_get_monotonic_time () + PROXY_READY_MS * 1000;
  JsonObject *rec;
  JsonArray *list;
  GPid pid = 0;

  if (profile_json != NULL)
    {
      profile = nz_egress_profile_parse (profile_json, -1, "bwrap", error);
      if (profile == NULL)
        return FALSE;
    }
  config = nz_proxy_config_build (hosts, profile, NULL, NULL, NZ_EGRESS_PROXY_PORT, &env_name);
  if (credentials_json != NULL)
    {
      JsonNode *creds = parse_credentials (credentials_json, error);

      if (creds == NULL)
        return FALSE;
      json_object_set_member (json_node_get_object (config), "credentials", creds);
    }
  config_text = nz_json_to_string (config, NULL);
  /* The configuration travels in the proxy's environment, never its argv. */
  envp = g_environ_unsetenv (envp, NZ_EGRESS_PROXY_CONFIG_ENV);
  envp = g_environ_unsetenv (envp, NZ_EGRESS_PROXY_CONFIG_V2_ENV);
  envp = g_environ_setenv (envp, env_name, config_text, TRUE);
  if (!g_spawn_async_with_pipes (NULL, argv, envp, G_SPAWN_STDERR_TO_DEV_NULL, close_fd_setsid,
                                 NULL, &pid, NULL, &out, NULL, error))
    return nz_prefix_error (error, "cannot start the egress proxy");
  for (;;)
    {
      struct pollfd pfd = { out, POLLIN, 0 };
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      char c;
      ssize_t n;

      if (left <= 0 || poll (&pfd, 1, (int)left) <= 0)
        break;
      n = read (out, &c, 1);
      if (n <= 0 || c == '\n' || line->len > 4096)
        break;
      g_string_append_c (line, c);
    }
  first = g_string_free (line, FALSE);
  if (!g_str_has_prefix (first, "namzu-egress-proxy: listening on "))
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      return nz_throw (error, NZ_ERROR_FAILED, "the egress proxy did not start (see %s)", log);
    }
  rec = json_object_new ();
  list = json_array_new ();
  for (guint i = 0; hosts[i] != NULL; i++)
    json_array_add_string_element (list, hosts[i]);
  json_object_set_array_member (rec, "hosts", list);
  if (profile_json != NULL)
    json_object_set_string_member (rec, "profile", profile_json);
  /* Kept (in the 0600 private handle, like the token) so a live set can restart the proxy. */
  if (credentials_json != NULL)
    json_object_set_string_member (rec, "credentials", credentials_json);
  json_object_set_string_member (rec, "socket", sock);
  json_object_set_int_member (rec, "proxyPid", pid);
  json_object_set_int_member (rec, "proxyStartTime", (gint64)start_time (pid));
  json_object_set_object_member (h->priv, "egress", rec);
  return TRUE;
}

gboolean
nz_bwrap_egress_stop (NzHandle *h, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "egress");
  double pid_d = 0, start_d = 0;
  pid_t pid;
  gint64 deadline;

  if (rec == NULL || !nz_json_get_number (rec, "proxyPid", &pid_d))
    return TRUE;
  nz_json_get_number (rec, "proxyStartTime", &start_d);
  pid = (pid_t)pid_d;
  /* Only the process we started: a recycled pid is somebody else's. */
  if (pid > 0 && start_time (pid) == (guint64)start_d)
    {
      kill (pid, SIGTERM);
      deadline = g_get_monotonic_time () + PROXY_STOP_MS * 1000;
      while (start_time (pid) == (guint64)start_d && g_get_monotonic_time () < deadline)
        {
          waitpid (pid, NULL, WNOHANG); /* our child when a create rolls back */
          g_usleep (10 * 1000);
        }
      if (start_time (pid) == (guint64)start_d)
        {
          kill (pid, SIGKILL);
          waitpid (pid, NULL, WNOHANG);
        }
      {
        char state = 0;
        g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
        g_autofree char *data = NULL;

        /* A zombie no longer proxies anything; anything else still alive is a failure. */
        if (g_file_get_contents (path, &data, NULL, NULL) && strrchr (data, ')') != NULL)
          state = strrchr (data, ')')[2];
        if (state != 0 && state != 'Z' && start_time (pid) == (guint64)start_d)
          return nz_throw (error, NZ_ERROR_FAILED, "the egress proxy (pid %d) did not stop", pid);
      }
    }
  if (nz_json_get_string (rec, "socket") != NULL)
    unlink (nz_json_get_string (rec, "socket"));
  json_object_remove_member (rec, "proxyPid");
  json_object_remove_member (rec, "proxyStartTime");
  return TRUE;
}

void
nz_bwrap_egress_wrap_argv (GPtrArray *argv, const char *egress_bin)
{
  /* argv ends "...", "--", <agent>. */
  char *agent = g_ptr_array_steal_index (argv, argv->len - 1);
  char *dashdash = g_ptr_array_steal_index (argv, argv->len - 1);
  const char *inside
      = g_str_has_prefix (egress_bin, "/usr/") ? egress_bin : NZ_BWRAP_EGRESS_BOUND_BIN;

  if (!g_str_equal (inside, egress_bin))
    {
      guint at = argv->len;

      /* Mount points must exist before bwrap remounts the root read-only. */
      for (guint i = 0; i < argv->len; i++)
        if (g_str_equal (argv->pdata[i], "--remount-ro"))
          {
            at = i;
            break;
          }
      g_ptr_array_insert (argv, at, g_strdup (inside));
      g_ptr_array_insert (argv, at, g_strdup (egress_bin));
      g_ptr_array_insert (argv, at, g_strdup ("--ro-bind"));
    }
  g_ptr_array_add (argv, dashdash);
  g_ptr_array_add (argv, g_strdup (inside));
  g_ptr_array_add (argv, g_strdup ("relay"));
  g_ptr_array_add (argv, g_strdup ("--listen=" NZ_BWRAP_EGRESS_RELAY_ADDR));
  g_ptr_array_add (argv, g_strdup ("--to=" NZ_BWRAP_EGRESS_SOCK_INSIDE));
  g_ptr_array_add (argv, g_strdup ("--"));
  g_ptr_array_add (argv, agent);
}

char **
nz_bwrap_egress_envp (char **envp)
{
  static const char *const names[] = { "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy" };

  /* These direct traffic; they permit nothing. The empty namespace is the boundary. */
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    envp = g_environ_setenv (envp, names[i], NZ_BWRAP_EGRESS_PROXY_URL, TRUE);
  envp = g_environ_setenv (envp, "NO_PROXY", "localhost,127.0.0.1", TRUE);
  envp = g_environ_setenv (envp, "no_proxy", "localhost,127.0.0.1", TRUE);
  return envp;
}

static gboolean
same_hosts (JsonObject *rec, const char *const *hosts)
{
  JsonArray *old = rec != NULL ? nz_json_get_array (rec, "hosts") : NULL;
  double pid = 0;

  /* Only a list that is applied AND has a running proxy counts as unchanged. */
  if (old == NULL || !nz_json_get_number (rec, "proxyPid", &pid))
    return FALSE;
  if (json_array_get_length (old) != g_strv_length ((char **)hosts))
    return FALSE;
  for (guint i = 0; hosts[i] != NULL; i++)
    if (g_strcmp0 (json_array_get_string_element (old, i), hosts[i]) != 0)
      return FALSE;
  return TRUE;
}

gboolean
nz_bwrap_egress_set (const char *id, const char *const *hosts, gboolean *changed, GError **error)
{
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (NzHandle) probe = nz_handle_load (id, error);
  g_autofree char *lock_path = NULL;
  g_autofree char *sock_dir = NULL;
  g_autofree char *bin = NULL;
  g_autofree char *profile_json = NULL;
  g_autofree char *credentials_json = NULL;
  nz_autofd int lock = -1;
  JsonObject *rec;

  *changed = FALSE;
  if (probe == NULL)
    return FALSE;
  if (g_strcmp0 (probe->backend, "container:bwrap") != 0
      || nz_json_get_object (probe->priv, "egress") == NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "This sandbox cannot change its network policy: it was created without an "
                     "egress proxy (create it with --egress or --profile)");
  for (guint i = 0; hosts[i] != NULL; i++)
    {
      g_autofree char *path = g_strdup_printf ("allowedHosts[%u]", i);
      g_autofree char *ok = nz_egress_host_validate (hosts[i], path, "bwrap", error);

      if (ok == NULL)
        return FALSE;
    }
  /* Under a profile: narrowing only, checked before queueing. */
  profile_json
      = g_strdup (nz_json_get_string (nz_json_get_object (probe->priv, "egress"), "profile"));
  if (profile_json != NULL)
    {
      g_autoptr (NzEgressProfile) profile
          = nz_egress_profile_parse (profile_json, -1, "bwrap", error);

      if (profile == NULL || !nz_egress_profile_check_narrowing (profile, hosts, "bwrap", error))
        return FALSE;
    }
  bin = nz_bwrap_egress_find_binary (error);
  if (bin == NULL)
    return FALSE;
  /* The per-sandbox queue: one change at a time, each applying and verifying its own list. */
  lock_path = g_build_filename (probe->dir, "egress.lock", NULL);
  lock = open (lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || flock (lock, LOCK_EX) != 0)
    return nz_throw_errno_prefix (error, "lock '%s'", lock_path);
  /* Re-read under the lock: the call before ours may have changed it. */
  h = nz_handle_load (id, error);
  if (h == NULL)
    return FALSE;
  rec = nz_json_get_object (h->priv, "egress");
  if (rec == NULL)
    return nz_throw (error, NZ_ERROR_NOT_FOUND, "sandbox '%s' is being destroyed", id);
  if (same_hosts (rec, hosts))
    return TRUE;
  *changed = TRUE;
  /* Fail closed: the old proxy is gone before the new one exists, and the handle says so
   * before either happens, so a crash in between leaves "no proxy", never "old list". */
  json_object_remove_member (rec, "hosts");
  if (!nz_handle_save (h, error) || !nz_bwrap_egress_stop (h, error) || !nz_handle_save (h, error))
    return nz_prefix_error (error, "the old egress proxy of '%s' may still run", id);
  sock_dir = g_build_filename (h->dir, "sock", NULL);
  credentials_json = g_strdup (nz_json_get_string (rec, "credentials"));
  if (!nz_bwrap_egress_start (h, bin, hosts, profile_json, credentials_json, sock_dir, error))
    return nz_prefix_error (error,
                            "sandbox '%s' now has no egress (the old proxy is stopped; "
                            "the next set starts one)",
                            id);
  return nz_handle_save (h, error);
}
