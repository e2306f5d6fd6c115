#include "nz-docker-options.h"

static NzDockerOptions *
docker_options_new (void)
{
  NzDockerOptions *d = g_new0 (NzDockerOptions, 1);

  d->labels = g_ptr_array_new_with_free_func (g_free);
  d->allow_inward_for = g_ptr_array_new_with_free_func (g_free);
  return d;
}

static void
docker_options_free (gpointer data)
{
  NzDockerOptions *d = data;

  g_free (d->network);
  g_free (d->host_reachability);
  g_ptr_array_unref (d->labels);
  g_free (d->proxy_image);
  g_free (d->upstream_network);
  g_ptr_array_unref (d->allow_inward_for);
  g_free (d);
}

const NzDockerOptions *
nz_docker_options (const NzCreateOptions *opts)
{
  static gsize defaults;

  if (opts->backend_opts != NULL && g_strcmp0 (opts->backend_opts_for, NZ_DOCKER_OPTIONS_FOR) == 0)
    return opts->backend_opts;
  if (g_once_init_enter (&defaults))
    g_once_init_leave (&defaults, (gsize)docker_options_new ());
  return (const NzDockerOptions *)defaults;
}

NzDockerOptions *
nz_docker_options_ensure (NzCreateOptions *opts)
{
  if (opts->backend_opts == NULL)
    {
      opts->backend_opts = docker_options_new ();
      opts->backend_opts_free = docker_options_free;
      opts->backend_opts_for = NZ_DOCKER_OPTIONS_FOR;
    }
  g_return_val_if_fail (g_strcmp0 (opts->backend_opts_for, NZ_DOCKER_OPTIONS_FOR) == 0, NULL);
  return opts->backend_opts;
}
