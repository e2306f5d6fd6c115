#include "nz-bwrap-egress.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-egress-live.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"
#include "nz-proxy-config.h"

/* How long the proxy may take to print its listening line. */
#define PROXY_READY_MS 5000
/* How long a stopping proxy gets after SIGTERM before SIGKILL. */
#define PROXY_STOP_MS 2000

gboolean
nz_bwrap_egress_check (const NzCreateOptions *opts, GError **error)
{
  return nz_egress_options_check (opts, "bwrap", error);
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
      JsonNode *creds = nz_egress_parse_credentials (credentials_json, error);

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

/* The swap's "start": the record's profile and credentials carry over to the new proxy. */
static gboolean
swap_start (NzHandle *h, const char *const *hosts, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "egress");
  g_autofree char *profile_json = g_strdup (nz_json_get_string (rec, "profile"));
  g_autofree char *credentials_json = g_strdup (nz_json_get_string (rec, "credentials"));
  g_autofree char *sock_dir = g_build_filename (h->dir, "sock", NULL);
  g_autofree char *bin = nz_bwrap_egress_find_binary (error);

  return bin != NULL
         && nz_bwrap_egress_start (h, bin, hosts, profile_json, credentials_json, sock_dir, error);
}

gboolean
nz_bwrap_egress_set (NzHandle *h, const char *const *hosts, gboolean *changed, GError **error)
{
  static const NzEgressSwap swap = { "bwrap", "proxyPid", nz_bwrap_egress_stop, swap_start };

  return nz_egress_live_set (h, hosts, &swap, changed, error);
}
