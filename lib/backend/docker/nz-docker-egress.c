#include "nz-docker-egress.h"

#include <string.h>

#include "nz-docker-argv.h"
#include "nz-docker.h"
#include "nz-egress-live.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"
#include "nz-proxy-config.h"
#include "nz-docker-options.h"

/* Each docker call of the proxy's start: a loaded daemon answers well within this. */
#define PROXY_CALL_TIMEOUT_MS 60000

static char *
docker_call (const char *docker, guint timeout_ms, GError **error, const char *const *args)
{
  return nz_docker_run (docker, args, g_strv_length ((char **)args), NULL, timeout_ms, error);
}

static char *
proxy_name (NzHandle *h)
{
  return g_strconcat (NZ_DOCKER_PROXY_NAME_PREFIX, h->id, NULL);
}

gboolean
nz_docker_egress_preflight (const char *docker, const NzCreateOptions *opts, GError **error)
{
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autofree char *label = NULL;
  const char *const args[] = { "image", "inspect", "--format",
                               "{{ index .Config.Labels \"" NZ_EGRESS_PROXY_IMAGE_CONFIG_LABEL
                               "\" }}",
                               nz_docker_options (opts)->proxy_image, NULL };

  if (opts->egress_profile != NULL)
    {
      profile = nz_egress_profile_parse (opts->egress_profile, -1, NULL, error);
      if (profile == NULL)
        return FALSE;
    }
  /* V1 is what every proxy image reads; only port rules need the label. */
  if (profile != NULL && nz_egress_profile_has_ports (profile))
    {
      label = docker_call (docker, PROXY_CALL_TIMEOUT_MS, NULL, args);
      if (!nz_docker_check_proxy_label (nz_docker_options (opts)->proxy_image, label, error))
        return FALSE;
    }
  return TRUE;
}

static JsonArray *
strv_to_array (GPtrArray *list)
{
  JsonArray *arr = json_array_new ();

  for (guint i = 0; list != NULL && i < list->len; i++)
    json_array_add_string_element (arr, list->pdata[i]);
  return arr;
}

void
nz_docker_egress_record (NzHandle *h, const NzCreateOptions *opts, const char *internal_network)
{
  const NzDockerOptions *d = nz_docker_options (opts);
  JsonObject *rec = json_object_new ();

  json_object_set_string_member (rec, "image", d->proxy_image);
  json_object_set_string_member (rec, "upstreamNetwork",
                                 d->upstream_network != NULL ? d->upstream_network
                                                             : NZ_DOCKER_DEFAULT_UPSTREAM_NETWORK);
  json_object_set_string_member (rec, "internalNetwork", internal_network);
  json_object_set_array_member (rec, "labels", strv_to_array (d->labels));
  if (d->allow_inward_for->len > 0)
    json_object_set_array_member (rec, "allowInwardFor", strv_to_array (d->allow_inward_for));
  if (opts->egress_profile != NULL)
    json_object_set_string_member (rec, "profile", opts->egress_profile);
  /* Kept (in the 0600 private handle, like the token) so a live set can restart the proxy. */
  if (opts->egress_credentials != NULL)
    json_object_set_string_member (rec, "credentials", opts->egress_credentials);
  json_object_set_object_member (h->priv, "egress", rec);
}

static GPtrArray *
array_to_ptrs (JsonArray *arr)
{
  GPtrArray *out = g_ptr_array_new ();

  for (guint i = 0; arr != NULL && i < json_array_get_length (arr); i++)
    g_ptr_array_add (out, (gpointer)json_array_get_string_element (arr, i));
  return out;
}

/* The configuration text and which variable carries it (spec B.3 egressProxyContainerConfig). */
static char *
build_config (JsonObject *rec, const char *const *hosts, const char **env_name, GError **error)
{
  const char *profile_json = nz_json_get_string (rec, "profile");
  const char *credentials_json = nz_json_get_string (rec, "credentials");
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (GPtrArray) inward = array_to_ptrs (nz_json_get_array (rec, "allowInwardFor"));
  g_autoptr (JsonNode) config = NULL;

  if (profile_json != NULL)
    {
      profile = nz_egress_profile_parse (profile_json, -1, NULL, error);
      if (profile == NULL)
        return NULL;
    }
  g_ptr_array_add (inward, NULL);
  config = nz_proxy_config_build (hosts, profile, NULL,
                                  inward->len > 1 ? (const char *const *)inward->pdata : NULL,
                                  NZ_EGRESS_PROXY_PORT, env_name);
  if (credentials_json != NULL)
    {
      JsonNode *creds = nz_egress_parse_credentials (credentials_json, error);

      if (creds == NULL)
        return NULL;
      json_object_set_member (json_node_get_object (config), "credentials", creds);
    }
  return nz_json_to_string (config, NULL);
}

/* removeEgressProxyContainer: its own deadline, never fails the caller (it runs on a path
 * that is already failing). */
static void
remove_quietly (const char *docker, const char *name)
{
  const char *const args[] = { "rm", "-f", name, NULL };
  g_autofree char *out = docker_call (docker, NZ_DOCKER_PROXY_REMOVE_TIMEOUT_MS, NULL, args);
}

static gboolean
start_failed (const char *docker, const char *name, const char *image, GError **error)
{
  remove_quietly (docker, name);
  return nz_prefix_error (error, "Could not start the egress proxy container '%s' from image "
                          "'%s': ", name, image);
}

gboolean
nz_docker_egress_start (NzHandle *h, const char *const *hosts, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "egress");
  g_autofree char *docker = nz_docker_find_binary (error);
  g_autofree char *name = proxy_name (h);
  g_autofree char *config = NULL;
  g_autofree char *out = NULL;
  g_autofree char *running = NULL;
  g_autoptr (GPtrArray) labels = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  g_autoptr (GPtrArray) attach = NULL;
  const char *env_name = NULL;
  NzDockerProxyPlan plan = { 0 };
  JsonArray *list;

  g_return_val_if_fail (rec != NULL, FALSE);
  if (docker == NULL)
    return FALSE;
  config = build_config (rec, hosts, &env_name, error);
  if (config == NULL)
    return FALSE;
  labels = array_to_ptrs (nz_json_get_array (rec, "labels"));
  plan.name = name;
  plan.image = nz_json_get_string (rec, "image");
  plan.upstream_network = nz_json_get_string (rec, "upstreamNetwork");
  plan.internal_network = nz_json_get_string (rec, "internalNetwork");
  plan.config_env = env_name;
  plan.labels = labels;
  argv = nz_docker_build_proxy_argv (&plan, error);
  if (argv == NULL)
    return FALSE;
  /* Upstream first (the route out), then the internal leg under the alias the sandbox dials. */
  out = nz_docker_run_env (docker, (const char *const *)argv->pdata, argv->len, env_name, config,
                           PROXY_CALL_TIMEOUT_MS, error);
  explicit_bzero (config, strlen (config));
  if (out == NULL)
    return start_failed (docker, name, plan.image, error);
  attach = nz_docker_build_proxy_attach_argv (plan.internal_network, name);
  g_free (out);
  out = nz_docker_run (docker, (const char *const *)attach->pdata, attach->len, NULL,
                       PROXY_CALL_TIMEOUT_MS, error);
  if (out == NULL)
    return start_failed (docker, name, plan.image, error);
  {
    const char *const args[] = { "inspect", "--format", "{{.State.Running}}", name, NULL };

    /* A proxy that refused its configuration exits at once (and --rm removes it). */
    running = docker_call (docker, PROXY_CALL_TIMEOUT_MS, NULL, args);
  }
  if (g_strcmp0 (running, "true") != 0)
    {
      nz_throw (error, NZ_ERROR_FAILED, "the egress proxy container '%s' is not running after "
                "being started", name);
      return start_failed (docker, name, plan.image, error);
    }
  list = json_array_new ();
  for (guint i = 0; hosts[i] != NULL; i++)
    json_array_add_string_element (list, hosts[i]);
  json_object_set_array_member (rec, "hosts", list);
  json_object_set_string_member (rec, "proxyContainer", name);
  return TRUE;
}

gboolean
nz_docker_egress_stop (NzHandle *h, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "egress");
  g_autofree char *docker = NULL;
  g_autofree char *name = proxy_name (h);
  g_autofree char *out = NULL;
  const char *const args[] = { "rm", "-f", name, NULL };

  if (rec == NULL)
    return TRUE;
  docker = nz_docker_find_binary (error);
  if (docker == NULL)
    return FALSE;
  /* By its deterministic name, recorded or not: a start that died half-way leaves one too. */
  out = docker_call (docker, NZ_DOCKER_PROXY_REMOVE_TIMEOUT_MS, error, args);
  if (out == NULL)
    return nz_prefix_error (error, "the egress proxy container '%s' could not be confirmed "
                            "removed", name);
  json_object_remove_member (rec, "proxyContainer");
  return TRUE;
}

static gboolean
swap_stop (NzHandle *h, GError **error)
{
  return nz_docker_egress_stop (h, error);
}

gboolean
nz_docker_egress_set (NzHandle *h, const char *const *hosts, gboolean *changed,
                      GError **error)
{
  static const NzEgressSwap docker_swap = { "docker", "proxyContainer", swap_stop,
                                            nz_docker_egress_start };
  static const NzEgressSwap runsc_swap = { "runsc", "proxyContainer", swap_stop,
                                           nz_docker_egress_start };
  return nz_egress_live_set (h, hosts,
                             g_strcmp0 (h->backend, "container:runsc") == 0 ? &runsc_swap
                                                                           : &docker_swap,
                             changed, error);
}
