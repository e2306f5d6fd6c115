/* test-agent-files: write-file parts, ranged read-file and read-file-stream against the real
 * namzu-agent, each case over a unix socket (_i == 0) and TCP + token (_i == 1) (spec A.6.6,
 * A.6.7, A.6.9, C.7, C.8). */
#include <grp.h>
#include <sys/resource.h>

#include "agent-harness.h"
#include "nz-agent-ops.h"

static Agent *
start (int i, const char *const *extra)
{
  return agent_start_full (i == 1, extra);
}

static char *
b64 (const char *s)
{
  return g_base64_encode ((const guchar *)s, strlen (s));
}

/* One part: {path, content(b64), encoding, part:{offset, final?, renameTo?}}. */
static JsonObject *
send_part (Agent *a, const char *temp, const char *data, gint64 offset, const char *rename_to)
{
  g_autofree char *content = b64 (data);
  g_autofree char *body = NULL;

  if (rename_to != NULL)
    body = g_strdup_printf ("{\"path\":\"%s\",\"content\":\"%s\",\"encoding\":\"base64\","
                            "\"part\":{\"offset\":%" G_GINT64_FORMAT ",\"final\":true,"
                            "\"renameTo\":\"%s\"}}",
                            temp, content, offset, rename_to);
  else
    body = g_strdup_printf ("{\"path\":\"%s\",\"content\":\"%s\",\"encoding\":\"base64\","
                            "\"part\":{\"offset\":%" G_GINT64_FORMAT "}}",
                            temp, content, offset);
  return reply (a, "write-file", body);
}

static void
assert_file (Agent *a, const char *rel, const char *want)
{
  g_autofree char *path = ws_path (a, rel);
  g_autofree char *have = NULL;

  ck_assert_msg (g_file_get_contents (path, &have, NULL, NULL), "%s missing", rel);
  ck_assert_str_eq (have, want);
}

START_TEST (test_parts_roundtrip)
{
  Agent *a = start (_i, NULL);
  const char *temp = "d/.namzu-write-1234-t.txt.part";
  g_autofree char *target = ws_path (a, "d/t.txt");
  g_autofree char *temp_abs = ws_path (a, temp);
  struct stat st;

  /* An existing target keeps its mode across the replacement. */
  {
    g_autofree char *dir = g_path_get_dirname (target);

    ck_assert_int_eq (g_mkdir (dir, 0755), 0);
  }
  ck_assert (g_file_set_contents (target, "old", -1, NULL));
  ck_assert_int_eq (chmod (target, 0640), 0);
  {
    g_autoptr (JsonObject) r = send_part (a, temp, "hello ", 0, NULL);

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert_ptr_nonnull (nz_json_get_string (r, "guestBootId"));
    ck_assert_int_eq (member_int (r, "bytesWritten"), 6);
    ck_assert_int_eq (member_int (r, "sizeBytes"), 6);
  }
  /* Not final: the target is untouched. */
  assert_file (a, "d/t.txt", "old");
  {
    g_autoptr (JsonObject) r = send_part (a, temp, "wor", 6, NULL);

    ck_assert_int_eq (member_int (r, "sizeBytes"), 9);
  }
  {
    g_autoptr (JsonObject) r = send_part (a, temp, "ld", 9, "d/t.txt");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert_int_eq (member_int (r, "bytesWritten"), 2);
    ck_assert_int_eq (member_int (r, "sizeBytes"), 11);
  }
  assert_file (a, "d/t.txt", "hello world");
  ck_assert_int_ne (g_access (temp_abs, F_OK), 0);
  ck_assert_int_eq (stat (target, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0640);
  /* Offset 0 again truncates and starts over. */
  {
    g_autoptr (JsonObject) r1 = send_part (a, temp, "abcdef", 0, NULL);
    g_autoptr (JsonObject) r2 = send_part (a, temp, "xy", 0, NULL);

    ck_assert_int_eq (member_int (r2, "sizeBytes"), 2);
  }
  /* Utf8 content (no encoding) is the bytes of the string. */
  {
    g_autoptr (JsonObject) r = reply (a, "write-file",
                                      "{\"path\":\"d/.namzu-write-u-x.part\",\"content\":\"é\","
                                      "\"part\":{\"final\":true,\"renameTo\":\"d/u.txt\"}}");

    ck_assert_int_eq (member_int (r, "bytesWritten"), 2);
  }
  assert_file (a, "d/u.txt", "é");
  agent_stop (a);
}
END_TEST

START_TEST (test_parts_refusals)
{
  Agent *a = start (_i, NULL);
  const char *temp = ".namzu-write-r-f.part";
  g_autofree char *temp_abs = ws_path (a, temp);
  g_autofree char *outside = g_build_filename (a->dir, "outside.txt", NULL);
  g_autofree char *body = NULL;

  assert_reply_error (a, "write-file", "{\"path\":\"x\",\"content\":\"\",\"part\":[1]}",
                      "write_part_invalid_shape");
  assert_reply_error (a, "write-file", "{\"path\":\"x\",\"content\":\"\",\"part\":7}",
                      "write_part_invalid_shape");
  assert_reply_error (a, "write-file", "{\"path\":\".namzu-write-a.part\",\"part\":{}}",
                      "missing_path_or_content");
  assert_reply_error (a, "write-file", "{\"content\":\"x\",\"part\":{}}",
                      "missing_path_or_content");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-a.part\",\"content\":\"\",\"part\":{\"offset\":-1}}",
      "write_part_invalid_offset: -1");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-a.part\",\"content\":\"\",\"part\":{\"offset\":\"5\"}}",
      "write_part_invalid_offset: \"5\"");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-a.part\",\"content\":\"\",\"part\":{\"offset\":1.5}}",
      "write_part_invalid_offset: 1.5");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-a.part\",\"content\":\"\",\"part\":{\"final\":true}}",
      "write_part_missing_rename_target");
  /* Offsets must continue the temp exactly. */
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-r-f.part\",\"content\":\"x\",\"part\":{\"offset\":3}}",
      "write_part_offset_mismatch: temp file is absent, part starts at offset 3");
  {
    g_autoptr (JsonObject) r = send_part (a, temp, "abcd", 0, NULL);
  }
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-r-f.part\",\"content\":\"x\",\"part\":{\"offset\":3}}",
      "write_part_offset_mismatch: temp file is 4 bytes, part starts at offset 3");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-r-f.part\",\"content\":\"x\",\"part\":{\"offset\":5}}",
      "write_part_offset_mismatch: temp file is 4 bytes, part starts at offset 5");
  /* An escaping renameTo is refused before any byte is written: the temp stays 4 bytes. */
  body = g_strdup_printf ("{\"path\":\"%s\",\"content\":\"zz\",\"part\":{\"offset\":4,"
                          "\"final\":true,\"renameTo\":\"%s\"}}",
                          temp, outside);
  assert_reply_error (a, "write-file", body, "path escapes the workspace");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-r-f.part\",\"content\":\"zz\",\"part\":{\"offset\":4,"
      "\"final\":true,\"renameTo\":\"../x\"}}",
      "path escapes the workspace");
  {
    struct stat st;

    ck_assert_int_eq (stat (temp_abs, &st), 0);
    ck_assert_int_eq (st.st_size, 4);
    ck_assert_int_ne (g_access (outside, F_OK), 0);
  }
  /* A symlinked renameTo leading outside is the realpath refusal. */
  {
    g_autofree char *link = ws_path (a, "out");

    ck_assert_int_eq (symlink (a->dir, link), 0);
    assert_reply_error (
        a, "write-file",
        "{\"path\":\".namzu-write-r-f.part\",\"content\":\"zz\",\"part\":{\"offset\":4,"
        "\"final\":true,\"renameTo\":\"out/x\"}}",
        "symlink escapes the workspace");
  }
  assert_reply_error (a, "write-file",
                      "{\"path\":\"../.namzu-write-a.part\",\"content\":\"\",\"part\":{}}",
                      "path escapes the workspace");
  agent_stop (a);
}
END_TEST

START_TEST (test_parts_discard)
{
  Agent *a = start (_i, NULL);
  g_autofree char *temp_abs = ws_path (a, "sub/.namzu-write-9-f.part");
  g_autofree char *real = ws_path (a, "real.txt");
  g_autofree char *sneaky = ws_path (a, ".namzu-write-link.part");
  g_autofree char *missing_dir = ws_path (a, "nodir");

  /* Decided on the name alone. */
  assert_reply_error (a, "write-file",
                      "{\"path\":\"real.txt\",\"content\":\"\",\"part\":{\"discard\":true}}",
                      "write_part_not_a_temp_file");
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-.part\",\"content\":\"\",\"part\":{\"discard\":true}}",
      "write_part_not_a_temp_file");
  /* Absent file or parent: success, and nothing is created. */
  {
    g_autoptr (JsonObject) r = reply (
        a, "write-file",
        "{\"path\":\"nodir/.namzu-write-1-a.part\",\"content\":\"\",\"part\":{\"discard\":true}}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert (nz_json_get_bool (r, "discarded", FALSE));
    ck_assert (!json_object_has_member (r, "guestBootId"));
    ck_assert_int_ne (g_access (missing_dir, F_OK), 0);
  }
  /* A real temp goes; twice is fine. */
  {
    g_autofree char *dir = g_path_get_dirname (temp_abs);

    ck_assert_int_eq (g_mkdir (dir, 0755), 0);
  }
  ck_assert (g_file_set_contents (temp_abs, "partial", -1, NULL));
  for (int k = 0; k < 2; k++)
    {
      g_autoptr (JsonObject) r = reply (
          a, "write-file", "{\"path\":\"sub/.namzu-write-9-f.part\",\"part\":{\"discard\":true}}");

      ck_assert (nz_json_get_bool (r, "discarded", FALSE));
    }
  ck_assert_int_ne (g_access (temp_abs, F_OK), 0);
  /* A link named like a temp, pointing at a real file: refused on the real name. */
  ck_assert (g_file_set_contents (real, "keep", -1, NULL));
  ck_assert_int_eq (symlink (real, sneaky), 0);
  assert_reply_error (
      a, "write-file",
      "{\"path\":\".namzu-write-link.part\",\"content\":\"\",\"part\":{\"discard\":true}}",
      "write_part_not_a_temp_file");
  assert_file (a, "real.txt", "keep");
  agent_stop (a);
}
END_TEST

START_TEST (test_read_ranges)
{
  Agent *a = start (_i, (const char *const[]){ "NAMZU_SANDBOX_READ_ROOTS=/proc",
                                               "NAMZU_AGENT_READ_FILE_RANGE_BYTES=16", NULL });
  g_autofree char *file = ws_path (a, "r.bin");
  g_autofree char *proc_body = NULL;

  ck_assert (g_file_set_contents (file, "0123456789abcdefghij", -1, NULL));
  {
    g_autoptr (JsonObject) r = reply (
        a, "read-file", "{\"path\":\"r.bin\",\"encoding\":\"base64\",\"offset\":3,\"length\":4}");
    gsize n = 0;
    g_autofree guchar *data = g_base64_decode (nz_json_get_string (r, "content"), &n);

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert_ptr_nonnull (nz_json_get_string (r, "guestBootId"));
    ck_assert_uint_eq (n, 4);
    ck_assert (memcmp (data, "3456", 4) == 0);
    ck_assert_int_eq (member_int (r, "sizeBytes"), 20);
    ck_assert_int_eq (member_int (r, "offset"), 3);
    ck_assert_int_eq (member_int (r, "bytesRead"), 4);
    ck_assert_str_eq (nz_json_get_string (r, "encoding"), "base64");
  }
  /* Short at EOF; past EOF is an empty success. */
  {
    g_autoptr (JsonObject) r = reply (
        a, "read-file", "{\"path\":\"r.bin\",\"encoding\":\"base64\",\"offset\":18,\"length\":10}");

    ck_assert_int_eq (member_int (r, "bytesRead"), 2);
  }
  {
    g_autoptr (JsonObject) r = reply (
        a, "read-file", "{\"path\":\"r.bin\",\"encoding\":\"base64\",\"offset\":99,\"length\":1}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert_int_eq (member_int (r, "bytesRead"), 0);
    ck_assert_str_eq (nz_json_get_string (r, "content"), "");
    ck_assert_int_eq (member_int (r, "sizeBytes"), 20);
  }
  /* Refused on the requested length, before reading. */
  assert_reply_error (a, "read-file", "{\"path\":\"r.bin\",\"encoding\":\"base64\",\"length\":17}",
                      "read_file_range_too_large: length 17 exceeds 16 bytes "
                      "(NAMZU_AGENT_READ_FILE_RANGE_BYTES); use read-file-stream");
  assert_reply_error (a, "read-file", "{\"path\":\"r.bin\",\"offset\":1,\"length\":2}",
                      "read_file_range_requires_base64: a ranged read-file must ask for encoding "
                      "\"base64\"");
  assert_reply_error (a, "read-file",
                      "{\"path\":\"r.bin\",\"encoding\":\"base64\",\"offset\":-1,\"length\":2}",
                      "invalid_range: offset and length must be safe integers >= 0");
  assert_reply_error (a, "read-file",
                      "{\"path\":\"r.bin\",\"encoding\":\"base64\",\"offset\":0,\"length\":\"2\"}",
                      "invalid_range: offset and length must be safe integers >= 0");
  assert_reply_error (a, "read-file", "{\"encoding\":\"base64\",\"offset\":0}", "missing_path");
  assert_reply_error (a, "read-file", "{\"path\":\"../x\",\"encoding\":\"base64\",\"offset\":0}",
                      "path escapes the workspace");
  /* procfs: stat says 0 bytes; the real size comes from reading to EOF. */
  proc_body = g_strdup_printf (
      "{\"path\":\"/proc/%d/cmdline\",\"encoding\":\"base64\",\"offset\":0,\"length\":16}",
      (int)a->pid);
  {
    g_autoptr (JsonObject) r = reply (a, "read-file", proc_body);
    gsize n = 0;
    g_autofree guchar *data = g_base64_decode (nz_json_get_string (r, "content"), &n);

    ck_assert_msg (nz_json_get_bool (r, "ok", FALSE), "%s", nz_json_get_string (r, "error"));
    ck_assert_int_gt (member_int (r, "sizeBytes"), 0);
    ck_assert_int_eq (member_int (r, "bytesRead"), (gint64)n);
    ck_assert_uint_gt (n, 0);
  }
  agent_stop (a);
}
END_TEST

typedef struct
{
  JsonObject *meta;
  JsonObject *end;
  GByteArray *data;
  char *error;
  guint data_frames;
  gboolean terminated;
} StreamRun;

static void
stream_run_free (StreamRun *r)
{
  g_clear_pointer (&r->meta, json_object_unref);
  g_clear_pointer (&r->end, json_object_unref);
  g_byte_array_unref (r->data);
  g_free (r->error);
  g_free (r);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (StreamRun, stream_run_free)

static StreamRun *
read_stream (Agent *a, const char *body)
{
  g_autoptr (GPtrArray) frames = request (a, "read-file-stream", body);
  StreamRun *r = g_new0 (StreamRun, 1);

  r->data = g_byte_array_new ();
  for (guint k = 0; k < frames->len; k++)
    {
      const char *f = frames->pdata[k];
      g_autoptr (JsonObject) o = NULL;
      const char *type;

      if (*f == '\0')
        {
          ck_assert_uint_eq (k, frames->len - 1);
          r->terminated = TRUE;
          continue;
        }
      o = parse (f);
      type = nz_json_get_string (o, "type");
      /* No boot id on any read-file-stream frame (spec A.10). */
      ck_assert (!json_object_has_member (o, "guestBootId"));
      if (g_str_equal (type, "meta"))
        r->meta = g_steal_pointer (&o);
      else if (g_str_equal (type, "data"))
        {
          gsize n = 0;
          g_autofree guchar *d = g_base64_decode (nz_json_get_string (o, "data"), &n);
          g_autofree char *exact = g_strdup_printf ("{\"type\":\"data\",\"data\":\"%s\"}",
                                                    nz_json_get_string (o, "data"));

          /* Byte-exact shape and key order. */
          ck_assert_str_eq (f, exact);
          g_byte_array_append (r->data, d, (guint)n);
          r->data_frames++;
        }
      else if (g_str_equal (type, "end"))
        r->end = g_steal_pointer (&o);
      else if (g_str_equal (type, "error"))
        r->error = g_strdup (nz_json_get_string (o, "error"));
      else
        ck_abort_msg ("unexpected frame %s", f);
    }
  ck_assert (r->terminated);
  return r;
}

START_TEST (test_read_stream)
{
  Agent *a = start (_i, (const char *const[]){ "NAMZU_SANDBOX_READ_ROOTS=/proc",
                                               "NAMZU_AGENT_READ_FILE_STREAM_CHUNK_BYTES=1000",
                                               "NAMZU_AGENT_READ_FILE_RANGE_BYTES=10", NULL });
  g_autofree char *file = ws_path (a, "big.bin");
  g_autofree guint8 *content = g_malloc (5000);
  g_autofree char *proc_body = NULL;

  for (int k = 0; k < 5000; k++)
    content[k] = (guint8)(k * 7 + 3);
  ck_assert (g_file_set_contents (file, (const char *)content, 5000, NULL));
  {
    /* The range cap does not apply to streams. */
    g_autoptr (StreamRun) r = read_stream (a, "{\"path\":\"big.bin\"}");

    ck_assert_ptr_null (r->error);
    ck_assert_int_eq (member_int (r->meta, "sizeBytes"), 5000);
    ck_assert_int_eq (member_int (r->meta, "offset"), 0);
    ck_assert_int_eq (member_int (r->meta, "length"), 5000);
    ck_assert_uint_eq (r->data_frames, 5);
    ck_assert_uint_eq (r->data->len, 5000);
    ck_assert (memcmp (r->data->data, content, 5000) == 0);
    ck_assert_int_eq (member_int (r->end, "bytesSent"), 5000);
  }
  {
    g_autoptr (StreamRun) r
        = read_stream (a, "{\"path\":\"big.bin\",\"offset\":4990,\"length\":100}");

    ck_assert_int_eq (member_int (r->meta, "length"), 10);
    ck_assert_uint_eq (r->data->len, 10);
    ck_assert (memcmp (r->data->data, content + 4990, 10) == 0);
    ck_assert_int_eq (member_int (r->end, "bytesSent"), 10);
  }
  {
    g_autoptr (StreamRun) r = read_stream (a, "{\"path\":\"big.bin\",\"offset\":9000}");

    ck_assert_int_eq (member_int (r->meta, "length"), 0);
    ck_assert_uint_eq (r->data_frames, 0);
    ck_assert_int_eq (member_int (r->end, "bytesSent"), 0);
  }
  assert_stream_error (a, "read-file-stream", "{}", "missing_path");
  assert_stream_error (a, "read-file-stream", "{\"path\":\"../x\"}", "path escapes the workspace");
  assert_stream_error (a, "read-file-stream", "{\"path\":\"big.bin\",\"offset\":-2}",
                       "invalid_range: offset and length must be safe integers >= 0");
  {
    g_autofree char *missing = ws_path (a, "nope");
    g_autofree char *msg
        = g_strdup_printf ("ENOENT: no such file or directory, realpath '%s'", missing);

    (void)msg;
    {
      g_autoptr (StreamRun) r = read_stream (a, "{\"path\":\"nope\"}");

      ck_assert_ptr_nonnull (r->error);
      ck_assert (g_str_has_prefix (r->error, "ENOENT: no such file or directory"));
    }
  }
  /* Regular files only. */
  {
    g_autofree char *adir = ws_path (a, "adir");

    ck_assert_int_eq (g_mkdir (adir, 0755), 0);
  }
  assert_stream_error (a, "read-file-stream", "{\"path\":\"adir\"}",
                       "EISDIR: is a directory, read");
  {
    g_autofree char *fifo = ws_path (a, "fifo");
    g_autofree char *want = NULL;
    g_autofree char *real = NULL;

    ck_assert_int_eq (mkfifo (fifo, 0600), 0);
    real = realpath (fifo, NULL);
    want = g_strdup_printf ("not_a_regular_file: '%s'", real);
    assert_stream_error (a, "read-file-stream", "{\"path\":\"fifo\"}", want);
  }
  /* procfs zero-size file: read whole first. */
  proc_body = g_strdup_printf ("{\"path\":\"/proc/%d/status\"}", (int)a->pid);
  {
    g_autoptr (StreamRun) r = read_stream (a, proc_body);

    ck_assert_int_gt (member_int (r->meta, "sizeBytes"), 0);
    ck_assert_int_eq (member_int (r->end, "bytesSent"), member_int (r->meta, "sizeBytes"));
    ck_assert (g_str_has_prefix ((const char *)r->data->data, "Name:"));
  }
  agent_stop (a);
}
END_TEST

/* Counts the agent's fds that point at @path. */
static guint
agent_fds_on (Agent *a, const char *path)
{
  g_autofree char *dir = g_strdup_printf ("/proc/%d/fd", (int)a->pid);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint count = 0;

  ck_assert_ptr_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *link = g_build_filename (dir, name, NULL);
      g_autofree char *target = g_file_read_link (link, NULL);

      if (target != NULL && g_str_equal (target, path))
        count++;
    }
  return count;
}

/* A reader that stops reading stalls the stream (bounded memory), and one that hangs up
 * makes the agent close the file. */
START_TEST (test_read_stream_backpressure)
{
  Agent *a = start (_i, NULL);
  g_autofree char *file = ws_path (a, "huge.bin");
  g_autofree char *real = NULL;
  g_autofree char *json = envelope (a, "read-file-stream", "{\"path\":\"huge.bin\"}");
  int fd;
  gint64 rss_before;
  int out = open (file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  guint8 chunk[65536];

  memset (chunk, 'z', sizeof chunk);
  for (int k = 0; k < 64 * 16; k++) /* 64 MiB */
    ck_assert_int_eq (write (out, chunk, sizeof chunk), (ssize_t)sizeof chunk);
  close (out);
  real = realpath (file, NULL);
  assert_healthy (a);
  rss_before = vm_rss_kib (a->pid);
  fd = agent_connect (a);
  send_frame (fd, json);
  /* Read only a little, then stall: the agent must not buffer the file. */
  ck_assert_int_gt (recv (fd, chunk, sizeof chunk, 0), 0);
  g_usleep (500000);
  assert_rss_growth (a->pid, rss_before, 8 * 1024);
  ck_assert_uint_eq (agent_fds_on (a, real), 1);
  /* Other clients are served meanwhile. */
  assert_healthy (a);
  close (fd);
  for (int k = 0; k < 100 && agent_fds_on (a, real) > 0; k++)
    g_usleep (20000);
  ck_assert_uint_eq (agent_fds_on (a, real), 0);
  agent_stop (a);
}
END_TEST

/* A file size limit makes pwrite stop short: the part (and the whole-body write) must say so,
 * never rename a truncated file into place. */
static void
limit_file_size (gpointer user_data)
{
  struct rlimit rl = { 100, 100 };

  signal (SIGXFSZ, SIG_IGN);
  setrlimit (RLIMIT_FSIZE, &rl);
}

START_TEST (test_short_write)
{
  Agent *a;
  g_autofree char *content = g_malloc0 (151);
  g_autofree char *body = NULL;
  g_autofree char *target = NULL;

  agent_child_setup = limit_file_size;
  a = start (_i, NULL);
  agent_child_setup = NULL;
  memset (content, 'w', 150);
  body = g_strdup_printf ("{\"path\":\".namzu-write-s-t.part\",\"content\":\"%s\",\"part\":"
                          "{\"offset\":0,\"final\":true,\"renameTo\":\"t.txt\"}}",
                          content);
  assert_reply_error (a, "write-file", body,
                      "write_part_short_write: wrote 100 of 150 bytes at offset 0, temp file is "
                      "100 bytes");
  target = ws_path (a, "t.txt");
  ck_assert_int_ne (g_access (target, F_OK), 0);
  g_clear_pointer (&body, g_free);
  body = g_strdup_printf ("{\"path\":\"t.txt\",\"content\":\"%s\"}", content);
  assert_reply_error (a, "write-file", body,
                      "write_short_write: wrote 100 of 150 bytes, temp file is 100 bytes");
  ck_assert_int_ne (g_access (target, F_OK), 0);
  agent_stop (a);
}
END_TEST

/* The final part copies the target's mode onto the temp; when that chmod fails the write is
 * refused, nothing is renamed and the temp stays for discard (spec A.6.9 step 12, C.8). An
 * agent running as nobody cannot chmod a temp that root owns (mode 0666, so it can still
 * write it). */
static void
become_nobody (gpointer user_data)
{
  /* Root's directory must admit nobody: the socket and the workspace are under it. */
  if (chmod (agent_child_dir, 0777) != 0 || setgroups (0, NULL) != 0 || setgid (65534) != 0
      || setuid (65534) != 0)
    _exit (125);
}

START_TEST (test_final_part_chmod_refused)
{
  Agent *a;
  g_autofree char *temp = NULL, *target = NULL, *want = NULL;
  g_autoptr (JsonObject) r = NULL;
  const char *error;

  nz_test_require (geteuid () == 0, "root, to own a file the agent (as nobody) cannot chmod");
  agent_child_setup = become_nobody;
  a = start (_i, NULL);
  agent_child_setup = NULL;
  ck_assert_int_eq (chmod (a->ws, 0777), 0);
  temp = ws_path (a, ".namzu-write-c-t.part");
  target = ws_path (a, "t.txt");
  ck_assert (g_file_set_contents (target, "old", -1, NULL));
  ck_assert_int_eq (chmod (target, 0640), 0);
  ck_assert (g_file_set_contents (temp, "", -1, NULL));
  ck_assert_int_eq (chmod (temp, 0666), 0);
  r = send_part (a, ".namzu-write-c-t.part", "new", 0, "t.txt");
  ck_assert (!nz_json_get_bool (r, "ok", TRUE));
  error = nz_json_get_string (r, "error");
  want = g_strdup_printf ("EPERM: operation not permitted, chmod '%s'", temp);
  ck_assert_str_eq (error, want);
  /* Nothing renamed: the target keeps its bytes; the temp keeps the part for discard. */
  assert_file (a, "t.txt", "old");
  assert_file (a, ".namzu-write-c-t.part", "new");
  agent_stop (a);
}
END_TEST

/* ---- file-ops: list-files, walk-files, stat-file, remove-file, move-file ---- */

static void
put (Agent *a, const char *rel, const char *data)
{
  g_autofree char *path = ws_path (a, rel);
  g_autofree char *dir = g_path_get_dirname (path);

  ck_assert_int_eq (g_mkdir_with_parents (dir, 0755), 0);
  ck_assert (g_file_set_contents (path, data, -1, NULL));
}

/* The tree: f1.txt, a/b/c.txt, a/.hidden/h.txt, .top, lf -> f1.txt, ld -> a, etc -> /etc,
 * out -> ../ (the agent's own directory, outside the workspace). */
static void
make_tree (Agent *a)
{
  g_autofree char *lf = ws_path (a, "lf");
  g_autofree char *ld = ws_path (a, "ld");
  g_autofree char *etc = ws_path (a, "etc");
  g_autofree char *out = ws_path (a, "out");

  put (a, "f1.txt", "one");
  put (a, "a/b/c.txt", "three");
  put (a, "a/.hidden/h.txt", "h");
  put (a, ".top", "t");
  ck_assert_int_eq (symlink ("f1.txt", lf), 0);
  ck_assert_int_eq (symlink ("a", ld), 0);
  ck_assert_int_eq (symlink ("/etc", etc), 0);
  ck_assert_int_eq (symlink ("..", out), 0);
}

static JsonObject *
find_entry (JsonObject *r, const char *path)
{
  JsonArray *entries = nz_json_get_array (r, "entries");

  ck_assert (entries != NULL);
  for (guint i = 0; i < json_array_get_length (entries); i++)
    {
      JsonObject *e = json_array_get_object_element (entries, i);

      if (g_strcmp0 (nz_json_get_string (e, "path"), path) == 0)
        return e;
    }
  return NULL;
}

static guint
n_entries (JsonObject *r)
{
  return json_array_get_length (nz_json_get_array (r, "entries"));
}

START_TEST (test_fs_walk)
{
  Agent *a = start (_i, NULL);
  g_autofree char *c = NULL, *f1 = NULL, *h = NULL, *top = NULL, *lf = NULL, *dir_a = NULL;
  g_autoptr (JsonObject) r = NULL;
  g_autoptr (JsonObject) hidden = NULL;
  g_autoptr (JsonObject) shallow = NULL;
  g_autoptr (JsonObject) bounded = NULL;
  g_autoptr (JsonObject) listed = NULL;
  g_autoptr (JsonObject) missing = NULL;
  g_autoptr (JsonObject) pattern = NULL;
  JsonObject *e;

  make_tree (a);
  c = ws_path (a, "a/b/c.txt");
  f1 = ws_path (a, "f1.txt");
  h = ws_path (a, "a/.hidden/h.txt");
  top = ws_path (a, ".top");
  lf = ws_path (a, "lf");
  dir_a = ws_path (a, "a");

  /* walk-files: regular files only, absolute paths with sizes; links neither reported as the
   * file they name nor descended (ld -> a, etc -> /etc, out -> ..). */
  r = reply (a, "walk-files", "{\"root\":\".\"}");
  ck_assert (nz_json_get_bool (r, "ok", FALSE));
  ck_assert_str_eq (nz_json_get_string (r, "root"), a->ws);
  ck_assert_msg (n_entries (r) == 2, "walk gave %u entries", n_entries (r));
  ck_assert ((e = find_entry (r, c)) != NULL);
  ck_assert_int_eq (member_int (e, "size"), 5);
  ck_assert_str_eq (nz_json_get_string (e, "type"), "file");
  ck_assert (find_entry (r, f1) != NULL);
  ck_assert (!nz_json_get_bool (r, "truncated", TRUE));

  /* includeHidden lets dot names in, and their directories be descended. */
  hidden = reply (a, "walk-files", "{\"root\":\".\",\"includeHidden\":true}");
  ck_assert (find_entry (hidden, h) != NULL && find_entry (hidden, top) != NULL);
  ck_assert_uint_eq (n_entries (hidden), 4);

  /* maxDepth counts direct children as depth 1. */
  shallow = reply (a, "walk-files", "{\"root\":\".\",\"maxDepth\":1}");
  ck_assert_uint_eq (n_entries (shallow), 1);
  ck_assert (find_entry (shallow, f1) != NULL);

  /* maxEntries bounds the listing and says it did. */
  bounded = reply (a, "walk-files", "{\"root\":\".\",\"maxEntries\":1}");
  ck_assert_uint_eq (n_entries (bounded), 1);
  ck_assert (nz_json_get_bool (bounded, "truncated", FALSE));

  /* list-files: every type, one level by default; a link is reported with its target, as
   * a link. */
  listed = reply (a, "list-files", "{\"root\":\".\"}");
  ck_assert ((e = find_entry (listed, lf)) != NULL);
  ck_assert_str_eq (nz_json_get_string (e, "type"), "symlink");
  ck_assert_str_eq (nz_json_get_string (e, "target"), "f1.txt");
  ck_assert ((e = find_entry (listed, dir_a)) != NULL);
  ck_assert_str_eq (nz_json_get_string (e, "type"), "directory");
  ck_assert (find_entry (listed, c) == NULL);
  ck_assert_uint_eq (n_entries (listed), 6); /* f1.txt a lf ld etc out */

  pattern
      = reply (a, "walk-files", "{\"root\":\".\",\"pattern\":\"*.txt\",\"includeHidden\":true}");
  ck_assert_uint_eq (n_entries (pattern), 3);

  /* A root that does not exist is an empty walk, not a failure. */
  missing = reply (a, "walk-files", "{\"root\":\"no/such/dir\"}");
  ck_assert (nz_json_get_bool (missing, "ok", FALSE));
  ck_assert_uint_eq (n_entries (missing), 0);

  /* The examined-entry budget: every entry looked at counts, hidden or not. */
  {
    g_autoptr (JsonObject) lim
        = reply (a, "walk-files", "{\"root\":\".\",\"maxVisitedEntries\":4}");

    ck_assert (!nz_json_get_bool (lim, "ok", TRUE));
    ck_assert_msg (g_str_has_prefix (nz_json_get_string (lim, "error"),
                                     "file_walk_limit: examined more than 4 entries"),
                   "%s", nz_json_get_string (lim, "error"));
  }
  /* Escapes: lexical, and through a root that is a symlink leading out. */
  assert_reply_error (a, "walk-files", "{\"root\":\"../\"}", "path escapes the workspace");
  assert_reply_error (a, "list-files", "{\"root\":\"etc\"}", "symlink escapes the workspace");
  assert_reply_error (a, "list-files", "{\"root\":\"out\"}", "symlink escapes the workspace");
  assert_reply_error (a, "list-files", "{}", "invalid_root: root must be a non-empty string");
  assert_reply_error (a, "walk-files", "{\"root\":\".\",\"maxDepth\":0}",
                      "invalid_maxDepth: maxDepth must be an integer in [1, 128]");
  assert_reply_error (a, "walk-files", "{\"root\":\".\",\"maxEntries\":\"5\"}",
                      "invalid_maxEntries: maxEntries must be an integer in [1, 100000]");
  assert_reply_error (a, "walk-files", "{\"root\":\"a\\u0000x\"}", NZ_JSON_NUL_UNSUPPORTED);
  agent_stop (a);
}
END_TEST

START_TEST (test_fs_stat_remove_move)
{
  Agent *a = start (_i, NULL);
  g_autofree char *lf = NULL, *f1 = NULL, *etc = NULL, *moved = NULL;
  g_autoptr (JsonObject) st = NULL;
  g_autoptr (JsonObject) st_root = NULL;
  JsonObject *e;

  make_tree (a);
  lf = ws_path (a, "lf");
  f1 = ws_path (a, "f1.txt");
  etc = ws_path (a, "etc");

  /* stat-file is lstat: a link is a link, even one that leads out of the jail. */
  st = reply (a, "stat-file", "{\"path\":\"etc\"}");
  ck_assert (nz_json_get_bool (st, "ok", FALSE));
  e = nz_json_get_object (st, "entry");
  ck_assert_str_eq (nz_json_get_string (e, "type"), "symlink");
  ck_assert_str_eq (nz_json_get_string (e, "target"), "/etc");
  st_root = reply (a, "stat-file", "{\"path\":\".\"}");
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (st_root, "entry"), "type"),
                    "directory");
  assert_reply_error (a, "stat-file", "{\"path\":\"etc/passwd\"}", "symlink escapes the workspace");
  assert_reply_error (a, "stat-file", "{\"path\":\"../x\"}", "path escapes the workspace");
  assert_reply_error (a, "stat-file", "{}", "missing_path");
  {
    g_autofree char *want = NULL;
    g_autofree char *nope = ws_path (a, "nope");
    g_autoptr (JsonObject) r = reply (a, "stat-file", "{\"path\":\"nope\"}");

    want = g_strdup_printf ("ENOENT: no such file or directory, lstat '%s'", nope);
    ck_assert_str_eq (nz_json_get_string (r, "error"), want);
  }

  /* remove-file removes a link itself, never what it names. */
  {
    g_autoptr (JsonObject) r = reply (a, "remove-file", "{\"path\":\"lf\"}");

    ck_assert (nz_json_get_bool (r, "removed", FALSE));
    ck_assert (g_access (f1, F_OK) == 0 && g_access (lf, F_OK) != 0);
  }
  {
    g_autoptr (JsonObject) r = reply (a, "remove-file", "{\"path\":\"etc\"}");

    ck_assert (nz_json_get_bool (r, "removed", FALSE));
    ck_assert (g_access ("/etc/passwd", F_OK) == 0);
  }
  /* Nothing below a link that leads out, and no root of the jail. */
  assert_reply_error (a, "remove-file", "{\"path\":\"out/x\",\"recursive\":true}",
                      "symlink escapes the workspace");
  assert_reply_error (a, "remove-file", "{\"path\":\"../x\"}", "path escapes the workspace");
  assert_reply_error (a, "remove-file", "{\"path\":\".\",\"recursive\":true}",
                      "remove_refused: a root of the workspace jail cannot be removed");
  {
    g_autoptr (JsonObject) r = reply (a, "remove-file", "{\"path\":\"a\"}");

    ck_assert (!nz_json_get_bool (r, "ok", TRUE));
    ck_assert (g_str_has_prefix (nz_json_get_string (r, "error"), "ENOTEMPTY:"));
  }
  {
    g_autoptr (JsonObject) gone = reply (a, "remove-file", "{\"path\":\"nope/x\"}");

    ck_assert (nz_json_get_bool (gone, "ok", FALSE) && !nz_json_get_bool (gone, "removed", TRUE));
  }

  /* move-file: both sides jailed; a link moves as a link; nothing leaves the workspace. */
  assert_reply_error (a, "move-file", "{\"from\":\"f1.txt\",\"to\":\"../x\"}",
                      "path escapes the workspace");
  assert_reply_error (a, "move-file", "{\"from\":\"../x\",\"to\":\"y\"}",
                      "path escapes the workspace");
  assert_reply_error (a, "move-file", "{\"from\":\"f1.txt\",\"to\":\"out/x\"}",
                      "symlink escapes the workspace");
  assert_reply_error (a, "move-file", "{\"from\":\"out/x\",\"to\":\"y\"}",
                      "symlink escapes the workspace");
  assert_reply_error (a, "move-file", "{\"from\":\"f1.txt\",\"to\":\".\"}",
                      "move_refused: a root of the workspace jail cannot be moved or replaced");
  assert_reply_error (a, "move-file", "{\"from\":\"f1.txt\"}", "missing_from_or_to");
  {
    g_autoptr (JsonObject) r = reply (a, "move-file", "{\"from\":\"ld\",\"to\":\"a/b/ld2\"}");
    g_autofree char *ld2 = ws_path (a, "a/b/ld2");
    struct stat sb;

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert (lstat (ld2, &sb) == 0 && S_ISLNK (sb.st_mode));
  }
  {
    g_autoptr (JsonObject) r = reply (a, "move-file", "{\"from\":\"f1.txt\",\"to\":\"a/m.txt\"}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    assert_file (a, "a/m.txt", "one");
  }
  /* A link named as the target is replaced, not written through. */
  {
    g_autoptr (JsonObject) r = reply (a, "move-file", "{\"from\":\"a/m.txt\",\"to\":\"etc2\"}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
  }
  {
    g_autoptr (JsonObject) r = NULL;
    g_autofree char *etc3 = ws_path (a, "etc3");

    ck_assert_int_eq (symlink ("/tmp/namzu-never-written", etc3), 0);
    r = reply (a, "move-file", "{\"from\":\"etc2\",\"to\":\"etc3\"}");
    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    assert_file (a, "etc3", "one");
    ck_assert (g_access ("/tmp/namzu-never-written", F_OK) != 0);
  }
  {
    g_autoptr (JsonObject) r = reply (a, "remove-file", "{\"path\":\"a\",\"recursive\":true}");
    g_autofree char *dir_a = ws_path (a, "a");

    ck_assert (nz_json_get_bool (r, "removed", FALSE));
    ck_assert (g_access (dir_a, F_OK) != 0);
  }
  (void)moved;
  (void)etc;
  agent_stop (a);
}
END_TEST

/* ---- file-tree-ops: make-directory, make-symlink, set-file-mode ---- */

static guint
mode_of (Agent *a, const char *rel)
{
  g_autofree char *path = ws_path (a, rel);
  struct stat sb;

  ck_assert_msg (lstat (path, &sb) == 0, "%s", rel);
  return sb.st_mode & 07777;
}

/* The reply's error, starting with @prefix (the errno part carries the agent's own path). */
static void
assert_error_prefix (Agent *a, const char *op, const char *body, const char *prefix)
{
  g_autoptr (JsonObject) r = reply (a, op, body);
  const char *err = nz_json_get_string (r, "error");

  ck_assert_msg (!nz_json_get_bool (r, "ok", TRUE) && err != NULL && g_str_has_prefix (err, prefix),
                 "%s %s: %s, not %s...", op, body, err, prefix);
}

START_TEST (test_fs_tree_ops)
{
  Agent *a = start (_i, NULL);
  g_autofree char *f1 = ws_path (a, "f1.txt");
  char link[256] = { 0 };
  struct stat etc_before, etc_after;

  make_tree (a);
  ck_assert_int_eq (stat ("/etc", &etc_before), 0);
  /* make-directory: mkdir -p, the exact bits whatever the umask, on an existing one too. */
  {
    g_autoptr (JsonObject) r = reply (a, "make-directory", "{\"path\":\"n/m\",\"mode\":448}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert (nz_json_get_bool (r, "created", FALSE));
    ck_assert (g_str_has_suffix (nz_json_get_string (r, "path"), "/n/m"));
    ck_assert_uint_eq (mode_of (a, "n/m"), 0700);
  }
  {
    g_autoptr (JsonObject) r = reply (a, "make-directory", "{\"path\":\"n/m\",\"mode\":511}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert (!nz_json_get_bool (r, "created", TRUE));
    ck_assert_uint_eq (mode_of (a, "n/m"), 0777);
  }
  assert_error_prefix (a, "make-directory", "{\"path\":\"f1.txt\"}", "EEXIST: file exists, mkdir");
  /* A link to a directory is not a directory here: never made into one, never followed. */
  assert_error_prefix (a, "make-directory", "{\"path\":\"etc\",\"mode\":511}",
                       "EEXIST: file exists, mkdir");
  assert_reply_error (a, "make-directory", "{\"path\":\"out/x\"}", "symlink escapes the workspace");
  assert_reply_error (a, "make-directory", "{\"path\":\"../x\"}", "path escapes the workspace");
  assert_reply_error (a, "make-directory", "{\"path\":\".\",\"mode\":511}",
                      "mode_refused: a root of the workspace jail cannot be changed");
  assert_reply_error (a, "make-directory", "{\"path\":\"x\",\"mode\":2541}",
                      "invalid_mode: mode must be an integer in [0, 511]");
  assert_reply_error (a, "make-directory", "{\"mode\":448}", "missing_path");
  /* A number no integer type holds is refused, never cast. */
  assert_reply_error (a, "make-directory", "{\"path\":\"x\",\"mode\":1e300}",
                      "invalid_mode: mode must be an integer in [0, 511]");
  /* make-symlink: the target is text; a file there is replaced, a directory is not. */
  {
    g_autoptr (JsonObject) r
        = reply (a, "make-symlink", "{\"path\":\"s1\",\"target\":\"/etc/passwd\"}");
    g_autofree char *s1 = ws_path (a, "s1");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert_int_eq (readlink (s1, link, sizeof link - 1), strlen ("/etc/passwd"));
    ck_assert_str_eq (link, "/etc/passwd");
  }
  {
    g_autoptr (JsonObject) r = reply (a, "make-symlink", "{\"path\":\"f1.txt\",\"target\":\"a\"}");
    struct stat sb;

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert (lstat (f1, &sb) == 0 && S_ISLNK (sb.st_mode));
  }
  assert_error_prefix (a, "make-symlink", "{\"path\":\"a\",\"target\":\"x\"}",
                       "EEXIST: file exists, symlink");
  assert_reply_error (a, "make-symlink", "{\"path\":\"out/s\",\"target\":\"x\"}",
                      "symlink escapes the workspace");
  assert_reply_error (a, "make-symlink", "{\"path\":\"s2\"}",
                      "invalid_target: target must be a non-empty string of at most 4095 bytes");
  assert_error_prefix (a, "make-symlink", "{\"path\":\"nope/s\",\"target\":\"x\"}", "ENOENT:");
  /* set-file-mode: the entry itself; a link is refused and what it names keeps its bits. */
  {
    g_autoptr (JsonObject) r = reply (a, "set-file-mode", "{\"path\":\"a/b/c.txt\",\"mode\":384}");

    ck_assert (nz_json_get_bool (r, "ok", FALSE));
    ck_assert_uint_eq (mode_of (a, "a/b/c.txt"), 0600);
  }
  assert_error_prefix (a, "set-file-mode", "{\"path\":\"etc\",\"mode\":511}", "EOPNOTSUPP:");
  assert_error_prefix (a, "set-file-mode", "{\"path\":\"ld\",\"mode\":0}", "EOPNOTSUPP:");
  ck_assert_uint_eq (mode_of (a, "a") & 0700, 0700);
  assert_reply_error (a, "set-file-mode", "{\"path\":\"a\"}", "missing_mode");
  assert_reply_error (a, "set-file-mode", "{\"path\":\".\",\"mode\":0}",
                      "mode_refused: a root of the workspace jail cannot be changed");
  assert_reply_error (a, "set-file-mode", "{\"path\":\"../x\",\"mode\":0}",
                      "path escapes the workspace");
  assert_reply_error (a, "set-file-mode", "{\"path\":\"out/x\",\"mode\":0}",
                      "symlink escapes the workspace");
  ck_assert_int_eq (stat ("/etc", &etc_after), 0);
  ck_assert_uint_eq (etc_after.st_mode, etc_before.st_mode);
  agent_stop (a);
}
END_TEST

/* The test-only knob hides file-ops: not advertised, and its ops are unknown. */
START_TEST (test_fs_hidden)
{
  static const char *const env[]
      = { "NAMZU_AGENT_TEST_HIDE_FEATURES=file-ops,file-tree-ops", NULL };
  Agent *a = start (_i, env);
  g_autoptr (JsonObject) h = reply (a, "healthz", NULL);
  JsonArray *f = nz_json_get_array (h, "features");

  for (guint k = 0; k < json_array_get_length (f); k++)
    {
      ck_assert_str_ne (json_array_get_string_element (f, k), "file-ops");
      ck_assert_str_ne (json_array_get_string_element (f, k), "file-tree-ops");
    }
  ck_assert_uint_ge (json_array_get_length (f), 6);
  assert_reply_error (a, "walk-files", "{\"root\":\".\"}", "unknown_op: walk-files");
  assert_reply_error (a, "make-directory", "{\"path\":\"x\"}", "unknown_op: make-directory");
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-files");
  TCase *tc = tcase_create ("files");

  tcase_set_timeout (tc, 60);
  tcase_add_loop_test (tc, test_parts_roundtrip, 0, 2);
  tcase_add_loop_test (tc, test_parts_refusals, 0, 2);
  tcase_add_loop_test (tc, test_parts_discard, 0, 2);
  tcase_add_loop_test (tc, test_read_ranges, 0, 2);
  tcase_add_loop_test (tc, test_read_stream, 0, 2);
  tcase_add_loop_test (tc, test_read_stream_backpressure, 0, 2);
  tcase_add_loop_test (tc, test_short_write, 0, 2);
  tcase_add_loop_test (tc, test_final_part_chmod_refused, 0, 2);
  tcase_add_loop_test (tc, test_fs_walk, 0, 2);
  tcase_add_loop_test (tc, test_fs_stat_remove_move, 0, 2);
  tcase_add_loop_test (tc, test_fs_tree_ops, 0, 2);
  tcase_add_loop_test (tc, test_fs_hidden, 0, 2);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
