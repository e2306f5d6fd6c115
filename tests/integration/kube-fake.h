/* kube-fake.h: what the C tests against tests/fakes/fake-kube-apiserver.py (a FAKE Kubernetes
 * API server: no cluster runs here) share: a test PKI made with GnuTLS's certtool, and starting
 * the fake on 127.0.0.1 with a certificate of it (the port read from its listening line). */
#pragma once

#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "nz-kube-client.h"
#include "../nz-test.h"

static inline gboolean
kube_fake_certtool (const char *args)
{
  g_autofree char *cmd = g_strdup_printf ("certtool %s", args);
  g_autofree char *err = NULL;
  int status = 0;

  if (!g_spawn_command_line_sync (cmd, NULL, &err, &status, NULL) || status != 0)
    {
      g_printerr ("certtool failed: %s\n%s\n", cmd, err != NULL ? err : "");
      return FALSE;
    }
  return TRUE;
}

/* @dir/<name>.key and @dir/<name>.pem from the certtool template @tmpl, signed by @dir/<ca>
 * (self-signed when @ca is NULL). */
static inline gboolean
kube_fake_make_cert (const char *dir, const char *name, const char *ca, const char *tmpl)
{
  g_autofree char *key = g_strdup_printf ("%s/%s.key", dir, name);
  g_autofree char *pem = g_strdup_printf ("%s/%s.pem", dir, name);
  g_autofree char *cfg = g_strdup_printf ("%s/%s.cfg", dir, name);
  g_autofree char *a1 = g_strdup_printf ("--generate-privkey --key-type=ecdsa --outfile %s", key);
  g_autofree char *a2 = NULL;

  if (!g_file_set_contents (cfg, tmpl, -1, NULL) || !kube_fake_certtool (a1))
    return FALSE;
  if (ca == NULL)
    a2 = g_strdup_printf ("--generate-self-signed --load-privkey %s --template %s --outfile %s",
                          key, cfg, pem);
  else
    a2 = g_strdup_printf ("--generate-certificate --load-privkey %s --load-ca-certificate "
                          "%s/%s.pem --load-ca-privkey %s/%s.key --template %s --outfile %s",
                          key, dir, ca, dir, ca, cfg, pem);
  return kube_fake_certtool (a2);
}

/* Starts the fake with @dir/<cert>.pem and its key, plus @extra (NULL-terminated; may be
 * NULL); returns its port. */
static inline guint16
kube_fake_start (const char *dir, const char *cert, const char *const *extra, GPid *pid)
{
  g_autofree char *script = g_build_filename (g_getenv ("NZ_SOURCE_DIR"), "tests", "fakes",
                                              "fake-kube-apiserver.py", NULL);
  g_autofree char *pem = g_strdup_printf ("%s/%s.pem", dir, cert);
  g_autofree char *key = g_strdup_printf ("%s/%s.key", dir, cert);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  char line[256] = "";
  int out_fd = -1;
  FILE *f;
  guint p = 0;

  g_ptr_array_add (argv, "python3");
  g_ptr_array_add (argv, script);
  g_ptr_array_add (argv, "--cert");
  g_ptr_array_add (argv, pem);
  g_ptr_array_add (argv, "--key");
  g_ptr_array_add (argv, key);
  for (gsize i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)extra[i]);
  g_ptr_array_add (argv, NULL);
  NZ_TEST_REQUIRE (g_spawn_async_with_pipes (NULL, (char **)argv->pdata, NULL, G_SPAWN_SEARCH_PATH,
                                             NULL, NULL, pid, NULL, &out_fd, NULL, &error),
                   "spawn the fake: %s", error ? error->message : "");
  f = fdopen (out_fd, "r");
  NZ_TEST_REQUIRE (f != NULL && fgets (line, sizeof line, f) != NULL, "the fake said nothing");
  NZ_TEST_REQUIRE (sscanf (line, "fake-kube-apiserver listening on 127.0.0.1:%u", &p) == 1,
                   "unexpected line from the fake: %s", line);
  fclose (f);
  return (guint16)p;
}

/* The usual setup of a test against the fake: a new temporary directory (*@dir, from
 * @dir_template), a self-signed server certificate for 127.0.0.1 in it that is the cluster CA
 * (*@ca_pem), and the fake started with it and @extra. Returns the fake's port. */
static inline guint16
kube_fake_start_self_signed (const char *dir_template, const char *const *extra, char **dir,
                             char **ca_pem, GPid *pid)
{
  g_autofree char *cert = NULL;

  *dir = g_dir_make_tmp (dir_template, NULL);
  NZ_TEST_REQUIRE (*dir != NULL
                       && kube_fake_make_cert (*dir, "server", NULL,
                                               "cn = fake kube-apiserver\nip_address = 127.0.0.1\n"
                                               "ca\ncert_signing_key\ntls_www_server\n"
                                               "expiration_days = 2\n"),
                   "certtool could not make a certificate");
  cert = g_build_filename (*dir, "server.pem", NULL);
  NZ_TEST_REQUIRE (g_file_get_contents (cert, ca_pem, NULL, NULL), "read the certificate");
  return kube_fake_start (*dir, "server", extra, pid);
}

/* Stops the fake of kube_fake_start_self_signed and removes its files and @dir (freed).
 * FALSE when anything else was left there. */
static inline gboolean
kube_fake_stop_self_signed (GPid pid, char *dir)
{
  const char *files[] = { "server.pem", "server.key", "server.cfg" };
  gboolean ok;

  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i], NULL);

      g_unlink (path);
    }
  ok = g_rmdir (dir) == 0;
  g_free (dir);
  return ok;
}

/* Inside a test: a client of the fake at @port, trusting @ca_pem, sending bearer @token. */
static inline NzKubeClient *
kube_fake_client (guint16 port, const char *ca_pem, const char *token)
{
  g_autofree char *url = g_strdup_printf ("https://127.0.0.1:%u", port);
  g_autoptr (GError) error = NULL;
  NzKubeClient *c
      = nz_kube_client_new (nz_kube_access_new_explicit (url, ca_pem, token, NULL), 0, &error);

  ck_assert_msg (c != NULL, "%s", error ? error->message : "");
  return c;
}
