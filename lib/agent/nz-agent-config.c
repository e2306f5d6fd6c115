#include "nz-agent-config.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "nz-errors.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"

typedef struct
{
  const char *name;
  gint64 fallback;
  gboolean allow_zero;
  gsize offset; /* into NzAgentConfig */
} Knob;

#define KNOB(name, fallback, zero, field)                                                          \
  {                                                                                                \
    name, fallback, zero, G_STRUCT_OFFSET (NzAgentConfig, field)                                   \
  }

/* Every numeric knob of spec B.2 this agent uses; all read once, before listening. */
static const Knob knobs[] = {
  KNOB ("NAMZU_AGENT_MAX_FRAME_BYTES", 268435456, FALSE, max_frame_bytes),
  KNOB ("NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES", 8388608, FALSE, max_preauth_frame_bytes),
  KNOB ("NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS", 64, FALSE, max_preauth_connections),
  KNOB ("NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES", 33554432, FALSE, max_preauth_buffer_bytes),
  KNOB ("NAMZU_AGENT_PREAUTH_IDLE_TIMEOUT_MS", 10000, FALSE, preauth_idle_timeout_ms),
  KNOB ("NAMZU_AGENT_PREAUTH_DEADLINE_MS", 10000, FALSE, preauth_deadline_ms),
  KNOB ("NAMZU_AGENT_REFUSAL_FLUSH_GRACE_MS", 1000, FALSE, refusal_flush_grace_ms),
  KNOB ("NAMZU_AGENT_EXECUTION_LEASE_TTL_MS", 30000, FALSE, limits.execution_lease_ttl_ms),
  KNOB ("NAMZU_AGENT_EXECUTION_TERMINAL_TTL_MS", 60000, FALSE, limits.execution_terminal_ttl_ms),
  KNOB ("NAMZU_AGENT_MAX_TRACKED_EXECUTIONS", 1024, FALSE, limits.max_tracked_executions),
  KNOB ("NAMZU_AGENT_CANCEL_GRACE_MS", 250, TRUE, limits.cancel_grace_ms),
  KNOB ("NAMZU_AGENT_CANCEL_CONFIRM_TIMEOUT_MS", 5000, FALSE, limits.cancel_confirm_timeout_ms),
  KNOB ("NAMZU_AGENT_EXECUTION_LOG_BYTES", 1048576, FALSE, limits.execution_log_bytes),
  KNOB ("NAMZU_AGENT_MAX_RETAINED_OUTPUT_LOGS", 32, FALSE, limits.max_retained_output_logs),
  KNOB ("NAMZU_AGENT_EXECUTION_RETAINED_TTL_MS", 600000, FALSE, limits.execution_retained_ttl_ms),
  KNOB ("NAMZU_SANDBOX_MAX_TIMEOUT_MS", 1800000, FALSE, limits.max_timeout_ms),
  KNOB ("NAMZU_AGENT_MAX_SESSIONS", 16, FALSE, limits.max_sessions),
  KNOB ("NAMZU_AGENT_SESSION_LOG_BYTES", 1048576, FALSE, limits.session_log_bytes),
  KNOB ("NAMZU_AGENT_SESSION_TERMINAL_TTL_MS", 600000, FALSE, limits.session_terminal_ttl_ms),
  KNOB ("NAMZU_AGENT_SESSION_KILL_CONFIRM_TIMEOUT_MS", 5000, FALSE,
        limits.session_kill_confirm_timeout_ms),
  KNOB ("NAMZU_AGENT_READ_FILE_RANGE_BYTES", 1048576, FALSE, limits.read_file_range_bytes),
  KNOB ("NAMZU_AGENT_READ_FILE_STREAM_CHUNK_BYTES", 262144, FALSE,
        limits.read_file_stream_chunk_bytes),
  KNOB ("NAMZU_AGENT_QUIESCE_GRACE_MS", 1000, FALSE, limits.quiesce_grace_ms),
  KNOB ("NAMZU_AGENT_QUIESCE_DEADLINE_MS", 20000, FALSE, limits.quiesce_deadline_ms),
  KNOB ("NAMZU_AGENT_QUIESCE_MAX_ROUNDS", 8, FALSE, limits.quiesce_max_rounds),
  KNOB ("NAMZU_AGENT_QUIESCE_SETTLE_MS", 1000, FALSE, limits.quiesce_settle_ms),
  KNOB ("NAMZU_AGENT_FLUSH_TIMEOUT_MS", 10000, FALSE, limits.flush_timeout_ms),
  KNOB ("NAMZU_AGENT_SHUTDOWN_DEADLINE_MS", 15000, FALSE, limits.shutdown_deadline_ms),
  /* namzu additions: how long the sandbox lives (nz-lifetime.h); unset or 0 = forever. */
  KNOB ("NAMZU_AGENT_EXPIRES_AT_MS", 0, TRUE, expires_at_ms),
  KNOB ("NAMZU_AGENT_IDLE_TIMEOUT_MS", 0, TRUE, idle_timeout_ms),
};

void
nz_agent_config_free (NzAgentConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->unix_path);
  g_free (config->vsock_port);
  g_free (config->bind_token);
  g_free (config->workspace);
  g_free (config->read_roots);
  g_free (config->write_roots);
  g_free (config->flush_command);
  g_free (config->reseed_hook);
  g_strfreev (config->sandbox_env);
  g_free (config);
}

gboolean
nz_agent_config_is_gated (const NzAgentConfig *config)
{
  return config->bind_token != NULL || config->require_token;
}

static gboolean
parse_tcp_port (const char *raw, guint16 *out, GError **error)
{
  double v;

  if (nz_parse_js_number (raw, &v) && v == floor (v) && v >= 0 && v <= 65535)
    {
      *out = (guint16)v;
      return TRUE;
    }
  {
    g_autoptr (GString) json = g_string_new (NULL);

    nz_jstext_append_json_string (json, raw);
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "agent: NAMZU_AGENT_TCP_PORT must be an integer port in [0, 65535], got %s",
                     json->str);
  }
}

/* A secret is at most this long: the backends mint 64 hex characters. */
#define NZ_AGENT_TOKEN_FD_MAX 4096

static gboolean
parse_fd (const char *name, const char *raw, int *out, GError **error)
{
  guint64 v;

  /* 0-2 are stdio: a token or a listener there is a mistake, not a handover. */
  if (!g_ascii_string_to_unsigned (raw, 10, 3, G_MAXINT, &v, NULL))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "agent: %s must be an inherited file descriptor >= 3, got '%s'", name, raw);
  *out = (int)v;
  return TRUE;
}

/* NAMZU_AGENT_BIND_TOKEN_FD: the backends hand the token over a pipe, never the environment,
 * which /proc/<pid>/environ shows for the life of the process. Read to EOF, then closed. */
static char *
read_token_fd (const char *raw, GError **error)
{
  g_autoptr (GString) buf = g_string_new (NULL);
  int fd = -1;

  if (!parse_fd ("NAMZU_AGENT_BIND_TOKEN_FD", raw, &fd, error))
    return NULL;
  for (;;)
    {
      char chunk[512];
      ssize_t n = read (fd, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;

          close (fd);
          errno = errsv;
          return (nz_throw_errno_prefix (error, "agent: NAMZU_AGENT_BIND_TOKEN_FD %d", fd), NULL);
        }
      if (n == 0)
        break;
      g_string_append_len (buf, chunk, n);
      if (buf->len > NZ_AGENT_TOKEN_FD_MAX)
        break;
    }
  close (fd);
  if (buf->len > 0 && buf->str[buf->len - 1] == '\n')
    g_string_truncate (buf, buf->len - 1);
  if (buf->len == 0 || buf->len > NZ_AGENT_TOKEN_FD_MAX || strlen (buf->str) != buf->len)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "agent: NAMZU_AGENT_BIND_TOKEN_FD %d gave no usable token (empty, NUL or "
                      "over %d bytes)", fd, NZ_AGENT_TOKEN_FD_MAX), NULL);
  return g_string_free (g_steal_pointer (&buf), FALSE);
}

/* NAMZU_AGENT_SANDBOX_ENV: {"NAME":"VALUE",...}, as the bwrap backend writes it after its own
 * checks. Checked again: a name the scrub removes is refused, not laid back over it. */
static gboolean
parse_sandbox_env (const char *raw, char ***out, GError **error)
{
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (GList) members = NULL;
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();

  if (nz_json_text_has_nul (raw, strlen (raw))
      || (obj = nz_json_parse_object (raw, -1, NULL)) == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "agent: NAMZU_AGENT_SANDBOX_ENV must be a JSON object of strings without "
                     "NUL");
  members = json_object_get_members (obj);
  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *name = l->data;
      const char *value = nz_json_node_string (json_object_get_member (obj, name));

      if (value == NULL || *name == '\0' || strchr (name, '=') != NULL
          || g_str_has_prefix (name, "NAMZU_AGENT_") || g_str_has_prefix (name, "NAMZU_SANDBOX_"))
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "agent: NAMZU_AGENT_SANDBOX_ENV: '%s' is not a variable a command may "
                         "be given", name);
      g_autofree char *entry = g_strconcat (name, "=", value, NULL);

      g_strv_builder_add (b, entry);
    }
  *out = g_strv_builder_end (b);
  return TRUE;
}

/* The knobs every agent server reads, however it is reached: limits, workspace and roots,
 * the flush command and the reseed hook. */
static NzAgentConfig *
config_knobs_from_env (GError **error)
{
  g_autoptr (NzAgentConfig) c = g_new0 (NzAgentConfig, 1);
  const char *workspace = g_getenv ("NAMZU_SANDBOX_WORKSPACE");

  for (gsize i = 0; i < G_N_ELEMENTS (knobs); i++)
    {
      gint64 *field = G_STRUCT_MEMBER_P (c, knobs[i].offset);

      if (!nz_knob_int (knobs[i].name, knobs[i].fallback, knobs[i].allow_zero, field, error))
        return NULL;
    }
  c->max_preauth_frame_bytes = MIN (c->max_preauth_frame_bytes, c->max_frame_bytes);
  c->max_preauth_buffer_bytes = MAX (c->max_preauth_buffer_bytes, c->max_preauth_frame_bytes);
  /* The quiesce grace must leave the cancel confirmation window room to confirm. */
  c->limits.quiesce_grace_ms
      = MIN (c->limits.quiesce_grace_ms, MAX (1, c->limits.cancel_confirm_timeout_ms - 1));
  c->quiesce_owned_only = g_strcmp0 (g_getenv ("NAMZU_AGENT_QUIESCE_SCOPE"), "owned-sessions") == 0;
  c->flush_command = g_strdup (g_getenv ("NAMZU_AGENT_FLUSH_COMMAND"));
  c->reseed_hook = g_strdup (g_getenv ("NAMZU_AGENT_RESEED_HOOK"));

  c->workspace = g_strdup (workspace != NULL && *workspace != '\0' ? workspace : "/workspace");
  c->read_roots = g_strdup (g_getenv ("NAMZU_SANDBOX_READ_ROOTS"));
  c->write_roots = g_strdup (g_getenv ("NAMZU_SANDBOX_WRITE_ROOTS"));
  return g_steal_pointer (&c);
}

NzAgentConfig *
nz_agent_config_new_embedded (GError **error)
{
  NzAgentConfig *c = config_knobs_from_env (error);

  if (c != NULL)
    c->listen_mode = NZ_AGENT_LISTEN_EMBEDDED;
  return c;
}

NzAgentConfig *
nz_agent_config_new_from_env (GError **error)
{
  g_autoptr (NzAgentConfig) c = config_knobs_from_env (error);
  const char *unix_path = g_getenv ("NAMZU_AGENT_UNIX_PATH");
  const char *vsock = g_getenv ("NAMZU_AGENT_VSOCK_PORT");
  const char *tcp = g_getenv ("NAMZU_AGENT_TCP_PORT");
  const char *bind = g_getenv ("NAMZU_AGENT_BIND_TOKEN");
  const char *require = g_getenv ("NAMZU_AGENT_REQUIRE_TOKEN");
  const char *token_fd = g_getenv ("NAMZU_AGENT_BIND_TOKEN_FD");
  const char *listen_fd = g_getenv ("NAMZU_AGENT_LISTEN_FD");
  const char *sandbox_env = g_getenv ("NAMZU_AGENT_SANDBOX_ENV");

  if (c == NULL)
    return NULL;
  if (sandbox_env != NULL && !parse_sandbox_env (sandbox_env, &c->sandbox_env, error))
    return NULL;
  /* An empty preset token would authenticate nobody, or worse, everybody: refuse it. */
  if (bind != NULL && *bind == '\0')
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS,
                "agent: NAMZU_AGENT_BIND_TOKEN is set but empty — unset it to run without a "
                "credential, or set it to a per-instance secret");
      return NULL;
    }
  if (bind != NULL && token_fd != NULL)
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS,
                "agent: NAMZU_AGENT_BIND_TOKEN and NAMZU_AGENT_BIND_TOKEN_FD are both set");
      return NULL;
    }
  c->bind_token = token_fd != NULL ? read_token_fd (token_fd, error) : g_strdup (bind);
  if (token_fd != NULL && c->bind_token == NULL)
    return NULL;
  c->require_token = require != NULL && *require != '\0';

  /* Mode precedence is the reference's: unix, then vsock fd 3, then TCP; an inherited
   * listener (additive, what the backends use) before all three. */
  if (listen_fd != NULL)
    {
      c->listen_mode = NZ_AGENT_LISTEN_FD;
      if (!parse_fd ("NAMZU_AGENT_LISTEN_FD", listen_fd, &c->listen_fd, error))
        return NULL;
    }
  else if (unix_path != NULL)
    {
      c->listen_mode = NZ_AGENT_LISTEN_UNIX;
      c->unix_path = g_strdup (unix_path);
    }
  else if (vsock != NULL)
    {
      c->listen_mode = NZ_AGENT_LISTEN_VSOCK_FD;
      c->vsock_port = g_strdup (vsock);
    }
  else if (tcp != NULL)
    {
      c->listen_mode = NZ_AGENT_LISTEN_TCP;
      if (!parse_tcp_port (tcp, &c->tcp_port, error))
        return NULL;
      /* A routed listener without a credential would hand the workload to anyone who can
       * reach the port. */
      if (!nz_agent_config_is_gated (c))
        {
          nz_throw (error, NZ_ERROR_INVALID_ARGS,
                    "agent: NAMZU_AGENT_TCP_PORT is a routed listener and needs a credential — "
                    "set NAMZU_AGENT_BIND_TOKEN to a per-instance secret, or "
                    "NAMZU_AGENT_REQUIRE_TOKEN to bind the first token seen");
          return NULL;
        }
    }
  else
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS,
                "agent: none of NAMZU_AGENT_UNIX_PATH, NAMZU_AGENT_VSOCK_PORT or "
                "NAMZU_AGENT_TCP_PORT set");
      return NULL;
    }
  return g_steal_pointer (&c);
}
