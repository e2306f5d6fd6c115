/* fuzz-client-reply: libFuzzer harness for the host side's reading of agent and worker
 * replies (lib/client): every byte an agent or a worker sends back is untrusted. The input is
 * byte 0 (which host call), then the peer's answer for each connection that call makes,
 * separated by SEP; the client reads them over real sockets (nz_agent_client_new_replay), so
 * the frame reader, the reply parser, protocol admission, exec/attach/download/terminal frame
 * handling and the worker's HTTP upgrade all run as they do against a live peer. Any crash,
 * sanitizer report, leak or critical is a finding. Build: scripts/fuzz (clang, -Dfuzz=true). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "nz-agent-client.h"
#include "nz-agent-files.h"
#include "nz-agent-sessions.h"
#include "nz-exec-status.h"
#include "nz-json.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define SEP "\n==\n"
#define MAX_ANSWERS 8

static void
fatal_log (const char *domain, GLogLevelFlags level, const char *message, gpointer user_data)
{
  /* A critical or warning on the host while reading a reply is a bug: make it a crash. */
  abort ();
}

static void
on_output (int stream, const char *text, gsize len, gpointer user_data)
{
  /* Tools write what they are given: touch every byte so ASan sees a bad length. */
  static volatile guint8 sum;

  for (gsize i = 0; i < len; i++)
    sum = sum + (guint8)text[i];
}

static void
on_exec_output (NzExecStream stream, const char *text, gsize len, gpointer user_data)
{
  on_output (stream, text, len, user_data);
}

static void
on_gap (guint64 dropped, guint64 offset, gpointer user_data)
{
}

static const NzAttachCallbacks attach_cb = { on_output, on_gap };

/* What tools do with a reply they got: print it. */
static void
print (JsonObject *obj)
{
  if (obj != NULL)
    g_free (nz_json_object_to_string (obj, NULL));
}

static void
run (guint8 call, NzAgentClient *c)
{
  g_autoptr (GError) error = NULL;

  switch (call % 9)
    {
    case 0:
      {
        g_autoptr (JsonObject) r = nz_agent_client_healthz (c, NULL, &error);

        print (r);
        break;
      }
    case 1:
      {
        g_autoptr (JsonObject) r = nz_agent_client_quiesce (c, 0, NULL, &error);

        print (r);
        break;
      }
    case 2:
      {
        g_autoptr (JsonObject) body = json_object_new ();
        g_autoptr (JsonObject) r = NULL;
        g_autofree char *id = NULL;

        json_object_set_string_member (body, "command", "true");
        r = nz_agent_client_exec (c, body, on_exec_output, NULL, &id, NULL, &error);
        if (r != NULL)
          {
            (void)nz_exec_exit_status (r);
            print (r);
          }
        break;
      }
    case 3:
    case 4:
      {
        g_autoptr (JsonObject) end
            = call % 9 == 3
                  ? nz_agent_attach_execution (c, "exec_1", 0, 0, 0, &attach_cb, NULL, NULL, &error)
                  : nz_agent_attach_session (c, "s1", 0, nz_liveness_asked_ms (), &attach_cb, NULL,
                                             NULL, &error);

        if (end != NULL && nz_json_get_object (end, "result") != NULL)
          (void)nz_exec_exit_status (nz_json_get_object (end, "result"));
        print (end);
        break;
      }
    case 5:
      {
        int fd = open ("/dev/null", O_WRONLY | O_CLOEXEC);
        gint64 bytes = 0;

        (void)nz_agent_files_download (c, "/w/f", fd, NULL, NULL, &bytes, NULL, &error);
        close (fd);
        break;
      }
    case 6:
      {
        g_autoptr (JsonObject) body = json_object_new ();
        g_autoptr (NzAgentDuplex) d = NULL;

        json_object_set_int_member (body, "cols", 80);
        json_object_set_int_member (body, "rows", 24);
        d = nz_agent_duplex_open (c, "terminal", body, &error);
        for (int i = 0; d != NULL && i < 4096; i++)
          {
            JsonObject *frame = NULL;
            NzDuplexResult r = nz_agent_duplex_next (d, TRUE, &frame, &error);

            if (r == NZ_DUPLEX_FRAME)
              {
                print (frame);
                json_object_unref (frame);
              }
            else if (r != NZ_DUPLEX_AGAIN)
              break;
          }
        break;
      }
    case 7:
      {
        g_autoptr (JsonObject) r = nz_agent_client_cancel (c, "exec_1", NULL, &error);

        print (r);
        break;
      }
    default:
      {
        g_autoptr (JsonObject) r = nz_agent_client_call (c, "list-sessions", NULL, NULL, &error);

        print (r);
        break;
      }
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static gboolean init;
  GBytes *answers[MAX_ANSWERS];
  guint n = 0;
  const guint8 *p, *end;
  guint8 call;

  if (!init)
    {
      g_log_set_handler (NULL, G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING, fatal_log, NULL);
      g_log_set_handler ("Json", G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING, fatal_log, NULL);
      g_log_set_handler ("GLib-GIO", G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING, fatal_log, NULL);
      init = TRUE;
    }
  if (size == 0)
    return 0;
  call = data[0];
  p = data + 1;
  end = data + size;
  while (n < MAX_ANSWERS)
    {
      const guint8 *sep = memmem (p, (size_t)(end - p), SEP, strlen (SEP));
      const guint8 *stop = sep != NULL ? sep : end;

      answers[n++] = g_bytes_new (p, (gsize)(stop - p));
      if (sep == NULL)
        break;
      p = sep + strlen (SEP);
    }
  {
    /* The high bit: the same calls over a worker (GET /v1/agent upgrade, GET /healthz). */
    g_autoptr (NzAgentClient) c = nz_agent_client_new_replay (
        (call & 0x80) ? "http://127.0.0.1:9" : "unix:/replay", answers, n);

    run (call & 0x7f, c);
  }
  for (guint i = 0; i < n; i++)
    g_bytes_unref (answers[i]);
  return 0;
}
