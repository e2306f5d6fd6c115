/* test-jail-race: the jail against a hostile workload that swaps a symlink in and out while the
 * agent works (renameat2 RENAME_EXCHANGE between a real directory inside the workspace and a
 * symlink to a directory outside it), for every kind of jailed path: read-file (whole and
 * ranged), read-file-stream, write-file, the parts upload (a first part, and a final part with
 * its chmod and rename), mkdir -p and the cwd of execute, start-detached and terminal.
 * An escape is anything read from, written to or made in the outside directory; there must be
 * none. The agent runs directly (no bwrap), its workspace in a temp dir, the racer a thread
 * of this test. Also: whole-file and stream reads of a FIFO are refused at once, and a temp
 * left by an agent SIGKILLed mid-write is swept by the next write in its directory.
 *
 * Tries per op: NZ_RACE_TRIES (default 10000), scaled to a tenth in a sanitized build so the
 * ASan tree stays within the test's time. */
#define _GNU_SOURCE /* renameat2 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/time.h>

#include "agent-harness.h"

#define SECRET "OUTSIDE-SECRET"
#define SECRET_B64 "T1VUU0lERS1TRUNSRVQ="

typedef struct
{
  char *ws;
  char *outside;
  volatile gint stop;
  guint64 swaps;
} Racer;

/* The hostile workload: swaps ws/sw (a real directory) with ws/swl (a symlink to outside)
 * as fast as it can, so ws/sw is one or the other at any instant. */
static void *
racer_main (void *data)
{
  Racer *r = data;
  int dfd = open (r->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  ck_assert_int_ge (dfd, 0);
  while (!g_atomic_int_get (&r->stop))
    {
      if (renameat2 (dfd, "sw", dfd, "swl", RENAME_EXCHANGE) == 0)
        r->swaps++;
    }
  close (dfd);
  return NULL;
}

static guint
tries (void)
{
  const char *env = g_getenv ("NZ_RACE_TRIES");
  guint n = env != NULL ? (guint)atoi (env) : 10000;

  return sanitized_build () ? MAX (1, n / 10) : n;
}

/* The outside directory as it starts: the secret and a temp-named file a parts upload must
 * not truncate, nothing else (what an escaping op made is removed). */
static void
reset_outside (const char *outside)
{
  g_autoptr (GDir) d = g_dir_open (outside, 0, NULL);
  const char *ent;
  g_autofree char *secret = g_build_filename (outside, "f", NULL);
  g_autofree char *temp = g_build_filename (outside, ".namzu-write-t.part", NULL);

  while ((ent = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *p = g_build_filename (outside, ent, NULL);
      g_autofree char *x = g_build_filename (p, "x", NULL);

      g_unlink (x);
      g_rmdir (p);
      g_unlink (p);
    }
  ck_assert (g_file_set_contents (secret, SECRET, -1, NULL));
  ck_assert (g_file_set_contents (temp, SECRET, -1, NULL));
}

static char *
make_outside (Agent *a)
{
  char *outside = g_build_filename (a->dir, "outside", NULL);

  ck_assert_int_eq (g_mkdir (outside, 0755), 0);
  reset_outside (outside);
  return outside;
}

/* The pair's real directory, by descriptor: it stays the same inode whatever its name. */
static int real_dir_fd = -1;

static void
make_swap_pair (Agent *a, const char *outside)
{
  g_autofree char *sw = ws_path (a, "sw");
  g_autofree char *inner = ws_path (a, "sw/f");
  g_autofree char *inner_temp = ws_path (a, "sw/.namzu-write-t.part");
  g_autofree char *swl = ws_path (a, "swl");

  ck_assert_int_eq (g_mkdir (sw, 0755), 0);
  ck_assert (g_file_set_contents (inner, "inside", -1, NULL));
  ck_assert (g_file_set_contents (inner_temp, "inside", -1, NULL));
  ck_assert_int_eq (symlink (outside, swl), 0);
  real_dir_fd = open (sw, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (real_dir_fd, 0);
}

/* Entries whose name starts with @prefix in the real directory: what a write-like op made
 * there, proof that its tries went through the swapped name rather than all failing. */
static guint
inside_made (const char *prefix)
{
  DIR *d = fdopendir (dup (real_dir_fd));
  struct dirent *e;
  guint n = 0;

  ck_assert_ptr_nonnull (d);
  /* The dup shares its offset with real_dir_fd: start from the top each time. */
  rewinddir (d);
  while ((e = readdir (d)) != NULL)
    n += g_str_has_prefix (e->d_name, prefix) ? 1 : 0;
  closedir (d);
  return n;
}

/* What is in outside beyond the two files it started with, and whether those kept their
 * bytes: each is one escape. */
static guint
outside_escapes (const char *outside)
{
  g_autoptr (GDir) d = g_dir_open (outside, 0, NULL);
  const char *name;
  guint escapes = 0;

  ck_assert_ptr_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (outside, name, NULL);
      g_autofree char *have = NULL;

      if (strcmp (name, "f") != 0 && strcmp (name, ".namzu-write-t.part") != 0)
        {
          escapes++;
          continue;
        }
      if (!g_file_get_contents (path, &have, NULL, NULL) || strcmp (have, SECRET) != 0)
        escapes++;
    }
  return escapes;
}

/* Reads that got the inside file: the op really ran through the swapped directory. */
static guint inside_hits;

static gboolean
frames_leak (GPtrArray *frames)
{
  for (guint k = 0; k < frames->len; k++)
    if (strstr (frames->pdata[k], "\"inside\"") != NULL || strstr (frames->pdata[k], "aW5zaWRl") != NULL)
      inside_hits++;
  for (guint k = 0; k < frames->len; k++)
    if (strstr (frames->pdata[k], SECRET) != NULL || strstr (frames->pdata[k], SECRET_B64) != NULL)
      return TRUE;
  return FALSE;
}

enum
{
  OP_READ,
  OP_READ_RANGE,
  OP_READ_STREAM,
  OP_WRITE,
  OP_PARTS,
  OP_PARTS_FINAL,
  OP_MKDIR,
  OP_CWD,
  OP_DETACHED_CWD,
  OP_TERMINAL_CWD,
  N_OPS
};

static const char *const op_names[N_OPS] = {
  "read-file", "read-file ranged", "read-file-stream", "write-file",
  "parts upload", "final part", "mkdir -p", "execute cwd", "start-detached cwd",
  "terminal cwd",
};

/* The name prefix of what each write-like op makes (NULL: nothing to count). */
static const char *const op_made[N_OPS] = {
  [OP_WRITE] = "w", [OP_PARTS_FINAL] = "r", [OP_MKDIR] = "d", [OP_CWD] = "m",
  [OP_DETACHED_CWD] = "s", [OP_TERMINAL_CWD] = "t",
};

/* One try of @op; TRUE when its reply alone shows an escape (reads). Writes are counted from
 * the outside directory afterwards. */
static gboolean
one_try (Agent *a, int op, guint i)
{
  g_autofree char *body = NULL;
  g_autoptr (GPtrArray) frames = NULL;
  const char *name = "read-file";

  switch (op)
    {
    case OP_READ:
      body = g_strdup ("{\"path\":\"sw/f\"}");
      break;
    case OP_READ_RANGE:
      body = g_strdup ("{\"path\":\"sw/f\",\"encoding\":\"base64\",\"offset\":0,\"length\":64}");
      break;
    case OP_READ_STREAM:
      name = "read-file-stream";
      body = g_strdup ("{\"path\":\"sw/f\"}");
      break;
    case OP_WRITE:
      name = "write-file";
      body = g_strdup_printf ("{\"path\":\"sw/w%u\",\"content\":\"x\"}", i);
      break;
    case OP_PARTS:
      name = "write-file";
      body = g_strdup ("{\"path\":\"sw/.namzu-write-t.part\",\"content\":\"eA==\","
                       "\"encoding\":\"base64\",\"part\":{\"offset\":0}}");
      break;
    case OP_PARTS_FINAL:
      /* The final part: chmod from the target, rename onto renameTo, fsync of its directory. */
      name = "write-file";
      body = g_strdup_printf ("{\"path\":\"sw/.namzu-write-t.part\",\"content\":\"eA==\","
                              "\"encoding\":\"base64\",\"part\":{\"offset\":0,\"final\":true,"
                              "\"renameTo\":\"sw/r%u\"}}",
                              i);
      break;
    case OP_MKDIR:
      name = "write-file";
      body = g_strdup_printf ("{\"path\":\"sw/d%u/x\",\"content\":\"x\"}", i);
      break;
    case OP_CWD:
      name = "execute";
      body = g_strdup_printf ("{\"command\":\"touch\",\"args\":[\"m%u\"],\"cwd\":\"sw\"}", i);
      break;
    case OP_DETACHED_CWD:
      name = "start-detached";
      body = g_strdup_printf ("{\"sessionId\":\"s%u\",\"command\":\"touch\",\"args\":"
                              "[\"s%u\"],\"cwd\":\"sw\"}",
                              i, i);
      break;
    case OP_TERMINAL_CWD:
      name = "terminal";
      body = g_strdup_printf ("{\"cols\":80,\"rows\":24,\"command\":\"touch\",\"args\":"
                              "[\"t%u\"],\"cwd\":\"sw\"}",
                              i);
      break;
    default:
      g_assert_not_reached ();
    }
  frames = request (a, name, body);
  return frames_leak (frames);
}

START_TEST (test_symlink_swap_race)
{
  /* Detached sessions leave the registry as soon as they exit, and there is room for all. */
  Agent *a = agent_start_ex (FALSE,
                             (const char *const[]){ "NAMZU_AGENT_SESSION_TERMINAL_TTL_MS=1",
                                                    "NAMZU_AGENT_MAX_SESSIONS=100000", NULL },
                             FALSE);
  g_autofree char *outside = make_outside (a);
  Racer r = { .ws = a->ws, .outside = outside };
  pthread_t thread;
  guint n = tries ();
  guint total = 0;

  make_swap_pair (a, outside);
  ck_assert_int_eq (pthread_create (&thread, NULL, racer_main, &r), 0);
  for (int op = 0; op < N_OPS; op++)
    {
      guint leaks = 0, escapes;
      gint64 t0 = g_get_monotonic_time ();

      inside_hits = 0;
      for (guint i = 0; i < n; i++)
        if (one_try (a, op, i))
          leaks++;
      escapes = leaks + outside_escapes (outside);
      fprintf (stderr,
               "%-18s %u tries, %u escapes, %u inside reads, %.1fs (%" G_GUINT64_FORMAT
               " swaps so far)\n",
               op_names[op], n, escapes, inside_hits, (g_get_monotonic_time () - t0) / 1e6,
               r.swaps);
      /* A read that never got through would prove nothing: the inside shape must be seen; a
       * write-like op must have made something inside (detached ones run on their own). */
      if (op <= OP_READ_STREAM)
        ck_assert_uint_gt (inside_hits, 0);
      else if (op_made[op] != NULL)
        {
          if (op == OP_DETACHED_CWD)
            g_usleep (300 * 1000);
          ck_assert_msg (inside_made (op_made[op]) > 0, "%s made nothing inside", op_names[op]);
        }
      total += escapes;
      /* Count each op's own: put outside back as it was. */
      reset_outside (outside);
    }
  g_atomic_int_set (&r.stop, 1);
  pthread_join (thread, NULL);
  /* The racer really raced: both shapes were there many times over. */
  ck_assert_uint_gt (r.swaps, 1000);
  ck_assert_msg (total == 0, "%u escapes out of the workspace", total);
  agent_stop (a);
}
END_TEST

/* Symlinks that stay inside keep working as the spec says: reads and writes through a link
 * to a directory inside, by a relative or an absolute target, and a cwd through one. */
START_TEST (test_inside_symlinks_still_work)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *real = ws_path (a, "real");
  g_autofree char *f = ws_path (a, "real/f");
  g_autofree char *rel_link = ws_path (a, "rel");
  g_autofree char *abs_link = ws_path (a, "abs");
  g_autofree char *written = ws_path (a, "real/new");
  g_autofree char *touched = ws_path (a, "real/m");
  g_autofree char *have = NULL;
  g_autoptr (JsonObject) o = NULL;

  ck_assert_int_eq (g_mkdir (real, 0755), 0);
  ck_assert (g_file_set_contents (f, "inside", -1, NULL));
  ck_assert_int_eq (symlink ("real", rel_link), 0);
  ck_assert_int_eq (symlink (real, abs_link), 0);
  o = reply (a, "read-file", "{\"path\":\"rel/f\"}");
  ck_assert_msg (nz_json_get_bool (o, "ok", FALSE), "%s", nz_json_get_string (o, "error"));
  ck_assert_str_eq (nz_json_get_string (o, "content"), "inside");
  g_clear_pointer (&o, json_object_unref);
  o = reply (a, "read-file", "{\"path\":\"abs/f\"}");
  ck_assert_msg (nz_json_get_bool (o, "ok", FALSE), "%s", nz_json_get_string (o, "error"));
  g_clear_pointer (&o, json_object_unref);
  o = reply (a, "write-file", "{\"path\":\"abs/new\",\"content\":\"w\"}");
  ck_assert_msg (nz_json_get_bool (o, "ok", FALSE), "%s", nz_json_get_string (o, "error"));
  ck_assert (g_file_get_contents (written, &have, NULL, NULL));
  ck_assert_str_eq (have, "w");
  g_clear_pointer (&o, json_object_unref);
  g_ptr_array_unref (request (a, "execute", "{\"command\":\"touch\",\"args\":[\"m\"],\"cwd\":\"rel\"}"));
  ck_assert (g_file_test (touched, G_FILE_TEST_IS_REGULAR));
  agent_stop (a);
}
END_TEST

/* A FIFO in the workspace: whole-file, ranged and stream reads refuse it at once with the
 * named error, instead of blocking the agent forever. */
START_TEST (test_fifo_refused)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *fifo = ws_path (a, "p");
  g_autofree char *want = g_strdup_printf ("not_a_regular_file: '%s'", fifo);
  g_autoptr (JsonObject) o = NULL;

  ck_assert_int_eq (mkfifo (fifo, 0644), 0);
  alarm (20);
  o = reply (a, "read-file", "{\"path\":\"p\"}");
  ck_assert (!nz_json_get_bool (o, "ok", TRUE));
  ck_assert_str_eq (nz_json_get_string (o, "error"), want);
  g_clear_pointer (&o, json_object_unref);
  assert_reply_error (a, "read-file", "{\"path\":\"p\",\"encoding\":\"base64\",\"offset\":0}", want);
  assert_stream_error (a, "read-file-stream", "{\"path\":\"p\"}", want);
  /* And the agent still answers. */
  o = reply (a, "read-file", "{\"path\":\"nope\"}");
  ck_assert (!nz_json_get_bool (o, "ok", TRUE));
  alarm (0);
  agent_stop (a);
}
END_TEST

/* An agent SIGKILLed mid-write leaves its temp sibling; a restarted agent's next write in that
 * directory sweeps it once it is stale (NZ_FILEIO_STALE_TEMP_SECONDS, backdated here). */
START_TEST (test_stale_temp_swept)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *d = ws_path (a, "d");
  gsize big = 48 * 1024 * 1024;
  g_autofree char *content = g_malloc (big + 64);
  g_autofree char *json = NULL;
  g_autofree char *temp = NULL;
  int fd;

  ck_assert_int_eq (g_mkdir (d, 0755), 0);
  memset (content, 'a', big);
  content[big] = '\0';
  {
    g_autofree char *body = g_strdup_printf ("{\"path\":\"d/big\",\"content\":\"%s\"}", content);

    json = envelope (a, "write-file", body);
  }
  fd = agent_connect (a);
  send_frame (fd, json);
  /* Kill it once its temp exists: the write is in flight. */
  for (int k = 0; k < 20000 && temp == NULL; k++)
    {
      g_autoptr (GDir) dir = g_dir_open (d, 0, NULL);
      const char *name;

      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        if (g_str_has_prefix (name, ".namzu-write-big."))
          temp = g_build_filename (d, name, NULL);
      if (temp == NULL)
        g_usleep (100);
    }
  ck_assert_msg (temp != NULL, "no temp appeared");
  kill (a->pid, SIGKILL);
  close (fd);
  waitpid (a->pid, NULL, 0);
  ck_assert (g_file_test (temp, G_FILE_TEST_EXISTS));
  {
    /* Restart on the same workspace. */
    g_autofree char *ws = g_strdup (a->ws);
    g_autofree char *ws_var = g_strdup_printf ("NAMZU_SANDBOX_WORKSPACE=%s", ws);
    const char *extra[] = { ws_var, NULL };
    Agent *b = agent_start_full (FALSE, extra);
    struct timeval old[2] = { { .tv_sec = time (NULL) - 3600 }, { .tv_sec = time (NULL) - 3600 } };
    g_autoptr (JsonObject) o = NULL;

    /* A fresh temp (an upload in progress) is left alone. */
    o = reply (b, "write-file", "{\"path\":\"d/small\",\"content\":\"s\"}");
    ck_assert (nz_json_get_bool (o, "ok", FALSE));
    g_clear_pointer (&o, json_object_unref);
    ck_assert (g_file_test (temp, G_FILE_TEST_EXISTS));
    /* Once stale, the next write in the directory sweeps it. */
    ck_assert_int_eq (utimes (temp, old), 0);
    o = reply (b, "write-file", "{\"path\":\"d/small\",\"content\":\"s\"}");
    ck_assert (nz_json_get_bool (o, "ok", FALSE));
    ck_assert_msg (!g_file_test (temp, G_FILE_TEST_EXISTS), "%s not swept", temp);
    agent_stop (b);
  }
  agent_free (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("jail-race");
  TCase *tc = tcase_create ("race");

  /* The race runs beside other suites (meson test runs them in parallel): room for a loaded
   * machine, where the racer thread competes for the cores. */
  tcase_set_timeout (tc, 540);
  tcase_add_test (tc, test_inside_symlinks_still_work);
  tcase_add_test (tc, test_fifo_refused);
  tcase_add_test (tc, test_stale_temp_swept);
  tcase_add_test (tc, test_symlink_swap_race);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
