#include "nz-docker-net.h"

#include <net/if.h>
#include <string.h>
#include <sys/wait.h>

#include "nz-docker-argv.h"
#include "nz-docker.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-docker-options.h"

/* Each docker call here: a loaded daemon answers well within this. */
#define NET_CALL_TIMEOUT_MS 60000
/* iptables waits this long (seconds) for the xtables lock dockerd also takes. */
#define XTABLES_WAIT_S "10"
/* Identical rules are deleted one per call; more than this many copies is not ours. */
#define MAX_RULE_COPIES 8

static const char *const guard_hint =
  "A deny-all or allowlist docker sandbox is refused rather than started where it could reach "
  "the host: run namzu-create as root on the docker host, with iptables installed (apt-get "
  "install iptables), or point NAMZU_IPTABLES / NAMZU_IP6TABLES at the binaries";

static char *
docker_call (const char *docker, GError **error, const char *const *args)
{
  return nz_docker_run (docker, args, g_strv_length ((char **)args), NULL, NET_CALL_TIMEOUT_MS,
                        error);
}

gboolean
nz_docker_net_wants_private (const NzCreateOptions *opts)
{
  return nz_docker_options (opts)->network == NULL && opts->network != NZ_NETWORK_ALLOW_ALL;
}

static char *
list_members (const char *docker, const char *network, GError **error)
{
  const char *const args[] = { "network", "inspect", "--format",
                               "{{range .Containers}}{{.Name}} {{end}}", network, NULL };
  char *out = docker_call (docker, error, args);

  if (out == NULL)
    return (nz_prefix_error (error, "cannot list the containers on network '%s': ", network),
            NULL);
  return out;
}

gboolean
nz_docker_net_check_alone (const char *docker, const char *network, GError **error)
{
  g_autofree char *out = list_members (docker, network, error);
  g_auto (GStrv) names = NULL;

  if (out == NULL)
    return FALSE;
  names = g_strsplit (out, " ", -1);
  /* A proxy is named first: its alias would answer for two allowlists. */
  for (char **n = names; *n != NULL; n++)
    if (g_str_has_prefix (*n, NZ_DOCKER_PROXY_NAME_PREFIX))
      return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                       "network '%s' already carries another sandbox's egress proxy (%s): a "
                       "sandbox there could reach it, and either allowlist through the alias "
                       NZ_DOCKER_PROXY_ALIAS ". Give each sandbox its own --internal network, "
                       "or name none and the backend creates one", network, *n);
  for (char **n = names; *n != NULL; n++)
    if (**n != '\0')
      return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                       "network '%s' already carries container %s: a deny-all or allowlist "
                       "sandbox there could reach it, and it the sandbox. Give each sandbox its "
                       "own --internal network, or name none and the backend creates one",
                       network, *n);
  return TRUE;
}

/* ---- the host guard ------------------------------------------------------------------- */

static char *
find_xtables (const char *env, const char *name)
{
  const char *v = g_getenv (env);
  g_autofree char *sbin = g_build_filename ("/usr/sbin", name, NULL);
  char *path;

  if (v != NULL && *v != '\0')
    return g_strdup (v);
  /* A non-root PATH often lacks sbin. */
  path = g_find_program_in_path (name);
  if (path == NULL && g_file_test (sbin, G_FILE_TEST_IS_EXECUTABLE))
    path = g_steal_pointer (&sbin);
  return path;
}

typedef struct
{
  const char *env;
  const char *name;
} Family;

static const Family families[] = { { "NAMZU_IPTABLES", "iptables" },
                                   { "NAMZU_IP6TABLES", "ip6tables" } };

/* IPv6 is guarded only where the kernel has it: without it there is nothing to reach. */
static gboolean
family_present (const Family *f)
{
  return f != &families[1] || g_file_test ("/proc/net/if_inet6", G_FILE_TEST_EXISTS);
}

static char *
rule_comment (NzHandle *h)
{
  return g_strconcat ("namzu:", h->id, NULL);
}

/* `<iptables> -w N <op> INPUT [1] -i <bridge> -m conntrack ! --ctstate ESTABLISHED,RELATED
 * -m comment --comment namzu:<id> -j REJECT`: nothing the bridge starts reaches the host,
 * and the replies to what the host started (its connections to the worker) still do. REJECT,
 * not DROP, so a tool in the sandbox fails at once rather than hanging. Returns the exit
 * status (-1 when it did not run) and its stderr in @err. */
static int
run_rule (const char *bin, const char *op, const char *bridge, const char *comment, char **err,
          GError **error)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL;
  int status = 0;

  g_ptr_array_add (argv, (gpointer)bin);
  g_ptr_array_add (argv, (gpointer) "-w");
  g_ptr_array_add (argv, (gpointer)XTABLES_WAIT_S);
  g_ptr_array_add (argv, (gpointer)op);
  g_ptr_array_add (argv, (gpointer) "INPUT");
  /* First, so no ACCEPT an administrator put in INPUT comes before it. */
  if (strcmp (op, "-I") == 0)
    g_ptr_array_add (argv, (gpointer) "1");
  {
    const char *const rest[] = { "-i",      bridge, "-m",        "conntrack", "!",
                                 "--ctstate", "ESTABLISHED,RELATED", "-m", "comment",
                                 "--comment", comment, "-j", "REJECT" };

    for (gsize i = 0; i < G_N_ELEMENTS (rest); i++)
      g_ptr_array_add (argv, (gpointer)rest[i]);
  }
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                     NULL, err, &status, error))
    {
      nz_error_convert (error);
      return -1;
    }
  g_strstrip (*err);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* Deletes every copy of the rule; a rule that is not (or no longer) there is removed. */
static gboolean
remove_rule (const Family *f, const char *bridge, const char *comment, GError **error)
{
  g_autofree char *bin = find_xtables (f->env, f->name);

  if (bin == NULL)
    return nz_throw (error, NZ_ERROR_NOT_FOUND, "%s is not installed: the host guard rule "
                     "'%s' on bridge %s cannot be removed", f->name, comment, bridge);
  for (int i = 0; i < MAX_RULE_COPIES; i++)
    {
      g_autofree char *err = NULL;
      int rc = run_rule (bin, "-D", bridge, comment, &err, error);

      if (rc < 0)
        return FALSE;
      if (rc == 0)
        continue;
      /* iptables' words (nft and legacy alike) for "no such rule". */
      if (strstr (err, "does a matching rule exist") != NULL)
        return TRUE;
      return nz_throw (error, NZ_ERROR_FAILED, "%s -D INPUT (the host guard '%s' on bridge %s) "
                       "exited %d: %s", bin, comment, bridge, rc, err);
    }
  return nz_throw (error, NZ_ERROR_FAILED, "more than %d copies of the host guard '%s' on "
                   "bridge %s", MAX_RULE_COPIES, comment, bridge);
}

static gboolean
remove_guard (const char *bridge, const char *comment, GError **error)
{
  gboolean ok = TRUE;

  for (gsize i = 0; i < G_N_ELEMENTS (families); i++)
    if (family_present (&families[i]))
      ok = remove_rule (&families[i], bridge, comment, ok ? error : NULL) && ok;
  return ok;
}

static gboolean
install_guard (const char *bridge, const char *comment, GError **error)
{
  for (gsize i = 0; i < G_N_ELEMENTS (families); i++)
    {
      const Family *f = &families[i];
      g_autofree char *bin = NULL;
      g_autofree char *err = NULL;
      int rc;

      if (!family_present (f))
        continue;
      bin = find_xtables (f->env, f->name);
      if (bin == NULL)
        return nz_throw (error, NZ_ERROR_UNSUPPORTED, "%s is not installed, so the host guard "
                         "on bridge %s cannot be installed. %s", f->name, bridge, guard_hint);
      rc = run_rule (bin, "-I", bridge, comment, &err, error);
      if (rc < 0)
        return nz_prefix_error (error, "cannot install the host guard on bridge %s (%s): ",
                                bridge, guard_hint);
      if (rc != 0)
        return nz_throw (error, NZ_ERROR_UNSUPPORTED, "cannot install the host guard on bridge "
                         "%s: %s -I INPUT exited %d: %s. %s", bridge, bin, rc, err, guard_hint);
    }
  return TRUE;
}

/* The host interface of @network: a bridge (the guard matches its name), on this host (a
 * remote daemon's bridge is out of this host's reach). */
static char *
read_bridge (const char *docker, const char *network, GError **error)
{
  const char *const args[] = { "network", "inspect", "--format",
                               "{{.Driver}} {{.Id}} "
                               "{{index .Options \"com.docker.network.bridge.name\"}}",
                               network, NULL };
  g_autofree char *out = docker_call (docker, error, args);
  g_auto (GStrv) f = NULL;
  g_autofree char *bridge = NULL;

  if (out == NULL)
    return (nz_prefix_error (error, "cannot read network '%s': ", network), NULL);
  f = g_strsplit_set (out, " \t\n", -1);
  if (g_strv_length (f) < 2 || strcmp (f[0], "bridge") != 0)
    return (nz_throw (error, NZ_ERROR_UNSUPPORTED, "network '%s' is not a bridge network "
                      "(driver '%s'): the host guard can only be installed on a bridge. Use "
                      "`docker network create --internal NAME`, or name no network",
                      network, f[0] != NULL ? f[0] : ""), NULL);
  if (f[2] != NULL && *f[2] != '\0' && strcmp (f[2], "<no") != 0)
    bridge = g_strdup (f[2]);
  else
    bridge = g_strdup_printf ("br-%.12s", f[1]);
  if (strlen (bridge) >= IF_NAMESIZE || if_nametoindex (bridge) == 0)
    return (nz_throw (error, NZ_ERROR_UNSUPPORTED, "network '%s' has no bridge '%s' on this "
                      "host (is the docker daemon remote?): the host guard cannot be "
                      "installed. %s", network, bridge, guard_hint), NULL);
  return g_steal_pointer (&bridge);
}

static gboolean
remove_network (const char *docker, const char *network, GError **error)
{
  const char *const args[] = { "network", "rm", network, NULL };
  g_autoptr (GError) local = NULL;
  g_autofree char *out = docker_call (docker, &local, args);

  if (out != NULL || strstr (local->message, "No such network") != NULL
      || strstr (local->message, "not found") != NULL)
    return TRUE;
  g_propagate_error (error, g_steal_pointer (&local));
  return nz_prefix_error (error, "the sandbox's network '%s' could not be removed: ", network);
}

static gboolean
create_network (const char *docker, NzHandle *h, const NzCreateOptions *opts,
                const char *network, GError **error)
{
  GPtrArray *labels = nz_docker_options (opts)->labels;
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL;

  g_ptr_array_add (argv, g_strdup ("network"));
  g_ptr_array_add (argv, g_strdup ("create"));
  /* Internal: docker forwards nothing off it; no IPv6, so the container has none either. */
  g_ptr_array_add (argv, g_strdup ("--internal"));
  g_ptr_array_add (argv, g_strdup ("--label"));
  g_ptr_array_add (argv, g_strconcat ("ai.namzu.sandbox=", h->id, NULL));
  for (guint i = 0; i + 1 < labels->len; i += 2)
    {
      g_ptr_array_add (argv, g_strdup ("--label"));
      g_ptr_array_add (argv, g_strdup_printf ("%s=%s", (const char *)labels->pdata[i],
                                              (const char *)labels->pdata[i + 1]));
    }
  g_ptr_array_add (argv, g_strdup (network));
  out = nz_docker_run (docker, (const char *const *)argv->pdata, argv->len, NULL,
                       NET_CALL_TIMEOUT_MS, error);
  if (out == NULL)
    return nz_prefix_error (error, "cannot create the sandbox's network '%s': ", network);
  return TRUE;
}

gboolean
nz_docker_net_prepare (const char *docker, NzHandle *h, const NzCreateOptions *opts,
                       const char *network, gboolean private, GError **error)
{
  JsonObject *rec = json_object_new ();
  g_autofree char *bridge = NULL;
  g_autofree char *comment = rule_comment (h);

  json_object_set_string_member (rec, "network", network);
  json_object_set_boolean_member (rec, "private", private);
  json_object_set_object_member (h->priv, "netGuard", rec);
  if (!nz_handle_save (h, error))
    return FALSE;
  if (private && !create_network (docker, h, opts, network, error))
    return FALSE;
  bridge = read_bridge (docker, network, error);
  if (bridge == NULL)
    {
      if (private)
        remove_network (docker, network, NULL);
      return FALSE;
    }
  json_object_set_string_member (rec, "bridge", bridge);
  if (!nz_handle_save (h, error) || !install_guard (bridge, comment, error))
    {
      remove_guard (bridge, comment, NULL);
      if (private)
        remove_network (docker, network, NULL);
      return FALSE;
    }
  return TRUE;
}

gboolean
nz_docker_net_check_members (const char *docker, NzHandle *h, const char *network,
                             GError **error)
{
  g_autofree char *out = list_members (docker, network, error);
  g_autofree char *sandbox = g_strconcat (NZ_DOCKER_NAME_PREFIX, h->id, NULL);
  g_autofree char *proxy = g_strconcat (NZ_DOCKER_PROXY_NAME_PREFIX, h->id, NULL);
  g_auto (GStrv) names = NULL;

  if (out == NULL)
    return FALSE;
  names = g_strsplit (out, " ", -1);
  for (char **n = names; *n != NULL; n++)
    if (**n != '\0' && strcmp (*n, sandbox) != 0 && strcmp (*n, proxy) != 0)
      return nz_throw (error, NZ_ERROR_BUSY,
                       "network '%s' gained container %s while this sandbox started: the "
                       "sandbox would share it, so it is not kept", network, *n);
  return TRUE;
}

gboolean
nz_docker_net_release (const char *docker, NzHandle *h, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "netGuard");
  const char *network = rec != NULL ? nz_json_get_string (rec, "network") : NULL;
  const char *bridge = rec != NULL ? nz_json_get_string (rec, "bridge") : NULL;
  g_autofree char *comment = rule_comment (h);

  if (rec == NULL)
    return TRUE;
  /* The network first: its bridge goes with it, and nothing can join a network that is gone
   * while the rule is still in force. */
  if (network != NULL && json_object_get_boolean_member_with_default (rec, "private", FALSE)
      && !remove_network (docker, network, error))
    return FALSE;
  if (bridge != NULL && !remove_guard (bridge, comment, error))
    return nz_prefix_error (error, "the host guard of sandbox '%s' could not be confirmed "
                            "removed: ", h->id);
  json_object_remove_member (h->priv, "netGuard");
  return TRUE;
}
