#include "nz-agent-fileops.h"

#include <string.h>

#include "nz-errors.h"
#include "nz-fileparts.h"
#include "nz-fileread.h"
#include "nz-jail.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"
#include "nz-request.h"

/* Not in the reference's error catalogue (it names no text for this); ours, stable. */
#define RANGE_NEEDS_BASE64 "read_file_range_requires_base64: a ranged read-file must ask for encoding \"base64\""

static NzGuest *
conn_guest (NzAgentConn *conn)
{
  return nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
}

/* ---- write-file parts ---- */

void
nz_agent_fileops_write_part (NzAgentConn *conn, const NzFileRequest *req)
{
  NzGuest *guest = conn_guest (conn);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) reply = json_object_new ();
  NzFilePartResult result;

  if (!nz_fileparts_apply (guest, req->path, req->part, req->content, req->encoding, &result,
                           &error))
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  json_object_set_boolean_member (reply, "ok", TRUE);
  if (result.discarded)
    /* No boot id on discard replies (spec A.10). */
    json_object_set_boolean_member (reply, "discarded", TRUE);
  else
    {
      json_object_set_string_member (reply, "guestBootId", guest->boot_id);
      json_object_set_int_member (reply, "bytesWritten", result.bytes_written);
      json_object_set_int_member (reply, "sizeBytes", result.size_bytes);
    }
  nz_agent_conn_reply (conn, reply);
}

/* ---- ranges ---- */

void
nz_agent_fileops_read_range (NzAgentConn *conn, NzEnvelope *env, const NzFileRequest *req)
{
  const char *path = req->path;
  NzGuest *guest = conn_guest (conn);
  g_autoptr (GError) error = NULL;
  g_autofree char *root = NULL;
  g_autofree char *lexical = NULL;
  g_autofree char *real = NULL;
  g_autofree char *real_now = NULL;
  g_autofree guint8 *buf = NULL;
  g_autofree char *b64 = NULL;
  g_autoptr (NzFileReader) r = NULL;
  g_autoptr (GString) reply = NULL;
  gint64 offset, length, wanted;
  gssize n = 0;
  int fd;

  /* The jail is checked first; the file is opened (race-free) only after the range checks. */
  if ((lexical = nz_jail_resolve_read (guest->jail, path, &root, &error)) == NULL
      || (real = nz_jail_realpath_within (lexical, root, &error)) == NULL)
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  if (!nz_request_range_member (env->body, "offset", 0, &offset)
      || !nz_request_range_member (env->body, "length", -1, &length))
    {
      nz_agent_conn_reply_error (conn, NZ_REQUEST_INVALID_RANGE);
      return;
    }
  /* Ranges are byte slices: a UTF-8 decode could split a character at either edge. */
  if (!req->base64)
    {
      nz_agent_conn_reply_error (conn, RANGE_NEEDS_BASE64);
      return;
    }
  /* Refused on the *requested* length, so the reply frame size is bounded up front; larger
   * reads use read-file-stream. */
  if (length > guest->limits.read_file_range_bytes)
    {
      g_autofree char *msg = g_strdup_printf (
          "read_file_range_too_large: length %" G_GINT64_FORMAT " exceeds %" G_GINT64_FORMAT
          " bytes (NAMZU_AGENT_READ_FILE_RANGE_BYTES); use read-file-stream",
          length, guest->limits.read_file_range_bytes);

      nz_agent_conn_reply_error (conn, msg);
      return;
    }
  if ((fd = nz_request_open_read (guest, path, &real_now, &error)) < 0
      || (r = nz_file_reader_new (fd, real_now, &error)) == NULL)
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  wanted = nz_file_reader_wanted (r, offset, length);
  if (wanted > guest->limits.read_file_range_bytes)
    {
      g_autofree char *msg = g_strdup_printf (
          "read_file_range_too_large: length %" G_GINT64_FORMAT " exceeds %" G_GINT64_FORMAT
          " bytes (NAMZU_AGENT_READ_FILE_RANGE_BYTES); use read-file-stream",
          wanted, guest->limits.read_file_range_bytes);

      nz_agent_conn_reply_error (conn, msg);
      return;
    }
  buf = g_malloc (MAX (wanted, 1));
  if (wanted > 0 && (n = nz_file_reader_pread (r, buf, (gsize)wanted, offset, &error)) < 0)
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  b64 = g_base64_encode (buf, (gsize)n);
  reply = g_string_sized_new (strlen (b64) + 192);
  g_string_append (reply, "{\"ok\":true,\"guestBootId\":");
  nz_jstext_append_json_string (reply, guest->boot_id);
  g_string_append_printf (reply,
                          ",\"content\":\"%s\",\"sizeBytes\":%" G_GINT64_FORMAT
                          ",\"encoding\":\"base64\",\"offset\":%" G_GINT64_FORMAT
                          ",\"bytesRead\":%" G_GSSIZE_FORMAT "}",
                          b64, nz_file_reader_get_size (r), offset, n);
  nz_agent_conn_write_frame (conn, reply->str, reply->len);
  nz_agent_conn_end (conn);
}
