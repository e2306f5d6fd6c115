/* Unit tests for lib/backend's state directory, handles, handle resolution, the provider
 * config validator and the backend table. */
#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "nz-backend.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-state.h"
#include "../nz-test.h"

static char *tmp;

static void
setup (void)
{
  tmp = g_dir_make_tmp ("nz-state-XXXXXX", NULL);
  ck_assert (tmp != NULL);
  g_unsetenv ("XDG_RUNTIME_DIR");
  g_unsetenv ("NAMZU_SANDBOX");
  {
    g_autofree char *state = g_build_filename (tmp, "state", NULL);

    g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  }
}

static void
teardown (void)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmp);

  ck_assert_int_eq (system (cmd), 0);
  g_free (tmp);
}

static NzHandle *
make_handle (const char *id, gint64 created)
{
  g_autoptr (NzHandle) h = nz_handle_new ();
  g_autoptr (GError) error = NULL;

  h->id = g_strdup (id);
  h->backend = g_strdup ("container:bwrap");
  h->tier = g_strdup ("container");
  h->created_at_ms = created;
  h->endpoint = g_strdup ("unix:/nowhere/agent.sock");
  h->token = g_strdup ("secret-token-value");
  json_object_set_int_member (h->priv, "bwrapPid", 0);
  ck_assert_msg (nz_handle_make_dir (h, &error), "%s", error ? error->message : "");
  ck_assert_msg (nz_handle_save (h, &error), "%s", error ? error->message : "");
  return g_steal_pointer (&h);
}

START_TEST (test_state_dir_resolution)
{
  g_autofree char *d1 = NULL, *d2 = NULL;
  g_autoptr (GError) error = NULL;

  g_setenv ("NAMZU_STATE_DIR", "/x/y", TRUE);
  d1 = nz_state_dir (NULL);
  ck_assert_str_eq (d1, "/x/y");
  g_unsetenv ("NAMZU_STATE_DIR");
  g_setenv ("XDG_RUNTIME_DIR", "/run/user/7", TRUE);
  d2 = nz_state_dir (NULL);
  ck_assert_str_eq (d2, "/run/user/7/namzu");
  g_setenv ("NAMZU_STATE_DIR", "relative/dir", TRUE);
  ck_assert (nz_state_dir (&error) == NULL);
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
  ck_assert (strstr (error->message, "NAMZU_STATE_DIR") != NULL);
}
END_TEST

START_TEST (test_state_dir_permissions)
{
  g_autoptr (NzHandle) h = make_handle ("nz-00000000abcd", 1);
  g_autofree char *file = g_build_filename (h->dir, NZ_HANDLE_FILE, NULL);
  g_autofree char *state = nz_state_dir (NULL);
  g_autofree char *blocker = g_build_filename (tmp, "file", NULL);
  g_autofree char *under_file = g_build_filename (blocker, "state", NULL);
  g_autoptr (GError) error = NULL;
  struct stat st;

  ck_assert_int_eq (stat (state, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0700);
  ck_assert_int_eq (stat (h->dir, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0700);
  ck_assert_int_eq (stat (file, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0600);

  /* A loosened state dir is made private again. */
  ck_assert_int_eq (chmod (state, 0755), 0);
  g_free (nz_state_dir_ensure (NULL));
  ck_assert_int_eq (stat (state, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0700);

  /* A state dir that cannot be created is a named error. */
  ck_assert (g_file_set_contents (blocker, "", 0, NULL));
  g_setenv ("NAMZU_STATE_DIR", under_file, TRUE);
  ck_assert (nz_state_dir_ensure (&error) == NULL);
  ck_assert (strstr (error->message, under_file) != NULL);
}
END_TEST

START_TEST (test_ids)
{
  for (int i = 0; i < 100; i++)
    {
      g_autofree char *id = nz_state_new_id ();

      ck_assert_msg (nz_state_id_is_valid (id), "%s", id);
    }
  ck_assert (!nz_state_id_is_valid (NULL));
  ck_assert (!nz_state_id_is_valid ("nz-00000000ABCD"));
  ck_assert (!nz_state_id_is_valid ("nz-0000000abcd"));
  ck_assert (!nz_state_id_is_valid ("../../etc/pass"));
  ck_assert (!nz_state_id_is_valid ("xx-00000000abcd"));
}
END_TEST

/* A long stream's heartbeat: --heartbeat, else $NAMZU_STREAM_HEARTBEAT_MS, else the
 * sandbox's own (backend.streamHeartbeatMs in the private handle; 0 is none), else the
 * built-in default the caller parsed. */
START_TEST (test_stream_heartbeat_default)
{
  g_autoptr (NzHandle) plain = nz_handle_new ();
  g_autoptr (NzHandle) kube = nz_handle_new ();
  g_autoptr (NzHandle) off = nz_handle_new ();

  json_object_set_int_member (kube->priv, "streamHeartbeatMs", 2500);
  json_object_set_int_member (off->priv, "streamHeartbeatMs", 0);
  g_unsetenv ("NAMZU_STREAM_HEARTBEAT_MS");
  ck_assert_int_eq (nz_handle_stream_heartbeat_ms (plain), -1);
  ck_assert_int_eq (nz_backend_stream_heartbeat_ms (plain, NULL, 15000), 15000);
  ck_assert_int_eq (nz_backend_stream_heartbeat_ms (NULL, NULL, 15000), 15000);
  ck_assert_int_eq (nz_backend_stream_heartbeat_ms (kube, NULL, 15000), 2500);
  ck_assert_int_eq (nz_backend_stream_heartbeat_ms (off, NULL, 15000), 0);
  ck_assert_int_eq (nz_backend_stream_heartbeat_ms (kube, "7s", 7000), 7000);
  g_setenv ("NAMZU_STREAM_HEARTBEAT_MS", "900", TRUE);
  ck_assert_int_eq (nz_backend_stream_heartbeat_ms (kube, NULL, 900), 900);
  g_unsetenv ("NAMZU_STREAM_HEARTBEAT_MS");
  json_object_set_string_member (kube->priv, "streamHeartbeatMs", "x");
  ck_assert_int_eq (nz_handle_stream_heartbeat_ms (kube), -1);
}
END_TEST

START_TEST (test_handle_roundtrip_and_list)
{
  g_autoptr (NzHandle) a = make_handle ("nz-0000000000b2", 20);
  g_autoptr (NzHandle) b = make_handle ("nz-0000000000a1", 10);
  g_autoptr (NzHandle) loaded = NULL;
  g_autoptr (GPtrArray) list = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *state = nz_state_dir (NULL);
  g_autofree char *junk = g_build_filename (state, "nz-00000000ffff", NULL);
  g_autoptr (GPtrArray) unreadable = g_ptr_array_new_with_free_func (g_free);

  loaded = nz_handle_load ("nz-0000000000b2", &error);
  ck_assert_msg (loaded != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (loaded->token, "secret-token-value");
  ck_assert_str_eq (loaded->endpoint, "unix:/nowhere/agent.sock");
  ck_assert_int_eq (loaded->created_at_ms, 20);
  ck_assert_str_eq (loaded->dir, a->dir);
  ck_assert (json_object_has_member (loaded->priv, "bwrapPid"));

  /* A directory without a handle (yet, or any more) is not listed, and not reported. */
  ck_assert_int_eq (g_mkdir (junk, 0700), 0);
  list = nz_state_list (unreadable, &error);
  ck_assert (list != NULL);
  ck_assert_uint_eq (list->len, 2);
  ck_assert_uint_eq (unreadable->len, 0);
  ck_assert_str_eq (((NzHandle *)list->pdata[0])->id, "nz-0000000000a1");
  ck_assert_str_eq (((NzHandle *)list->pdata[1])->id, "nz-0000000000b2");

  /* A corrupt handle, one that is a directory, and one naming another sandbox are left out
   * of the list but reported by id, and the good ones are still listed. */
  {
    g_autofree char *corrupt = g_build_filename (junk, NZ_HANDLE_FILE, NULL);
    g_autofree char *other = g_build_filename (state, "nz-00000000eeee", NULL);
    g_autofree char *other_h = g_build_filename (other, NZ_HANDLE_FILE, NULL);
    g_autofree char *dirh = g_build_filename (state, "nz-00000000dddd", NZ_HANDLE_FILE, NULL);
    g_autofree char *a_path = g_build_filename (a->dir, NZ_HANDLE_FILE, NULL);
    g_autofree char *moved = NULL;

    ck_assert (
        g_file_set_contents (corrupt, "{\"id\":\"nz-00000000ffff\",\"cpus\":1e+17.0}", -1, NULL));
    ck_assert_int_eq (g_mkdir_with_parents (dirh, 0700), 0);
    ck_assert_int_eq (g_mkdir (other, 0700), 0);
    ck_assert (g_file_get_contents (a_path, &moved, NULL, NULL));
    ck_assert (g_file_set_contents (other_h, moved, -1, NULL));
    g_clear_pointer (&list, g_ptr_array_unref);
    list = nz_state_list (unreadable, &error);
    ck_assert (list != NULL);
    ck_assert_uint_eq (list->len, 2);
    ck_assert_uint_eq (unreadable->len, 3);
    for (guint i = 0; i < unreadable->len; i++)
      {
        const char *m = unreadable->pdata[i];

        ck_assert_msg (strstr (m, "sandbox 'nz-00000000ffff'") != NULL
                           || strstr (m, "sandbox 'nz-00000000dddd'") != NULL
                           || strstr (m, "sandbox 'nz-00000000eeee'") != NULL,
                       "%s", m);
        ck_assert_msg (strstr (m, state) != NULL, "%s does not name its path", m);
      }
  }

  ck_assert (nz_handle_remove_dir (b, NULL));
  ck_assert (!g_file_test (b->dir, G_FILE_TEST_EXISTS));
}
END_TEST

/* The handle is always valid JSON: the largest limits the options accept round-trip through
 * save and load, and a value json-glib cannot write (1e17 prints as "1e+17.0") fails the save
 * instead of leaving a handle nothing can read. */
START_TEST (test_handle_extreme_limits_roundtrip)
{
  g_autoptr (NzHandle) h = make_handle ("nz-0000000000c3", G_MAXINT64 / 2);
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (NzHandle) loaded = NULL;
  g_autoptr (GError) error = NULL;
  JsonObject *limits;

  opts->memory_mb = NZ_LIMIT_MB_MAX;
  opts->disk_mb = NZ_LIMIT_MB_MAX;
  opts->max_processes = G_MAXINT32;
  opts->cpus = (double)g_get_num_processors ();
  ck_assert_msg (nz_create_options_validate (opts, &error), "%s", error ? error->message : "");
  json_object_set_object_member (h->priv, "limits", nz_create_options_limits (opts));
  ck_assert_msg (nz_handle_save (h, &error), "%s", error ? error->message : "");
  loaded = nz_handle_load (h->id, &error);
  ck_assert_msg (loaded != NULL, "%s", error ? error->message : "");
  limits = nz_json_get_object (loaded->priv, "limits");
  ck_assert (limits != NULL);
  ck_assert_int_eq (json_object_get_int_member (limits, "memoryMb"), NZ_LIMIT_MB_MAX);
  ck_assert_int_eq (json_object_get_int_member (limits, "diskMb"), NZ_LIMIT_MB_MAX);
  ck_assert_int_eq (json_object_get_int_member (limits, "maxProcesses"), G_MAXINT32);
  ck_assert (json_object_get_double_member (limits, "cpus") == opts->cpus);

  /* Out of range is refused before any handle exists... */
  opts->cpus = 1e17;
  ck_assert (!nz_create_options_validate (opts, NULL));
  /* ...and a handle that would not parse back is not written over the good one. */
  json_object_set_double_member (json_object_get_object_member (h->priv, "limits"), "cpus", 1e17);
  ck_assert (!nz_handle_save (h, &error));
  g_clear_pointer (&loaded, nz_handle_free);
  loaded = nz_handle_load (h->id, &error);
  ck_assert_msg (loaded != NULL, "%s", error ? error->message : "");
}
END_TEST

/* What a hostile workload can leave in a directory it could write: a tree deeper than the
 * open-file limit, files at every level, directories with mode 000. Built with relative
 * chdir()s (the path is far past PATH_MAX); Check forks the case, so the cwd is its own. */
static void
build_deep_tree (const char *top, guint depth)
{
  g_autofree char *here = g_get_current_dir ();

  ck_assert_int_eq (chdir (top), 0);
  for (guint i = 0; i < depth; i++)
    {
      int fd;

      ck_assert_int_eq (mkdir ("d", 0700), 0);
      fd = open ("f", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      ck_assert (fd >= 0);
      close (fd);
      ck_assert_int_eq (symlink ("/", "link"), 0);
      ck_assert_int_eq (chdir ("d"), 0);
    }
  for (guint i = depth; i > 0; i--)
    {
      ck_assert_int_eq (chdir (".."), 0);
      if (i % 7 == 0)
        ck_assert_int_eq (chmod ("d", 0), 0);
    }
  ck_assert_int_eq (chdir (here), 0);
}

START_TEST (test_remove_dir_deep_tree)
{
  g_autoptr (NzHandle) h = make_handle ("nz-0000000000d1", 1);
  g_autofree char *sock = g_build_filename (h->dir, "sock", NULL);
  g_autofree char *outside = g_build_filename (tmp, "outside", NULL);
  g_autoptr (GError) error = NULL;
  struct rlimit rl = { 64, 64 };

  ck_assert_int_eq (g_mkdir (sock, 0700), 0);
  ck_assert (g_file_set_contents (outside, "keep", -1, NULL));
  build_deep_tree (sock, 5000);
  ck_assert_int_eq (chmod (sock, 0), 0);
  /* Far fewer fds than levels: a walk that holds one per level runs out. */
  ck_assert_int_eq (setrlimit (RLIMIT_NOFILE, &rl), 0);
  ck_assert_msg (nz_handle_remove_dir (h, &error), "%s", error ? error->message : "");
  ck_assert (!g_file_test (h->dir, G_FILE_TEST_EXISTS));
  /* The symlinks to / were removed, not followed. */
  ck_assert (g_file_test (outside, G_FILE_TEST_IS_REGULAR));
}
END_TEST

/* A removal that fails keeps the handle, so the sandbox can still be found and the destroy
 * retried; once the obstacle (here an immutable file) is gone, the retry removes it all. */
START_TEST (test_remove_dir_keeps_handle_until_gone)
{
  g_autoptr (NzHandle) h = make_handle ("nz-0000000000d2", 1);
  g_autoptr (NzHandle) again = NULL;
  g_autofree char *sub = g_build_filename (h->dir, "sock", "a", NULL);
  g_autofree char *stuck = g_build_filename (sub, "stuck", NULL);
  g_autoptr (GError) error = NULL;
  int flags = FS_IMMUTABLE_FL;
  int fd;

  ck_assert_int_eq (g_mkdir_with_parents (sub, 0700), 0);
  ck_assert (g_file_set_contents (stuck, "x", 1, NULL));
  fd = open (stuck, O_RDONLY | O_CLOEXEC);
  ck_assert (fd >= 0);
  if (ioctl (fd, FS_IOC_SETFLAGS, &flags) != 0)
    {
      /* The one way found to make a removal fail as root; it needs CAP_LINUX_IMMUTABLE. */
      close (fd);
      ck_assert_msg (!nz_test_under_ci (), "cannot set the immutable flag: %s", g_strerror (errno));
      return;
    }
  ck_assert (!nz_handle_remove_dir (h, &error));
  ck_assert_msg (strstr (error->message, "stuck") != NULL, "%s", error->message);
  g_clear_error (&error);
  again = nz_handle_load (h->id, &error);
  flags = 0;
  ck_assert_int_eq (ioctl (fd, FS_IOC_SETFLAGS, &flags), 0);
  close (fd);
  ck_assert_msg (again != NULL, "the handle went with the failed removal: %s",
                 error ? error->message : "");
  ck_assert (nz_handle_remove_dir (again, NULL));
  ck_assert (!g_file_test (h->dir, G_FILE_TEST_EXISTS));
}
END_TEST

/* A filesystem mounted inside the tree is not the sandbox's to empty: the removal stops there
 * (keeping the handle) and leaves what is in it. */
START_TEST (test_remove_dir_stops_at_a_mount)
{
  g_autoptr (NzHandle) h = make_handle ("nz-0000000000d3", 1);
  g_autofree char *mnt = g_build_filename (h->dir, "sock", "m", NULL);
  g_autofree char *inside = g_build_filename (mnt, "theirs", NULL);
  g_autoptr (GError) error = NULL;
  gboolean removed, kept;

  ck_assert_int_eq (g_mkdir_with_parents (mnt, 0700), 0);
  if (mount ("nz-test", mnt, "tmpfs", 0, "size=1m") != 0)
    {
      ck_assert_msg (!nz_test_under_ci (), "cannot mount a tmpfs: %s", g_strerror (errno));
      return;
    }
  ck_assert (g_file_set_contents (inside, "x", 1, NULL));
  removed = nz_handle_remove_dir (h, &error);
  kept = g_file_test (inside, G_FILE_TEST_EXISTS);
  ck_assert_int_eq (umount (mnt), 0);
  ck_assert (!removed);
  ck_assert_msg (strstr (error->message, "mount point") != NULL
                     || strstr (error->message, g_strerror (EBUSY)) != NULL,
                 "%s", error->message);
  ck_assert_msg (kept, "the walk emptied a mounted filesystem");
  g_clear_error (&error);
  ck_assert_msg (nz_handle_remove_dir (h, &error), "%s", error ? error->message : "");
}
END_TEST

static NzHandle *
resolve_with_stdin (const char *arg, const char *stdin_text, GError **error)
{
  int fds[2];
  NzHandle *h;

  ck_assert_int_eq (pipe (fds), 0);
  if (stdin_text != NULL)
    ck_assert_int_eq (write (fds[1], stdin_text, strlen (stdin_text)),
                      (ssize_t)strlen (stdin_text));
  close (fds[1]);
  h = nz_handle_resolve_fd (arg, fds[0], error);
  close (fds[0]);
  return h;
}

START_TEST (test_resolve_order)
{
  g_autoptr (NzHandle) a = make_handle ("nz-00000000000a", 1);
  g_autoptr (NzHandle) b = make_handle ("nz-00000000000b", 2);
  g_autoptr (NzHandle) c = make_handle ("nz-00000000000c", 3);
  g_autoptr (NzHandle) r1 = NULL, r2 = NULL, r3 = NULL;
  const char *handle_b = "{\"id\":\"nz-00000000000b\",\"backend\":\"container:bwrap\"}\n";

  /* stdin only when nothing else names a sandbox */
  r1 = resolve_with_stdin (NULL, handle_b, NULL);
  ck_assert (r1 != NULL);
  ck_assert_str_eq (r1->id, "nz-00000000000b");
  g_setenv ("NAMZU_SANDBOX", "nz-00000000000c", TRUE);
  r2 = resolve_with_stdin (NULL, handle_b, NULL);
  ck_assert_str_eq (r2->id, "nz-00000000000c");
  r3 = resolve_with_stdin ("nz-00000000000a", handle_b, NULL);
  ck_assert_str_eq (r3->id, "nz-00000000000a");
}
END_TEST

/* namzu-create's line is enough: a stdin that stays open must not hang the tool. */
START_TEST (test_resolve_stdin_left_open)
{
  g_autoptr (NzHandle) a = make_handle ("nz-00000000000e", 1);
  g_autoptr (NzHandle) r = NULL;
  const char *line = "{\"id\":\"nz-00000000000e\"}\n";
  int fds[2];

  ck_assert_int_eq (pipe (fds), 0);
  ck_assert_int_eq (write (fds[1], line, strlen (line)), (ssize_t)strlen (line));
  r = nz_handle_resolve_fd (NULL, fds[0], NULL);
  ck_assert (r != NULL);
  ck_assert_str_eq (r->id, "nz-00000000000e");
  close (fds[0]);
  close (fds[1]);
}
END_TEST

START_TEST (test_resolve_errors)
{
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL, e5 = NULL, e6 = NULL;
  g_autofree char *state = nz_state_dir (NULL);

  ck_assert (resolve_with_stdin (NULL, NULL, &e1) == NULL);
  ck_assert (g_error_matches (e1, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
  ck_assert (strstr (e1->message, "no sandbox given") != NULL);
  ck_assert (strstr (e1->message, "NAMZU_SANDBOX") != NULL);

  ck_assert (resolve_with_stdin (NULL, "{\"id\":", &e2) == NULL);
  ck_assert (g_error_matches (e2, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
  ck_assert (strstr (e2->message, "stdin") != NULL);

  ck_assert (resolve_with_stdin (NULL, "{\"backend\":\"x\"}", &e3) == NULL);
  ck_assert (g_error_matches (e3, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
  ck_assert (strstr (e3->message, "\"id\"") != NULL);

  ck_assert (resolve_with_stdin ("nz-0123456789ab", NULL, &e4) == NULL);
  ck_assert (g_error_matches (e4, NZ_ERROR, NZ_ERROR_NOT_FOUND));
  ck_assert (strstr (e4->message, state) != NULL);
  ck_assert (strstr (e4->message, "namzu-ls") != NULL);

  ck_assert (resolve_with_stdin ("../../etc", NULL, &e5) == NULL);
  ck_assert (g_error_matches (e5, NZ_ERROR, NZ_ERROR_INVALID_ARGS));

  /* A failed namzu-create upstream: its message is passed on. */
  ck_assert (resolve_with_stdin (NULL, "{\"error\":{\"code\":\"x\",\"message\":\"boom\"}}", &e6)
             == NULL);
  ck_assert (strstr (e6->message, "boom") != NULL);
}
END_TEST

START_TEST (test_public_handle_has_no_token)
{
  g_autoptr (NzHandle) h = make_handle ("nz-00000000000d", 5);
  g_autoptr (JsonObject) pub = nz_backend_public_handle (h);
  g_autofree char *text = nz_json_object_to_string (pub, NULL);

  ck_assert_str_eq (nz_json_get_string (pub, "id"), "nz-00000000000d");
  ck_assert_str_eq (nz_json_get_string (pub, "backend"), "container:bwrap");
  ck_assert_str_eq (nz_json_get_string (pub, "tier"), "container");
  ck_assert (json_object_has_member (pub, "createdAt"));
  ck_assert (json_object_has_member (pub, "capabilities"));
  ck_assert (strstr (text, "secret-token-value") == NULL);
  ck_assert (strstr (text, "token") == NULL);
}
END_TEST

/* One way for a tool to reach a sandbox: the handle's backend's transport (a bearer token
 * here), or --endpoint with $NAMZU_TOKEN; a TLS client credential is a type the client
 * refuses rather than dialling without it. */
START_TEST (test_sandbox_open_transport)
{
  g_autoptr (NzHandle) h = make_handle ("nz-00000000000e", 6);
  g_autoptr (NzHandle) loaded = NULL;
  g_autoptr (NzTransport) t = nz_sandbox_open (NULL, "nz-00000000000e", FALSE, &loaded, NULL);
  g_autoptr (NzTransport) direct = NULL, bare = NULL, tls = NULL;
  g_autoptr (NzAgentClient) c = NULL;
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  NzHandle *none = (NzHandle *)0x1;

  ck_assert (t != NULL && loaded != NULL);
  ck_assert_str_eq (loaded->id, "nz-00000000000e");
  ck_assert_str_eq (t->endpoint, "unix:/nowhere/agent.sock");
  ck_assert_int_eq (t->credential.kind, NZ_CREDENTIAL_BEARER);
  ck_assert_str_eq (t->credential.token, "secret-token-value");
  ck_assert_str_eq (nz_credential_kind_name (t->credential.kind), "bearer");

  g_setenv ("NAMZU_TOKEN", "direct-tok", TRUE);
  direct = nz_sandbox_open ("tcp:127.0.0.1:9", "nz-00000000000e", FALSE, &none, NULL);
  ck_assert (direct != NULL && none == NULL); /* an endpoint is no sandbox */
  ck_assert_str_eq (direct->endpoint, "tcp:127.0.0.1:9");
  ck_assert_str_eq (direct->credential.token, "direct-tok");
  g_setenv ("NAMZU_TOKEN", "", TRUE);
  bare = nz_sandbox_open ("unix:/x", NULL, FALSE, NULL, NULL);
  ck_assert_int_eq (bare->credential.kind, NZ_CREDENTIAL_NONE);
  ck_assert (bare->credential.token == NULL);

  ck_assert (nz_sandbox_open (NULL, "nz-0000000000ff", FALSE, NULL, &e1) == NULL);
  ck_assert (g_error_matches (e1, NZ_ERROR, NZ_ERROR_NOT_FOUND));

  tls = nz_transport_new_tls ("tcp:127.0.0.1:9", "CERT", "KEY", "CA");
  ck_assert_int_eq (tls->credential.kind, NZ_CREDENTIAL_TLS_CLIENT);
  ck_assert_str_eq (nz_credential_kind_name (tls->credential.kind), "tls-client");
  ck_assert (nz_agent_client_new_for (tls, &e2) == NULL);
  ck_assert (g_error_matches (e2, NZ_ERROR, NZ_ERROR_UNSUPPORTED));
  ck_assert_msg (strstr (e2->message, "TLS client certificate") != NULL, "%s", e2->message);
  c = nz_agent_client_new_for (t, NULL);
  ck_assert (c != NULL);
}
END_TEST

START_TEST (test_backend_table)
{
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  const char *const unavailable[] = { "microvm:firecracker", "container:aci-standby-pool" };

  ck_assert (nz_backend_lookup (NULL, NULL) != NULL);
  ck_assert_str_eq (nz_backend_lookup ("container:bwrap", NULL)->name, "container:bwrap");
  /* docker and runsc drive namzu-worker over HTTP. */
  ck_assert_str_eq (nz_backend_lookup ("container:docker", NULL)->transport, "worker");
  ck_assert_str_eq (nz_backend_lookup ("container:runsc", NULL)->name, "container:runsc");
  for (gsize i = 0; i < G_N_ELEMENTS (unavailable); i++)
    {
      g_autoptr (GError) e = NULL;

      ck_assert (nz_backend_lookup (unavailable[i], &e) == NULL);
      ck_assert (g_error_matches (e, NZ_ERROR, NZ_ERROR_UNSUPPORTED));
      ck_assert (strstr (e->message, "is not available in this build yet") != NULL);
      ck_assert (strstr (e->message, unavailable[i]) != NULL);
      /* The refusal names every backend that is there to pick instead. */
      ck_assert (strstr (e->message,
                         "(available: container:bwrap, container:docker, container:runsc, "
                         "microvm:kubernetes)")
                 != NULL);
    }
  ck_assert (nz_backend_lookup ("container:lxc", &e1) == NULL);
  ck_assert (g_error_matches (e1, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
  (void)e2;
}
END_TEST

/* Loads @json into fresh options; returns the error message or NULL. */
static char *
config_error (const char *json, NzCreateOptions **out)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GError) error = NULL;

  if (nz_create_options_load_config (opts, json, -1, &error)
      && nz_create_options_validate (opts, &error) && nz_create_options_check_disk (opts, &error))
    {
      if (out != NULL)
        *out = g_steal_pointer (&opts);
      return NULL;
    }
  return g_strdup_printf ("%d:%s", error->code, error->message);
}

#define ASSERT_REFUSED(json, needle)                                                               \
  do                                                                                               \
    {                                                                                              \
      g_autofree char *msg_ = config_error (json, NULL);                                           \
      ck_assert_msg (msg_ != NULL, "accepted: %s", json);                                          \
      ck_assert_msg (strstr (msg_, needle) != NULL, "'%s' lacks '%s'", msg_, needle);              \
    }                                                                                              \
  while (0)

START_TEST (test_config_accepts)
{
  NzCreateOptions *opts = NULL;
  g_autofree char *msg = config_error (
      "{\"backend\":{\"tier\":\"container\",\"runtime\":\"bwrap\",\"cpuLimit\":1.5,"
      "\"readyTimeoutMs\":5000,\"writableRootfsPaths\":[\"/opt/cache\"]},"
      "\"layout\":{\"outputs\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/srv/o\"}},"
      "\"uploads\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/srv/u\"}},"
      "\"skills\":[{\"id\":\"pdf\",\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/srv/s\"}}]},"
      "\"defaultEgress\":{\"kind\":\"allow-all\"},\"defaultMemoryLimitMb\":512,"
      "\"defaultMaxProcesses\":64,\"defaultTimeoutMs\":1000}",
      &opts);
  NzMount *m;

  ck_assert_msg (msg == NULL, "%s", msg);
  ck_assert_str_eq (opts->backend, "container:bwrap");
  ck_assert (opts->network == NZ_NETWORK_ALLOW_ALL);
  ck_assert_int_eq (opts->memory_mb, 512);
  ck_assert_int_eq (opts->max_processes, 64);
  ck_assert (opts->cpus == 1.5);
  ck_assert_uint_eq (opts->ready_timeout_ms, 5000);
  ck_assert_uint_eq (opts->mounts->len, 3);
  m = opts->mounts->pdata[0];
  ck_assert_str_eq (m->container_path, NZ_LAYOUT_OUTPUTS_PATH);
  ck_assert (m->writable);
  m = opts->mounts->pdata[1];
  ck_assert_str_eq (m->container_path, NZ_LAYOUT_UPLOADS_PATH);
  ck_assert (!m->writable);
  m = opts->mounts->pdata[2];
  ck_assert_str_eq (m->container_path, "/mnt/skills/pdf");
  ck_assert_str_eq (opts->writable_paths->pdata[0], "/opt/cache");
  nz_create_options_free (opts);
}
END_TEST

START_TEST (test_config_refusals_name_the_field)
{
  static const char bw[] = "\"backend\":{\"tier\":\"container\",\"runtime\":\"bwrap\"";

  ASSERT_REFUSED ("[1]", "config");
  ASSERT_REFUSED ("{\"defaultMemoryLimitMb\":-1}", "defaultMemoryLimitMb");
  ASSERT_REFUSED ("{\"defaultMemoryLimitMb\":\"64\"}", "defaultMemoryLimitMb");
  ASSERT_REFUSED ("{\"defaultMaxProcesses\":1.5}", "defaultMaxProcesses");
  ASSERT_REFUSED ("{\"defaultTimeoutMs\":0}", "defaultTimeoutMs");
  ASSERT_REFUSED ("{\"surprise\":1}", "surprise: unknown field");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"container\",\"egressProxyImage\":7}}",
                  "backend.egressProxyImage");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"container\",\"runtime\":\"runsc\","
                  "\"hostReachability\":\"x\"}}",
                  "backend.hostReachability");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"microvm\"}}", "microvm:firecracker");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"microvm\",\"service\":\"kubernetes\","
                  "\"agentAddress\":\"node\"}}",
                  "backend.agentAddress");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"microvm\",\"service\":\"kubernetes\","
                  "\"namespace\":\"Bad/NS\"}}",
                  "backend.namespace");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"microvm\",\"service\":\"kubernetes\","
                  "\"access\":{\"server\":\"http://x\",\"token\":\"t\"}}}",
                  "backend.access.server");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"microvm\",\"service\":\"kubernetes\","
                  "\"network\":\"n1\"}}",
                  "backend.network: not supported by microvm:kubernetes");
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"satellite\"}}", "backend.tier");
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"image\":\"x\"}}", bw);
    ASSERT_REFUSED (j, "backend.image");
  }
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"network\":\"none\"}}", bw);
    ASSERT_REFUSED (j, "backend.network");
    /* Whose key it is comes from the table: no backend lists another's. */
    ASSERT_REFUSED (j, "not supported by container:bwrap (a container:docker setting)");
  }
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"netwrok\":\"none\"}}", bw);
    ASSERT_REFUSED (j, "backend.netwrok: unknown field");
  }
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"container\",\"imagee\":\"x\"}}",
                  "backend.imagee: unknown field");
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"cpuLimit\":0}}", bw);
    ASSERT_REFUSED (j, "backend.cpuLimit");
  }
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"cpuLimit\":1e17}}", bw);
    ASSERT_REFUSED (j, "backend.cpuLimit");
  }
  ASSERT_REFUSED ("{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"cpuLimit\":1e17}}",
                  "backend.cpuLimit");
  ASSERT_REFUSED ("{\"defaultMemoryLimitMb\":1e17}", "defaultMemoryLimitMb");
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":0}", "defaultDiskLimitMb");
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":-5}", "defaultDiskLimitMb");
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":2.5}", "defaultDiskLimitMb");
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":1048577}", "defaultDiskLimitMb");
  ASSERT_REFUSED ("{\"defaultMaxProcesses\":2147483648}", "defaultMaxProcesses");
  /* A disk bound where it cannot hold: a writable host directory, a writable image layer. */
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":64,\"layout\":{\"outputs\":{\"source\":"
                  "{\"type\":\"hostDir\",\"hostPath\":\"/a\"}}}}",
                  "--disk-mb cannot bound layout.outputs");
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":64,\"layout\":{\"scratch\":{\"source\":"
                  "{\"type\":\"hostDir\",\"hostPath\":\"/a\"}}}}",
                  "--disk-mb cannot bound layout.scratch");
  ASSERT_REFUSED ("{\"defaultDiskLimitMb\":64,\"backend\":{\"tier\":\"container\",\"image\":\"i\","
                  "\"readOnlyRootfs\":false}}",
                  "--disk-mb cannot bound a writable root");
  {
    g_autoptr (NzCreateOptions) ok = NULL;
    g_autofree char *msg
        = config_error ("{\"defaultDiskLimitMb\":64,\"layout\":{\"uploads\":"
                        "{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/a\"}}}}",
                        &ok);

    ck_assert_msg (msg == NULL, "%s", msg);
    ck_assert_int_eq (ok->disk_mb, 64);
  }
  ASSERT_REFUSED ("{\"defaultTimeoutMs\":1e300}", "defaultTimeoutMs");
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"readOnlyRootfs\":false}}", bw);
    ASSERT_REFUSED (j, "backend.readOnlyRootfs");
  }
  {
    g_autofree char *j = g_strdup_printf ("{%s,\"writableRootfsPaths\":[\"/tmp/../etc\"]}}", bw);
    ASSERT_REFUSED (j, "backend.writableRootfsPaths");
  }
  ASSERT_REFUSED ("{\"layout\":{\"outputs\":{\"source\":{\"type\":\"azureFileShare\"}}}}",
                  "layout.outputs.source.type");
  ASSERT_REFUSED ("{\"layout\":{\"outputs\":{\"source\":{\"type\":\"hostDir\","
                  "\"hostPath\":\"rel\"}}}}",
                  "layout.outputs.source.hostPath");
  ASSERT_REFUSED (
      "{\"layout\":{\"outputs\":{\"source\":{\"type\":\"hostDir\",\"hostPath\":\"/a\"}},"
      "\"uploads\":{\"containerPath\":\"/mnt/user-data/outputs\",\"source\":"
      "{\"type\":\"hostDir\",\"hostPath\":\"/b\"}}}}",
      "duplicate containerPath \"/mnt/user-data/outputs\"");
  ASSERT_REFUSED ("{\"layout\":{\"scratch\":{\"containerPath\":\"/proc/x\",\"source\":"
                  "{\"type\":\"hostDir\",\"hostPath\":\"/b\"}}}}",
                  "layout.scratch");
  ASSERT_REFUSED ("{\"layout\":{\"skills\":[{\"id\":\"a/b\",\"source\":{\"type\":\"hostDir\","
                  "\"hostPath\":\"/b\"}}]}}",
                  "layout.skills[0].id");
  ASSERT_REFUSED ("{\"defaultEgress\":{\"kind\":\"resolver\"}}", "defaultEgress.kind");
  ASSERT_REFUSED ("{\"defaultEgress\":{\"kind\":\"static\",\"allowedHosts\":[1]}}",
                  "defaultEgress.allowedHosts[0]");
  ASSERT_REFUSED ("{\"defaultEgress\":{\"kind\":\"deny-all\"},\"egressProfile\":{\"name\":\"p\","
                  "\"hosts\":[]}}",
                  "egressProfile");
  /* Validated in full: every problem is reported, not only the first. */
  {
    g_autofree char *msg
        = config_error ("{\"defaultMemoryLimitMb\":0,\"defaultMaxProcesses\":0}", NULL);

    ck_assert (strstr (msg, "defaultMemoryLimitMb") != NULL);
    ck_assert (strstr (msg, "defaultMaxProcesses") != NULL);
  }
}
END_TEST

START_TEST (test_config_egress_kinds)
{
  NzCreateOptions *opts = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *m1 = config_error (
      "{\"defaultEgress\":{\"kind\":\"static\",\"allowedHosts\":[\"api.example.com\"]}}", &opts);

  ck_assert_msg (m1 == NULL, "%s", m1);
  ck_assert (opts->network == NZ_NETWORK_ALLOWLIST);
  ck_assert_str_eq (opts->egress_hosts->pdata[0], "api.example.com");
  /* Parsed, then held to the allowlist grammar by the backend - before any I/O. */
  ck_assert (nz_backend_lookup (NULL, NULL)->check (opts, NULL));
  g_ptr_array_add (opts->egress_hosts, g_strdup ("*.example.com"));
  ck_assert (!nz_backend_lookup (NULL, NULL)->check (opts, &error));
  ck_assert (strstr (error->message, "contains '*'") != NULL);
  nz_create_options_free (opts);
  opts = NULL;
  {
    g_autofree char *m2 = config_error ("{\"egressProfile\":{\"name\":\"p\",\"hosts\":[]}}", &opts);

    ck_assert_msg (m2 == NULL, "%s", m2);
    ck_assert (opts->network == NZ_NETWORK_DENY_ALL);
    nz_create_options_free (opts);
  }
}
END_TEST

/* The lifetime rides in the private handle and shows in the public one: expiresAt as RFC 3339
 * UTC, idleTimeoutMs as a number; a handle without one shows neither, and nonsense read back
 * from disk is no deadline rather than a wrong one. */
START_TEST (test_handle_lifetime_fields)
{
  g_autoptr (NzHandle) h = make_handle ("nz-0000000000e1", 1000);
  g_autoptr (NzHandle) back = NULL;
  g_autoptr (NzHandle) plain = make_handle ("nz-0000000000e2", 1000);
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (JsonObject) priv = NULL;
  g_autoptr (JsonObject) pub = NULL;
  g_autoptr (JsonObject) plain_pub = nz_backend_public_handle (plain);
  g_autoptr (GError) error = NULL;

  opts->ttl_ms = 1796282559124 - 1000;
  opts->idle_timeout_ms = 90000;
  nz_handle_set_lifetime (h, opts);
  ck_assert_int_eq (h->expires_at_ms, 1796282559124);
  ck_assert_int_eq (h->idle_timeout_ms, 90000);
  ck_assert (nz_handle_save (h, &error));
  back = nz_handle_load ("nz-0000000000e1", &error);
  ck_assert_msg (back != NULL, "%s", error ? error->message : "");
  ck_assert_int_eq (back->expires_at_ms, 1796282559124);
  ck_assert_int_eq (back->idle_timeout_ms, 90000);
  pub = nz_backend_public_handle (back);
  ck_assert_str_eq (nz_json_get_string (pub, "expiresAt"), "2026-12-03T07:22:39.124Z");
  ck_assert_int_eq (json_object_get_int_member (pub, "idleTimeoutMs"), 90000);
  ck_assert (!json_object_has_member (plain_pub, "expiresAt"));
  ck_assert (!json_object_has_member (plain_pub, "idleTimeoutMs"));
  ck_assert (!nz_handle_is_past_deadline (plain));
  /* Nonsense on disk: ignored. */
  priv = nz_handle_to_private_json (plain);
  json_object_set_string_member (priv, "expiresAt", "tomorrow");
  json_object_set_int_member (priv, "idleTimeoutMs", -5);
  {
    g_autoptr (NzHandle) odd = nz_handle_from_private_json (priv, &error);

    ck_assert (odd != NULL);
    ck_assert_int_eq (odd->expires_at_ms, 0);
    ck_assert_int_eq (odd->idle_timeout_ms, 0);
  }
  /* A deadline in the past: a sandbox whose processes are gone reads as expired, not dead. */
  h->expires_at_ms = g_get_real_time () / 1000 - 1;
  ck_assert (nz_handle_is_past_deadline (h));
  ck_assert_int_eq (nz_backend_status (h, 0), NZ_SANDBOX_EXPIRED);
  ck_assert_int_eq (nz_backend_status (plain, 0), NZ_SANDBOX_DEAD);
  ck_assert_str_eq (nz_sandbox_status_name (NZ_SANDBOX_EXPIRED), "expired");
}
END_TEST

/* Destroying is idempotent: a sandbox already gone succeeds with already_gone, leaves a
 * tombstone that namzu-ls does not list, and a second destroy of the id succeeds too; an id
 * never known is still NOT_FOUND; tombstones older than a week are pruned. */
START_TEST (test_destroy_idempotent_and_tombstones)
{
  g_autoptr (NzHandle) h = make_handle ("nz-0000000000f1", 1);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) unreadable = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) list = NULL;
  g_autofree char *state = nz_state_dir (NULL);
  g_autofree char *stone = g_build_filename (state, "nz-0000000000f1.destroyed", NULL);
  g_autofree char *old = g_build_filename (state, "nz-0000000000f2.destroyed", NULL);
  gboolean gone = FALSE;
  struct utimbuf times;

  ck_assert (nz_state_is_tombstone_name ("nz-0000000000f1.destroyed"));
  ck_assert (!nz_state_is_tombstone_name ("nz-0000000000f1"));
  ck_assert (!nz_state_is_tombstone_name ("../x.destroyed"));
  ck_assert (!nz_state_is_buried ("nz-0000000000f1"));
  /* Its processes (pid 0) are not running: already gone, and cleaned up. */
  ck_assert_msg (nz_backend_destroy_id ("nz-0000000000f1", &gone, &error), "%s",
                 error ? error->message : "");
  ck_assert (gone);
  ck_assert (!g_file_test (h->dir, G_FILE_TEST_EXISTS));
  ck_assert (g_file_test (stone, G_FILE_TEST_IS_REGULAR));
  ck_assert (nz_state_is_buried ("nz-0000000000f1"));
  list = nz_state_list (unreadable, &error);
  ck_assert (list != NULL);
  ck_assert_uint_eq (list->len, 0);
  ck_assert_uint_eq (unreadable->len, 0);
  gone = FALSE;
  ck_assert (nz_backend_destroy_id ("nz-0000000000f1", &gone, &error));
  ck_assert (gone);
  /* Never known: a failure, not a success. */
  ck_assert (!nz_backend_destroy_id ("nz-0000000000f3", &gone, &error));
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_NOT_FOUND));
  ck_assert (!gone);
  g_clear_error (&error);
  /* A week and a day old: pruned by the next burial; a fresh one stays. */
  ck_assert (nz_state_bury ("nz-0000000000f2", &error));
  times.actime = times.modtime = time (NULL) - 8 * 86400;
  ck_assert_int_eq (utime (old, &times), 0);
  ck_assert (nz_state_bury ("nz-0000000000f4", &error));
  ck_assert (!g_file_test (old, G_FILE_TEST_EXISTS));
  ck_assert (g_file_test (stone, G_FILE_TEST_IS_REGULAR));
}
END_TEST

START_TEST (test_config_lifetime)
{
  NzCreateOptions *opts = NULL;
  g_autofree char *msg = config_error ("{\"ttlMs\":60000,\"idleTimeoutMs\":5000}", &opts);

  ck_assert_msg (msg == NULL, "%s", msg);
  ck_assert_int_eq (opts->ttl_ms, 60000);
  ck_assert_int_eq (opts->idle_timeout_ms, 5000);
  nz_create_options_free (opts);
  ASSERT_REFUSED ("{\"ttlMs\":0}", "ttlMs: must be a positive integer");
  ASSERT_REFUSED ("{\"ttlMs\":-1}", "ttlMs");
  ASSERT_REFUSED ("{\"ttlMs\":\"60s\"}", "ttlMs");
  ASSERT_REFUSED ("{\"ttlMs\":1.5}", "ttlMs");
  ASSERT_REFUSED ("{\"ttlMs\":1e300}", "ttlMs");
  ASSERT_REFUSED ("{\"idleTimeoutMs\":0}", "idleTimeoutMs");
  ASSERT_REFUSED ("{\"idleTimeoutMs\":true}", "idleTimeoutMs");
}
END_TEST

static Suite *
state_suite (void)
{
  Suite *s = suite_create ("state");
  TCase *tc = tcase_create ("state");

  /* The deep-tree case builds and removes 5,000 levels (slow under the sanitizers). */
  tcase_set_timeout (tc, 60);

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_state_dir_resolution);
  tcase_add_test (tc, test_state_dir_permissions);
  tcase_add_test (tc, test_ids);
  tcase_add_test (tc, test_stream_heartbeat_default);
  tcase_add_test (tc, test_handle_roundtrip_and_list);
  tcase_add_test (tc, test_handle_extreme_limits_roundtrip);
  tcase_add_test (tc, test_remove_dir_deep_tree);
  tcase_add_test (tc, test_remove_dir_keeps_handle_until_gone);
  tcase_add_test (tc, test_remove_dir_stops_at_a_mount);
  tcase_add_test (tc, test_resolve_order);
  tcase_add_test (tc, test_resolve_stdin_left_open);
  tcase_add_test (tc, test_resolve_errors);
  tcase_add_test (tc, test_public_handle_has_no_token);
  tcase_add_test (tc, test_backend_table);
  tcase_add_test (tc, test_sandbox_open_transport);
  tcase_add_test (tc, test_config_accepts);
  tcase_add_test (tc, test_config_refusals_name_the_field);
  tcase_add_test (tc, test_config_egress_kinds);
  tcase_add_test (tc, test_handle_lifetime_fields);
  tcase_add_test (tc, test_destroy_idempotent_and_tombstones);
  tcase_add_test (tc, test_config_lifetime);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return nz_test_run (state_suite ());
}
