/* test-docker-argv: the container:docker `docker run` argv is pinned here, byte for byte, so a
 * change to the hardening baseline has to get past this test on purpose (spec B.2, H.1), and
 * so is every spelling of --env redaction (spec B.5, H.5). Pure code, no daemon. */
#include <math.h>
#include <string.h>

#include "nz-backend.h"
#include "nz-docker-argv.h"
#include "nz-docker-options.h"
#include "nz-docker.h"
#include "nz-errors.h"
#include "nz-sandbox-env.h"
#include "nz-test.h"

#define TMPFS(p) "--tmpfs", p ":nosuid,nodev,exec,mode=1777"
/* privsep: root with three capabilities, which the worker keeps for itself under uid 1002 */
#define PRIVSEP                                                                                    \
  "--user", "0:0", "--cap-add=SETUID", "--cap-add=SETGID", "--cap-add=KILL", "--env",             \
      "NAMZU_WORKER_UID=1002", "--env", "NAMZU_WORKER_GID=1002", "--env",                          \
      "NAMZU_WORKER_WORKLOAD_UID=1001", "--env", "NAMZU_WORKER_WORKLOAD_GID=1001"

static NzCreateOptions *
base_opts (void)
{
  NzCreateOptions *opts = nz_create_options_new ();

  opts->image = g_strdup ("namzu-worker:latest");
  ck_assert (nz_create_options_set_mount (opts, "outputs", "/srv/task/out", NULL));
  return opts;
}

static GPtrArray *
build (const NzCreateOptions *opts, const char *network, const char *runtime, gboolean host_port,
       const char *user, GError **error)
{
  NzDockerPlan plan = { opts, "namzu-sandbox-nz-0123456789ab", network, runtime, user,
                        host_port };

  return nz_docker_build_run_argv (&plan, error);
}

static void
assert_argv (GPtrArray *argv, const char *const *want, gsize n_want)
{
  g_autofree char *got = NULL;

  ck_assert_ptr_nonnull (argv);
  g_ptr_array_add (argv, NULL);
  got = g_strjoinv (" ", (char **)argv->pdata);
  g_ptr_array_set_size (argv, argv->len - 1);
  ck_assert_msg (argv->len == n_want, "argv has %u entries, want %zu: %s", argv->len, n_want,
                 got);
  for (gsize i = 0; i < n_want; i++)
    ck_assert_msg (strcmp (argv->pdata[i], want[i]) == 0, "argv[%zu] = '%s', want '%s' (%s)", i,
                   (const char *)argv->pdata[i], want[i], got);
}

START_TEST (test_default_argv_pinned)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GPtrArray) argv = build (opts, "bridge", NULL, TRUE, NULL, NULL);
  static const char *const want[] = {
    "run", "--detach", "--rm", "--name", "namzu-sandbox-nz-0123456789ab", "--network", "bridge",
    "--cap-drop=ALL", "--security-opt=no-new-privileges", "--ipc", "private", "--read-only",
    TMPFS ("/tmp"), TMPFS ("/var/tmp"), TMPFS ("/workspace"), TMPFS ("/home/namzu"),
    PRIVSEP,
    "--volume", "/srv/task/out:/mnt/user-data/outputs:rw",
    "--env", "NAMZU_SANDBOX_WORKSPACE=/mnt/user-data/outputs",
    "--env", "NAMZU_SANDBOX_READ_ROOTS=/mnt/user-data/outputs",
    "--env", "NAMZU_SANDBOX_WRITE_ROOTS=/mnt/user-data/outputs",
    "--publish", "127.0.0.1::2024",
    "--env", "NAMZU_SANDBOX_TOKEN",
    "namzu-worker:latest",
  };

  assert_argv (argv, want, G_N_ELEMENTS (want));
}
END_TEST

/* Every optional part at once: a writable root (which drops --read-only and the tmpfs set and
 * nothing else), runsc, --user, labels, the whole layout in the spec's mount order whatever
 * order it was given in, the three bounds, container-network (no --publish). */
START_TEST (test_full_argv_pinned)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  const char *config =
    "{\"backend\":{\"tier\":\"container\",\"runtime\":\"runsc\",\"image\":\"img:1\","
    "\"readOnlyRootfs\":false,\"cpuLimit\":1.5,\"labels\":{\"acme.task\":\"t1\",\"b\":\"x=y\"},"
    "\"network\":\"sbx\",\"hostReachability\":\"container-network\"},"
    "\"layout\":{\"transcripts\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/h/tr\"}},"
    "\"outputs\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/h/out\"}},"
    "\"skills\":[{\"id\":\"pdf\",\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/h/sk\"}}],"
    "\"toolResults\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/h/tools\"}},"
    "\"scratch\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/h/scr\"}},"
    "\"uploads\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/h/up\"}}},"
    "\"defaultMemoryLimitMb\":512,\"defaultMaxProcesses\":64}";
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  static const char *const want[] = {
    "run", "--detach", "--rm", "--name", "namzu-sandbox-nz-0123456789ab", "--network", "sbx",
    "--cap-drop=ALL", "--security-opt=no-new-privileges", "--ipc", "private",
    "--user", "1001:1001",
    "--label", "acme.task=t1", "--label", "b=x=y",
    "--volume", "/h/out:/mnt/user-data/outputs:rw",
    "--volume", "/h/up:/mnt/user-data/uploads:ro",
    "--volume", "/h/scr:/mnt/user-data/scratch:rw",
    "--volume", "/h/tools:/mnt/user-data/tool_results:ro",
    "--volume", "/h/sk:/mnt/skills/pdf:ro",
    "--volume", "/h/tr:/mnt/transcripts:ro",
    "--env", "NAMZU_SANDBOX_WORKSPACE=/mnt/user-data/outputs",
    "--env", "NAMZU_SANDBOX_READ_ROOTS=/mnt/user-data/outputs:/mnt/user-data/uploads:"
             "/mnt/user-data/scratch:/mnt/user-data/tool_results:/mnt/skills/pdf:/mnt/transcripts",
    "--env", "NAMZU_SANDBOX_WRITE_ROOTS=/mnt/user-data/outputs:/mnt/user-data/scratch",
    "--runtime", "runsc",
    "--memory", "512m", "--pids-limit", "64", "--cpus", "1.5",
    "--env", "NAMZU_SANDBOX_TOKEN",
    "img:1",
  };

  ck_assert_msg (nz_create_options_load_config (opts, config, -1, &error), "%s",
                 error ? error->message : "");
  ck_assert_str_eq (opts->backend, "container:runsc");
  argv = build (opts, nz_docker_options (opts)->network, "runsc", FALSE, "1001:1001", &error);
  assert_argv (argv, want, G_N_ELEMENTS (want));
}
END_TEST

START_TEST (test_bounds_only_when_asked)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GPtrArray) plain = build (opts, "bridge", NULL, TRUE, NULL, NULL);
  g_autoptr (GPtrArray) bounded = NULL;
  static const char *const tail[] = { "--memory", "512m", "--pids-limit", "64", "--cpus", "1.5",
                                      "--env", "NAMZU_SANDBOX_TOKEN", "namzu-worker:latest" };

  for (guint i = 0; i < plain->len; i++)
    ck_assert (strcmp (plain->pdata[i], "--memory") != 0 && strcmp (plain->pdata[i], "--cpus") != 0
               && strcmp (plain->pdata[i], "--pids-limit") != 0
               && strcmp (plain->pdata[i], "--runtime") != 0);
  opts->memory_mb = 512;
  opts->max_processes = 64;
  opts->cpus = 1.5;
  bounded = build (opts, "bridge", NULL, TRUE, NULL, NULL);
  ck_assert_uint_ge (bounded->len, G_N_ELEMENTS (tail));
  for (gsize i = 0; i < G_N_ELEMENTS (tail); i++)
    ck_assert_str_eq (bounded->pdata[bounded->len - G_N_ELEMENTS (tail) + i], tail[i]);
}
END_TEST

/* Spec B.2: options.env after the limits, in its order, before the valueless token, which so
 * stays the last --env; every value redacted in a failure message (spec B.5). */
START_TEST (test_sandbox_env_before_token)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  g_autofree char *redacted = NULL;
  static const char *const tail[] = { "--cpus", "1.5", "--env", "ZED=last", "--env", "A=x=y",
                                      "--env", "EMPTY=", "--env", "NAMZU_SANDBOX_TOKEN",
                                      "namzu-worker:latest" };

  ck_assert_msg (nz_create_options_load_config (
                     opts, "{\"env\":{\"ZED\":\"first\",\"A\":\"x=y\",\"EMPTY\":\"\"}}", -1,
                     &error),
                 "%s", error ? error->message : "");
  /* A later value keeps the name's place. */
  ck_assert (nz_sandbox_env_add_arg (opts->env, "ZED=last", NULL));
  opts->cpus = 1.5;
  argv = build (opts, "bridge", NULL, TRUE, NULL, NULL);
  ck_assert_uint_ge (argv->len, G_N_ELEMENTS (tail));
  for (gsize i = 0; i < G_N_ELEMENTS (tail); i++)
    ck_assert_str_eq (argv->pdata[argv->len - G_N_ELEMENTS (tail) + i], tail[i]);
  redacted = nz_docker_redact_argv ((const char *const *)argv->pdata, argv->len);
  ck_assert_ptr_null (strstr (redacted, "last"));
  ck_assert_ptr_null (strstr (redacted, "x=y"));
  ck_assert_ptr_nonnull (strstr (redacted, "--env ZED=<redacted>"));
}
END_TEST

/* --disk-mb: every scratch tmpfs gets size=, and /dev/shm --shm-size; without it, neither
 * (the reference baseline has no size=). */
START_TEST (test_disk_bound_sizes_every_tmpfs)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GPtrArray) plain = build (opts, "bridge", NULL, TRUE, NULL, NULL);
  g_autoptr (GPtrArray) bounded = NULL;
  guint tmpfs = 0, sized = 0, shm = 0;

  for (guint i = 0; i < plain->len; i++)
    ck_assert (strstr (plain->pdata[i], "size") == NULL);
  opts->disk_mb = 8;
  g_ptr_array_add (opts->writable_paths, g_strdup ("/var/cache"));
  bounded = build (opts, "bridge", NULL, TRUE, NULL, NULL);
  for (guint i = 0; i + 1 < bounded->len; i++)
    {
      if (strcmp (bounded->pdata[i], "--tmpfs") == 0)
        {
          tmpfs++;
          sized += g_str_has_suffix (bounded->pdata[i + 1], ",size=8m");
        }
      if (strcmp (bounded->pdata[i], "--shm-size") == 0)
        shm += strcmp (bounded->pdata[i + 1], "8m") == 0;
    }
  ck_assert_uint_eq (tmpfs, 5);
  ck_assert_uint_eq (sized, tmpfs);
  ck_assert_uint_eq (shm, 1);
}
END_TEST

START_TEST (test_never_a_privilege_grant)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GPtrArray) argv = NULL;
  int security_opts = 0;

  opts->read_only_rootfs = FALSE;
  opts->memory_mb = 1;
  argv = build (opts, "bridge", "runsc", TRUE, "0", NULL);
  for (guint i = 0; i < argv->len; i++)
    {
      const char *a = argv->pdata[i];

      ck_assert (strstr (a, "privileged") == NULL && strstr (a, "cap-add") == NULL
                 && strstr (a, "seccomp") == NULL && strstr (a, "--userns") == NULL
                 && strstr (a, "add-host") == NULL && strstr (a, "host-gateway") == NULL);
      security_opts += g_str_has_prefix (a, "--security-opt");
    }
  ck_assert_int_eq (security_opts, 1);
  /* readOnlyRootfs:false turns off only that control. */
  ck_assert_str_eq (argv->pdata[7], "--cap-drop=ALL");
  ck_assert_str_eq (argv->pdata[8], "--security-opt=no-new-privileges");
  ck_assert_str_eq (argv->pdata[9], "--ipc");
  ck_assert_str_eq (argv->pdata[10], "private");
  for (guint i = 0; i < argv->len; i++)
    ck_assert (strcmp (argv->pdata[i], "--read-only") != 0
               && strcmp (argv->pdata[i], "--tmpfs") != 0);
  ck_assert_str_eq (argv->pdata[argv->len - 1], "namzu-worker:latest");
}
END_TEST

static char *
writable_joined (NzCreateOptions *opts, GError **error)
{
  g_autoptr (GPtrArray) w = nz_docker_writable_paths (opts, error);

  if (w == NULL)
    return NULL;
  g_ptr_array_add (w, NULL);
  return g_strjoinv (" ", (char **)w->pdata);
}

START_TEST (test_writable_paths)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GError) error = NULL;
  g_autofree char *a = writable_joined (opts, NULL);
  g_autofree char *b = NULL, *c = NULL;
  static const char *const bad[] = { "workspace", "/", "/tmp/../etc", "", "/tmp/", "//tmp",
                                     "/tmp/." };

  ck_assert_str_eq (a, "/tmp /var/tmp /workspace /home/namzu");
  /* A requested path is added, a repeated default collapses. */
  g_ptr_array_add (opts->writable_paths, g_strdup ("/var/cache/app"));
  g_ptr_array_add (opts->writable_paths, g_strdup ("/tmp"));
  b = writable_joined (opts, NULL);
  ck_assert_str_eq (b, "/tmp /var/tmp /workspace /home/namzu /var/cache/app");
  /* A default the layout mounts (spelled another way) is skipped... */
  g_ptr_array_set_size (opts->writable_paths, 0);
  ck_assert (nz_create_options_set_mount (opts, "uploads", "/srv/up", NULL));
  g_free (((NzMount *)opts->mounts->pdata[1])->container_path);
  ((NzMount *)opts->mounts->pdata[1])->container_path = g_strdup ("//workspace/.");
  c = writable_joined (opts, NULL);
  ck_assert_str_eq (c, "/tmp /var/tmp /home/namzu");
  /* ...but a requested one it mounts is refused. */
  g_ptr_array_add (opts->writable_paths, g_strdup ("/workspace"));
  ck_assert_ptr_null (writable_joined (opts, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "which this layout already mounts"));
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_clear_error (&error);
      g_ptr_array_set_size (opts->writable_paths, 0);
      g_ptr_array_add (opts->writable_paths, g_strdup (bad[i]));
      ck_assert_msg (writable_joined (opts, &error) == NULL, "'%s' accepted", bad[i]);
      ck_assert_ptr_nonnull (strstr (error->message, "is not a normalised absolute path"));
    }
  /* Beside a writable root: refused; an empty list is fine. */
  g_clear_error (&error);
  g_ptr_array_set_size (opts->writable_paths, 0);
  g_ptr_array_add (opts->writable_paths, g_strdup ("/var/cache/app"));
  opts->read_only_rootfs = FALSE;
  ck_assert_ptr_null (writable_joined (opts, &error));
  g_ptr_array_set_size (opts->writable_paths, 0);
  {
    g_autofree char *none = writable_joined (opts, NULL);

    ck_assert_str_eq (none, "");
  }
}
END_TEST

START_TEST (test_cpus_and_labels)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  const double bad[] = { 0, -1, NAN, INFINITY };
  const struct
  {
    double v;
    const char *s;
  } ok[] = { { 1, "1" }, { 0.5, "0.5" }, { 1.5, "1.5" }, { 0.1, "0.1" }, { 2.25, "2.25" } };

  for (gsize i = 0; i < G_N_ELEMENTS (ok); i++)
    {
      g_autofree char *s = nz_docker_format_cpus (ok[i].v);

      ck_assert (nz_docker_check_cpus (ok[i].v, NULL));
      ck_assert_str_eq (s, ok[i].s);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_clear_error (&error);
      ck_assert (!nz_docker_check_cpus (bad[i], &error));
      ck_assert (g_str_has_prefix (error->message, "cpuLimit must be a finite number greater than "
                                                   "0 (docker's --cpus takes a decimal, e.g. 1.5); "
                                                   "got "));
    }
  g_clear_error (&error);
  opts->cpus = -1;
  ck_assert_ptr_null (build (opts, "bridge", NULL, TRUE, NULL, &error));
  g_clear_error (&error);
  opts->cpus = 0;
  g_ptr_array_add (nz_docker_options_ensure (opts)->labels, g_strdup ("a=b"));
  g_ptr_array_add (nz_docker_options_ensure (opts)->labels, g_strdup ("v"));
  argv = build (opts, "bridge", NULL, TRUE, NULL, &error);
  ck_assert_ptr_null (argv);
  ck_assert_str_eq (error->message, "docker label key \"a=b\" is invalid (empty or contains '=')");
}
END_TEST

START_TEST (test_redaction_every_spelling)
{
  const char *const argv[] = { "run", "--env", "A=1", "-e", "B=2", "--env=C=3", "-e=D=4", "-eE=5",
                               "--env", "NAMZU_SANDBOX_TOKEN", "--env-file", "/tmp/env",
                               "--entrypoint=/bin/sh", "-it", "K=V", "--env", "=x", "img", "-e" };
  g_autofree char *r = nz_docker_redact_argv (argv, G_N_ELEMENTS (argv));

  ck_assert_str_eq (r, "run --env A=<redacted> -e B=<redacted> --env=C=<redacted> "
                       "-e=D=<redacted> -eE=<redacted> --env NAMZU_SANDBOX_TOKEN --env-file "
                       "/tmp/env --entrypoint=/bin/sh -it K=V --env =x img -e");
  /* A value that looks like a token never survives, whatever it is. */
  {
    const char *const secret[] = { "run", "--env", "MY_APP_TOKEN=s3cr3t-value", "-eX=s3cr3t-value" };
    g_autofree char *s = nz_docker_redact_argv (secret, G_N_ELEMENTS (secret));

    ck_assert_ptr_null (strstr (s, "s3cr3t"));
    ck_assert_ptr_nonnull (strstr (s, "MY_APP_TOKEN=<redacted>"));
  }
}
END_TEST

START_TEST (test_network_matrix)
{
  g_autoptr (GError) error = NULL;

  ck_assert (nz_docker_network_is_internal ("true\n"));
  ck_assert (nz_docker_network_is_internal (" true"));
  ck_assert (!nz_docker_network_is_internal (""));
  ck_assert (!nz_docker_network_is_internal (NULL));
  ck_assert (!nz_docker_network_is_internal ("false"));
  ck_assert (!nz_docker_network_is_internal ("untrue"));
  ck_assert (!nz_docker_network_is_internal ("true-ish"));
  /* host-port: refused on none (the default) and on an internal network. */
  ck_assert (!nz_docker_check_network ("none", TRUE, NZ_NETWORK_ALLOW_ALL, FALSE, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "cannot publish the worker's port on network 'none'"));
  ck_assert_ptr_nonnull (strstr (error->message, "container-network"));
  g_clear_error (&error);
  ck_assert (!nz_docker_check_network ("sbx", TRUE, NZ_NETWORK_ALLOW_ALL, TRUE, &error));
  g_clear_error (&error);
  ck_assert (nz_docker_check_network ("bridge", TRUE, NZ_NETWORK_ALLOW_ALL, FALSE, NULL));
  /* deny-all needs the daemon to say internal, whatever the name says. */
  ck_assert (!nz_docker_check_network ("internal", FALSE, NZ_NETWORK_DENY_ALL, FALSE, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "docker network create --internal"));
  g_clear_error (&error);
  ck_assert (nz_docker_check_network ("sbx", FALSE, NZ_NETWORK_DENY_ALL, TRUE, NULL));
  /* deny-all over a published port is impossible from the two rules. */
  ck_assert (!nz_docker_check_network ("sbx", TRUE, NZ_NETWORK_DENY_ALL, TRUE, NULL));
  ck_assert (!nz_docker_check_network ("bridge", TRUE, NZ_NETWORK_DENY_ALL, FALSE, NULL));
  ck_assert (!nz_docker_check_network ("bridge", FALSE, NZ_NETWORK_ALLOWLIST, FALSE, NULL));
  ck_assert (nz_docker_check_network ("none", FALSE, NZ_NETWORK_ALLOW_ALL, FALSE, NULL));
}
END_TEST

START_TEST (test_token_shape)
{
  g_autofree char *a = nz_docker_mint_token (NULL);
  g_autofree char *b = nz_docker_mint_token (NULL);

  ck_assert (g_regex_match_simple ("^[A-Za-z0-9_-]{43}$", a, 0, 0));
  ck_assert (g_regex_match_simple ("^[A-Za-z0-9_-]{43}$", b, 0, 0));
  ck_assert_str_ne (a, b);
}
END_TEST

START_TEST (test_config_refusals)
{
  static const char *const bad[] = {
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"egressProxyImage\":\"\"}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"allowInwardFor\":[1]}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"brokeredCredentials\":{}}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"hostReachability\":\"x\"}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"cpuLimit\":0}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"readyTimeoutMs\":0}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"labels\":{\"k\":1}}}",
    "{\"backend\":{\"tier\":\"container\",\"image\":\"\"}}",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
      g_autoptr (GError) error = NULL;

      ck_assert_msg (!nz_create_options_load_config (opts, bad[i], -1, &error), "accepted %s",
                     bad[i]);
      ck_assert_ptr_nonnull (strstr (error->message, "backend."));
    }
  /* Only a host directory can be bound (spec B.4). */
  {
    g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
    g_autoptr (GError) error = NULL;

    ck_assert (!nz_create_options_load_config (
      opts, "{\"backend\":{\"tier\":\"container\",\"image\":\"i\"},\"layout\":{\"outputs\":"
            "{\"source\":{\"type\":\"azureFileShare\"}}}}", -1, &error));
    ck_assert_ptr_nonnull (strstr (error->message, "docker backend cannot consume mount source "
                                                   "type \"azureFileShare\" for outputs"));
  }
}
END_TEST


/* An allowlist sandbox: the four proxy spellings and both NO_PROXY spellings, after the mounts
 * and before the worker's own env (spec B.2). */
START_TEST (test_proxy_env_in_sandbox_argv)
{
  g_autoptr (NzCreateOptions) opts = base_opts ();
  NzDockerPlan plan = { opts, "namzu-sandbox-nz-0123456789ab", "sbx-internal", NULL, NULL,
                        FALSE, TRUE };
  g_autoptr (GPtrArray) argv = nz_docker_build_run_argv (&plan, NULL);
  static const char *const want[] = {
    "run", "--detach", "--rm", "--name", "namzu-sandbox-nz-0123456789ab", "--network",
    "sbx-internal", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--ipc", "private",
    "--read-only", TMPFS ("/tmp"), TMPFS ("/var/tmp"), TMPFS ("/workspace"),
    TMPFS ("/home/namzu"), PRIVSEP,
    "--volume", "/srv/task/out:/mnt/user-data/outputs:rw",
    "--env", "HTTP_PROXY=http://namzu-egress:2025", "--env", "http_proxy=http://namzu-egress:2025",
    "--env", "HTTPS_PROXY=http://namzu-egress:2025",
    "--env", "https_proxy=http://namzu-egress:2025",
    "--env", "NO_PROXY=localhost,127.0.0.1", "--env", "no_proxy=localhost,127.0.0.1",
    "--env", "NAMZU_SANDBOX_WORKSPACE=/mnt/user-data/outputs",
    "--env", "NAMZU_SANDBOX_READ_ROOTS=/mnt/user-data/outputs",
    "--env", "NAMZU_SANDBOX_WRITE_ROOTS=/mnt/user-data/outputs",
    "--env", "NAMZU_SANDBOX_TOKEN",
    "namzu-worker:latest",
  };

  assert_argv (argv, want, G_N_ELEMENTS (want));
}
END_TEST

/* Spec B.3 renderEgressProxyRunArgs, whole: the upstream leg first, the sandbox's baseline, a
 * read-only root with /tmp, the labels, the configuration variable named without its value,
 * the image last. */
START_TEST (test_proxy_argv_pinned)
{
  g_autoptr (GPtrArray) labels = g_ptr_array_new ();
  NzDockerProxyPlan plan = { "namzu-egress-nz-0123456789ab", "namzu-egress-proxy:latest",
                             "bridge", "sbx-internal", "NAMZU_EGRESS_PROXY_CONFIG_V2", labels };
  g_autoptr (GPtrArray) argv = NULL;
  g_autoptr (GPtrArray) attach = NULL;
  static const char *const want[] = {
    "run", "--detach", "--rm", "--name", "namzu-egress-nz-0123456789ab", "--hostname",
    "namzu-egress", "--network", "bridge", "--cap-drop=ALL", "--security-opt=no-new-privileges",
    "--ipc", "private", "--read-only", TMPFS ("/tmp"), "--label", "acme.task=t1",
    "--env", "NAMZU_EGRESS_PROXY_CONFIG_V2", "namzu-egress-proxy:latest",
  };
  static const char *const want_attach[] = {
    "network", "connect", "--alias", "namzu-egress", "sbx-internal",
    "namzu-egress-nz-0123456789ab",
  };

  g_ptr_array_add (labels, (gpointer) "acme.task");
  g_ptr_array_add (labels, (gpointer) "t1");
  argv = nz_docker_build_proxy_argv (&plan, NULL);
  assert_argv (argv, want, G_N_ELEMENTS (want));
  attach = nz_docker_build_proxy_attach_argv ("sbx-internal", "namzu-egress-nz-0123456789ab");
  assert_argv (attach, want_attach, G_N_ELEMENTS (want_attach));
}
END_TEST

START_TEST (test_isolate_argv)
{
  g_autoptr (GPtrArray) argv = nz_docker_build_isolate_argv ("namzu-nz-0123456789ab", "img:t");
  const char *want[] = {
    "run", "--rm", "--network=container:namzu-nz-0123456789ab", "--user", "0:0",
    "--cap-drop=ALL", "--cap-add=NET_ADMIN", "--security-opt=no-new-privileges", "--read-only",
    "--entrypoint", "namzu-egress", "img:t", "isolate",
  };

  assert_argv (argv, want, G_N_ELEMENTS (want));
}
END_TEST

START_TEST (test_proxy_argv_refusals)
{
  const char *upstreams[] = { "none", "sbx-internal" };

  for (gsize i = 0; i < G_N_ELEMENTS (upstreams); i++)
    {
      NzDockerProxyPlan plan = { "namzu-egress-x", "img", upstreams[i], "sbx-internal",
                                 "NAMZU_EGRESS_PROXY_CONFIG", NULL };
      g_autoptr (GError) error = NULL;

      ck_assert_ptr_null (nz_docker_build_proxy_argv (&plan, &error));
      ck_assert_ptr_nonnull (strstr (error->message, "gives the egress proxy no route out"));
    }
  {
    NzDockerProxyPlan plan = { "namzu-egress-x", NULL, "bridge", "sbx-internal",
                               "NAMZU_EGRESS_PROXY_CONFIG", NULL };
    g_autoptr (GError) error = NULL;

    ck_assert_ptr_null (nz_docker_build_proxy_argv (&plan, &error));
    ck_assert_ptr_nonnull (strstr (error->message, "without an image"));
  }
}
END_TEST

/* Spec H.4: "" (no label), "1" (V1 only), an image the daemon does not have (inspect failed)
 * and anything not an integer are refused; 2 and later versions pass. */
START_TEST (test_proxy_label)
{
  const char *bad[] = { "", "1", "<no value>", "2.5", "two", NULL };
  const char *good[] = { "2", " 2\n", "3" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;

      ck_assert_msg (!nz_docker_check_proxy_label ("img", bad[i], &error), "accepted '%s'",
                     bad[i] ? bad[i] : "(failed)");
      ck_assert_ptr_nonnull (strstr (error->message, "ai.namzu.egress-proxy.config"));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    ck_assert_msg (nz_docker_check_proxy_label ("img", good[i], NULL), "refused '%s'", good[i]);
}
END_TEST

/* The docker fields of the proxy reach the options. */
START_TEST (test_proxy_config_fields)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GError) error = NULL;

  ck_assert_msg (nz_create_options_load_config (
                   opts, "{\"backend\":{\"tier\":\"container\",\"image\":\"i\","
                         "\"egressProxyImage\":\"p:1\",\"egressProxyUpstreamNetwork\":\"up\","
                         "\"allowInwardFor\":[\"db.internal\"],\"brokeredCredentials\":"
                         "[{\"host\":\"a.example\",\"header\":\"X-K\",\"value\":\"s\"}]},"
                         "\"defaultEgress\":{\"kind\":\"static\",\"allowedHosts\":[\"a.example\"]}}",
                   -1, &error), "%s", error ? error->message : "");
  ck_assert_str_eq (nz_docker_options (opts)->proxy_image, "p:1");
  ck_assert_str_eq (nz_docker_options (opts)->upstream_network, "up");
  ck_assert_int_eq (nz_docker_options (opts)->allow_inward_for->len, 1);
  ck_assert_str_eq (nz_docker_options (opts)->allow_inward_for->pdata[0], "db.internal");
  ck_assert_ptr_nonnull (strstr (opts->egress_credentials, "\"X-K\""));
}
END_TEST

/* --agent-shares-uid is bwrap's alone: the worker always has a uid of its own. */
/* The layout seed's rule reads (the directory the host collects): docker's outputs bind from
 * the recorded mounts, else rootDir (the worker's root is the outputs path), else the spec
 * default; runsc the same; bwrap collects nothing. */
static NzHandle *
layout_handle (const char *backend, const char *mounts_outputs, const char *root_dir)
{
  NzHandle *h = nz_handle_new ();

  h->id = g_strdup ("nz-0123456789ab");
  h->backend = g_strdup (backend);
  if (mounts_outputs != NULL)
    {
      JsonArray *a = json_array_new ();
      JsonObject *s = json_object_new (), *o = json_object_new ();

      json_object_set_string_member (s, "label", "scratch");
      json_object_set_string_member (s, "containerPath", "/mnt/user-data/scratch");
      json_array_add_object_element (a, s);
      json_object_set_string_member (o, "label", "outputs");
      json_object_set_string_member (o, "containerPath", mounts_outputs);
      json_array_add_object_element (a, o);
      json_object_set_array_member (h->priv, "mounts", a);
    }
  if (root_dir != NULL)
    json_object_set_string_member (h->priv, "rootDir", root_dir);
  return h;
}

START_TEST (test_layout)
{
  static const struct
  {
    const char *backend, *mounts_outputs, *root_dir, *collected;
  } cases[] = {
    { "container:docker", "/data/out/", "/ignored", "/data/out/" },
    { "container:docker", NULL, "/data/out", "/data/out" },
    { "container:docker", NULL, NULL, "/mnt/user-data/outputs" },
    { "container:runsc", "/mnt/user-data/outputs", NULL, "/mnt/user-data/outputs" },
    { "container:runsc", NULL, NULL, "/mnt/user-data/outputs" },
    { "container:bwrap", "/mnt/user-data/outputs", NULL, NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (NzHandle) h
          = layout_handle (cases[i].backend, cases[i].mounts_outputs, cases[i].root_dir);
      g_auto (NzLayout) layout = { 0 };

      nz_backend_layout (h, &layout);
      ck_assert_msg (g_strcmp0 (layout.collected_dir, cases[i].collected) == 0, "%zu: %s", i,
                     layout.collected_dir);
      if (cases[i].collected != NULL)
        ck_assert_str_eq (layout.collected_name, "docker outputs bind");
    }
}
END_TEST

START_TEST (test_agent_shares_uid_refused)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GError) error = NULL;

  opts->image = g_strdup ("namzu-worker:latest");
  opts->agent_shares_uid = TRUE;
  ck_assert (!nz_docker_check (opts, &error));
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_UNSUPPORTED));
  ck_assert_msg (g_str_has_prefix (error->message, "--agent-shares-uid: only container:bwrap"),
                 "%s", error->message);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("docker-argv");
  TCase *tc = tcase_create ("argv");

  tcase_add_test (tc, test_default_argv_pinned);
  tcase_add_test (tc, test_layout);
  tcase_add_test (tc, test_full_argv_pinned);
  tcase_add_test (tc, test_bounds_only_when_asked);
  tcase_add_test (tc, test_sandbox_env_before_token);
  tcase_add_test (tc, test_disk_bound_sizes_every_tmpfs);
  tcase_add_test (tc, test_never_a_privilege_grant);
  tcase_add_test (tc, test_writable_paths);
  tcase_add_test (tc, test_cpus_and_labels);
  tcase_add_test (tc, test_redaction_every_spelling);
  tcase_add_test (tc, test_network_matrix);
  tcase_add_test (tc, test_token_shape);
  tcase_add_test (tc, test_config_refusals);
  tcase_add_test (tc, test_proxy_env_in_sandbox_argv);
  tcase_add_test (tc, test_proxy_argv_pinned);
  tcase_add_test (tc, test_isolate_argv);
  tcase_add_test (tc, test_proxy_argv_refusals);
  tcase_add_test (tc, test_proxy_label);
  tcase_add_test (tc, test_proxy_config_fields);
  tcase_add_test (tc, test_agent_shares_uid_refused);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return nz_test_run (suite ());
}
