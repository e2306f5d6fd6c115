/* kube-fake.h: what the C tests against tests/fakes/fake-kube-apiserver.py (a FAKE Kubernetes
 * API server: no cluster runs here) share: a test PKI made with GnuTLS's certtool, and starting
 * the fake on 127.0.0.1 with a certificate of it (the port read from its listening line). */
#pragma once

#include <glib.h>
#include <stdio.h>

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
