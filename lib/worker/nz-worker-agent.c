#include "nz-worker-agent.h"

#include <string.h>
#include <sys/socket.h>

#include <gio/gio.h>

#include "nz-agent-config.h"
#include "nz-agent-conn.h"
#include "nz-agent-server.h"
#include "nz-errors.h"
#include "nz-frame.h"

struct _NzWorkerAgent
{
  NzAgentConfig *config;
  NzAgentServer *server;
};

struct _NzWorkerAgentCall
{
  GSocketConnection *conn; /* our end */
  GCancellable *cancellable;
  NzFrameReader *reader;
  NzWorkerAgentFuncs funcs;
  gpointer user_data;
  GBytes *request;
  guint8 buf[65536];
};

NzWorkerAgent *
nz_worker_agent_new (NzGuest *guest, GError **error)
{
  g_autoptr (NzWorkerAgent) agent = g_new0 (NzWorkerAgent, 1);

  /* The agent's knobs and defaults, read the agent's way; no listen mode (it is handed
   * calls) and no credential (the bearer gate in front authenticated the caller). */
  agent->config = nz_agent_config_new_embedded (error);
  if (agent->config == NULL)
    return NULL;
  agent->server = nz_agent_server_new (agent->config, guest);
  return g_steal_pointer (&agent);
}

void
nz_worker_agent_free (NzWorkerAgent *agent)
{
  if (agent == NULL)
    return;
  g_clear_pointer (&agent->server, nz_agent_server_free);
  g_clear_pointer (&agent->config, nz_agent_config_free);
  g_free (agent);
}

void
nz_worker_agent_accept (NzWorkerAgent *agent, GSocketConnection *connection)
{
  g_return_if_fail (agent != NULL && G_IS_SOCKET_CONNECTION (connection));
  nz_agent_conn_start (agent->server, connection);
}

static void
call_free (NzWorkerAgentCall *call)
{
  g_io_stream_close (G_IO_STREAM (call->conn), NULL, NULL);
  g_object_unref (call->conn);
  g_object_unref (call->cancellable);
  nz_frame_reader_free (call->reader);
  g_bytes_unref (call->request);
  g_free (call);
}

static void
call_end (NzWorkerAgentCall *call)
{
  if (!g_cancellable_is_cancelled (call->cancellable))
    call->funcs.end (call->user_data);
  call_free (call);
}

static void
call_read (GObject *source, GAsyncResult *res, gpointer user_data)
{
  NzWorkerAgentCall *call = user_data;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), res, NULL);

  if (g_cancellable_is_cancelled (call->cancellable) || n <= 0)
    {
      call_end (call);
      return;
    }
  nz_frame_reader_push (call->reader, call->buf, (gsize)n);
  for (;;)
    {
      g_autoptr (GBytes) payload = NULL;
      gsize len = 0;
      const char *data;

      if (nz_frame_reader_next (call->reader, &payload, NULL) != NZ_FRAME_OK)
        break;
      data = g_bytes_get_data (payload, &len);
      if (len == 0)
        {
          /* The terminator: the stream is complete. */
          call_end (call);
          return;
        }
      call->funcs.frame (data, len, call->user_data);
      if (g_cancellable_is_cancelled (call->cancellable))
        {
          call_free (call);
          return;
        }
    }
  g_input_stream_read_async (G_INPUT_STREAM (source), call->buf, sizeof call->buf,
                             G_PRIORITY_DEFAULT, call->cancellable, call_read, call);
}

static void
call_written (GObject *source, GAsyncResult *res, gpointer user_data)
{
  /* A failed write shows up as the agent's hang-up on the read side. @user_data is the
   * request's bytes, kept alive until the write is over. */
  g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), res, NULL, NULL);
  g_bytes_unref (user_data);
}

static GSocketConnection *
connection_from_fd (int fd)
{
  g_autoptr (GSocket) sock = g_socket_new_from_fd (fd, NULL);

  if (sock == NULL)
    return NULL;
  return g_socket_connection_factory_create_connection (sock);
}

NzWorkerAgentCall *
nz_worker_agent_call (NzWorkerAgent *agent, const char *op, JsonObject *body,
                      const NzWorkerAgentFuncs *funcs, gpointer user_data)
{
  g_autoptr (JsonObject) env = json_object_new ();
  g_autoptr (GSocketConnection) agent_side = NULL;
  NzWorkerAgentCall *call;
  int sv[2];

  g_return_val_if_fail (agent != NULL && op != NULL && funcs != NULL, NULL);
  call = g_new0 (NzWorkerAgentCall, 1);
  call->funcs = *funcs;
  call->user_data = user_data;
  call->cancellable = g_cancellable_new ();
  call->reader = nz_frame_reader_new (G_MAXUINT32);
  json_object_set_string_member (env, "op", op);
  if (body != NULL)
    json_object_set_object_member (env, "body", json_object_ref (body));
  call->request = nz_frame_encode_object (env);
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0
      || (agent_side = connection_from_fd (sv[0])) == NULL
      || (call->conn = connection_from_fd (sv[1])) == NULL)
    {
      /* Out of descriptors: the op simply ends with nothing, like an agent that hung up. */
      funcs->end (user_data);
      nz_frame_reader_free (call->reader);
      g_bytes_unref (call->request);
      g_object_unref (call->cancellable);
      g_free (call);
      return NULL;
    }
  /* The agent's own connection state machine and op dispatch, as if it had accepted it. */
  nz_agent_conn_start (agent->server, agent_side);
  g_output_stream_write_all_async (g_io_stream_get_output_stream (G_IO_STREAM (call->conn)),
                                   g_bytes_get_data (call->request, NULL),
                                   g_bytes_get_size (call->request), G_PRIORITY_DEFAULT,
                                   call->cancellable, call_written, g_bytes_ref (call->request));
  g_input_stream_read_async (g_io_stream_get_input_stream (G_IO_STREAM (call->conn)), call->buf,
                             sizeof call->buf, G_PRIORITY_DEFAULT, call->cancellable, call_read,
                             call);
  return call;
}

void
nz_worker_agent_call_cancel (NzWorkerAgentCall *call)
{
  /* The pending read completes cancelled and frees the call. */
  g_cancellable_cancel (call->cancellable);
}
