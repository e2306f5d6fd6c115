#include "nz-worker-config.h"

#include <math.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-knobs.h"

void
nz_worker_config_free (NzWorkerConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->bind);
  if (config->token != NULL)
    explicit_bzero (config->token, strlen (config->token));
  g_free (config->token);
  g_free (config->workspace);
  g_free (config->read_roots);
  g_free (config->write_roots);
  g_free (config);
}

/* Number(v || fallback): only unset or EMPTY falls back (spec C.1). A value that is not a
 * number is refused here rather than becoming NaN and silently disabling a limit. */
static gboolean
js_number_knob (const char *name, double fallback, double *out, GError **error)
{
  const char *raw = g_getenv (name);

  if (raw == NULL || *raw == '\0')
    {
      *out = fallback;
      return TRUE;
    }
  if (!nz_parse_js_number (raw, out))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s must be a number", name);
  return TRUE;
}

static gint64
clamp_ms (double v)
{
  if (isnan (v) || v <= 0)
    return 0;
  if (v >= (double)NZ_MAX_SAFE_INTEGER)
    return NZ_MAX_SAFE_INTEGER;
  return (gint64)ceil (v);
}

/* ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim removes. */
static gboolean
js_is_trim_space (gunichar c)
{
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0xa0 || c == 0x1680
         || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f
         || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

gboolean
nz_worker_bind_is_loopback (const char *bind)
{
  g_autofree char *s = g_strstrip (g_strdup (bind != NULL ? bind : ""));
  g_autofree char *lower = NULL;
  char *p = s;
  gsize len;

  if (*p == '[')
    p++;
  len = strlen (p);
  if (len > 0 && p[len - 1] == ']')
    p[len - 1] = '\0';
  lower = g_ascii_strdown (p, -1);
  return g_str_equal (lower, "localhost") || g_str_equal (lower, "::1")
         || g_str_has_prefix (lower, "127.");
}

gboolean
nz_worker_escape_is_on (const char *value)
{
  static const char *const on[] = { "1", "true", "yes", "on", NULL };
  g_autofree char *lower = g_ascii_strdown (value != NULL ? value : "", -1);

  /* Not trimmed: " yes" is what an editor makes of "yes", and a security escape must not
   * accept a value nobody typed on purpose. */
  return g_strv_contains (on, lower);
}

char *
nz_worker_presented_token (const char *header)
{
  const char *start, *end, *p;

  if (header == NULL)
    return NULL;
  /* Header bytes are latin-1 characters: trim the ones JS trim() removes (incl. NBSP). */
  start = header;
  end = header + strlen (header);
  while (start < end && (js_is_trim_space ((guchar)*start)))
    start++;
  while (end > start && js_is_trim_space ((guchar)end[-1]))
    end--;
  if (end - start < 6 || g_ascii_strncasecmp (start, "bearer", 6) != 0)
    return NULL;
  p = start + 6;
  /* One or more SPACES only: a tab there is not the scheme separator. */
  if (p >= end || *p != ' ')
    return NULL;
  while (p < end && *p == ' ')
    p++;
  if (p >= end)
    return NULL;
  /* `.` in the reference's regex does not match a line terminator. */
  for (const char *q = p; q < end; q++)
    if (*q == '\n' || *q == '\r')
      return NULL;
  return g_strndup (p, end - p);
}

typedef enum
{
  TOKEN_OK,
  TOKEN_EMPTY_OR_PADDED,
  TOKEN_UNPRESENTABLE,
} TokenCheck;

/* The env value is UTF-8; a header carries one byte per character (latin-1). Converts
 * @utf8 into those bytes, or says why it cannot be served. */
static TokenCheck
token_to_header_bytes (const char *utf8, char **out)
{
  g_autoptr (GString) bytes = g_string_new (NULL);
  const char *p;
  gunichar first, last = 0;

  if (!g_utf8_validate (utf8, -1, NULL))
    /* The runtime would decode the stray bytes to U+FFFD, which no header can carry. */
    return *utf8 == '\0' ? TOKEN_EMPTY_OR_PADDED : TOKEN_UNPRESENTABLE;
  if (*utf8 == '\0')
    return TOKEN_EMPTY_OR_PADDED;
  first = g_utf8_get_char (utf8);
  for (p = utf8; *p != '\0'; p = g_utf8_next_char (p))
    last = g_utf8_get_char (p);
  if (js_is_trim_space (first) || js_is_trim_space (last))
    return TOKEN_EMPTY_OR_PADDED;
  for (p = utf8; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (!(c == '\t' || (c >= 0x20 && c <= 0x7e) || (c >= 0x80 && c <= 0xff)))
        return TOKEN_UNPRESENTABLE;
      g_string_append_c (bytes, (char)c);
    }
  *out = g_string_free (g_steal_pointer (&bytes), FALSE);
  return TOKEN_OK;
}

typedef struct
{
  const char *name;
  double fallback;
  gsize offset;
} MsKnob;

#define LIMIT(name, fallback, field) { name, fallback, G_STRUCT_OFFSET (NzWorkerConfig, field) }

static const MsKnob ms_knobs[] = {
  LIMIT ("NAMZU_SANDBOX_MAX_BODY_BYTES", 8388608, max_body_bytes),
  LIMIT ("NAMZU_SANDBOX_MAX_TIMEOUT_MS", 1800000, limits.max_timeout_ms),
  LIMIT ("NAMZU_SANDBOX_EXECUTION_LEASE_TTL_MS", 30000, limits.execution_lease_ttl_ms),
  LIMIT ("NAMZU_SANDBOX_EXECUTION_TERMINAL_TTL_MS", 60000, limits.execution_terminal_ttl_ms),
  LIMIT ("NAMZU_SANDBOX_MAX_TRACKED_EXECUTIONS", 1024, limits.max_tracked_executions),
  LIMIT ("NAMZU_SANDBOX_CANCEL_GRACE_MS", 250, limits.cancel_grace_ms),
  LIMIT ("NAMZU_SANDBOX_CANCEL_CONFIRM_TIMEOUT_MS", 5000, limits.cancel_confirm_timeout_ms),
  LIMIT ("NAMZU_SANDBOX_POISON_EXIT_DELAY_MS", 50, poison_exit_delay_ms),
  LIMIT ("NAMZU_SANDBOX_MAX_PREAUTH_CONNECTIONS", 64, max_preauth_connections),
  LIMIT ("NAMZU_SANDBOX_PREAUTH_DEADLINE_MS", 10000, preauth_deadline_ms),
  LIMIT ("NAMZU_SANDBOX_PREAUTH_IDLE_TIMEOUT_MS", 10000, preauth_idle_timeout_ms),
};

static void
default_engine_limits (NzGuestLimits *l)
{
  /* The engine's agent-only knobs keep the agent's defaults; the worker never uses them. */
  l->execution_retained_ttl_ms = 600000;
  l->execution_log_bytes = 1048576;
  l->max_retained_output_logs = 32;
  l->max_sessions = 16;
  l->session_log_bytes = 1048576;
  l->session_terminal_ttl_ms = 600000;
  l->session_kill_confirm_timeout_ms = 5000;
  l->read_file_range_bytes = 1048576;
  l->read_file_stream_chunk_bytes = 262144;
  l->quiesce_grace_ms = 1000;
  l->quiesce_deadline_ms = 20000;
  l->quiesce_max_rounds = 8;
  l->quiesce_settle_ms = 1000;
  l->flush_timeout_ms = 10000;
  l->shutdown_deadline_ms = 15000;
}

NzWorkerConfig *
nz_worker_config_new_from_env (GError **error)
{
  g_autoptr (NzWorkerConfig) c = g_new0 (NzWorkerConfig, 1);
  const char *raw_token = g_getenv ("NAMZU_SANDBOX_TOKEN");
  const char *policy = g_getenv ("NAMZU_SANDBOX_NORMAL_EXIT_POLICY");
  const char *idle = g_getenv ("NAMZU_SANDBOX_IDLE_TIMEOUT_MS");
  double port = 0, v = 0;

  c->bind = g_strdup (g_getenv ("NAMZU_SANDBOX_BIND") != NULL
                              && *g_getenv ("NAMZU_SANDBOX_BIND") != '\0'
                          ? g_getenv ("NAMZU_SANDBOX_BIND")
                          : "0.0.0.0");
  c->workspace = g_strdup (g_getenv ("NAMZU_SANDBOX_WORKSPACE") != NULL
                                   && *g_getenv ("NAMZU_SANDBOX_WORKSPACE") != '\0'
                               ? g_getenv ("NAMZU_SANDBOX_WORKSPACE")
                               : "/workspace");
  c->read_roots = g_strdup (g_getenv ("NAMZU_SANDBOX_READ_ROOTS"));
  c->write_roots = g_strdup (g_getenv ("NAMZU_SANDBOX_WRITE_ROOTS"));
  default_engine_limits (&c->limits);

  /* Step 0: the normal-exit policy. Only `strict` is implemented: `computer-lifetime` would
   * hand surviving descendants to a computer this worker does not have, so it is refused
   * rather than silently run as strict. */
  if (policy != NULL && !g_str_equal (policy, "strict"))
    {
      if (g_str_equal (policy, "computer-lifetime"))
        return (nz_throw (error, NZ_ERROR_UNSUPPORTED,
                          "NAMZU_SANDBOX_NORMAL_EXIT_POLICY=computer-lifetime is not supported "
                          "by namzu-worker; unset it or set it to strict"),
                NULL);
      return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                        "NAMZU_SANDBOX_NORMAL_EXIT_POLICY must be exactly strict or "
                        "computer-lifetime"),
              NULL);
    }

  /* Steps 1-2: a token that is set must be one a host can present. */
  if (raw_token != NULL)
    {
      switch (token_to_header_bytes (raw_token, &c->token))
        {
        case TOKEN_EMPTY_OR_PADDED:
          return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                            "NAMZU_SANDBOX_TOKEN is set but is empty after trimming, or carries "
                            "leading or trailing whitespace. An empty value is what an injected "
                            "secret looks like when the injection resolved to nothing, and a "
                            "padded one is read from a trimmed header and can never be "
                            "presented; set the exact token, or unset the variable"),
                  NULL);
        case TOKEN_UNPRESENTABLE:
          return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                            "NAMZU_SANDBOX_TOKEN carries a character that cannot be presented in "
                            "an HTTP header value. Only HTAB, U+0020-U+007E and U+0080-U+00FF "
                            "can be; mint the token from those (hex, for example)"),
                  NULL);
        case TOKEN_OK:
        default:
          c->auth = TRUE;
          break;
        }
    }
  /* Steps 3-6: a valid token always wins; then loopback; then the named escape. */
  if (!c->auth && !nz_worker_bind_is_loopback (c->bind)
      && !nz_worker_escape_is_on (g_getenv ("NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED")))
    return (nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                      "no NAMZU_SANDBOX_TOKEN is configured and NAMZU_SANDBOX_BIND=%s would "
                      "accept connections from outside this network namespace, so every route "
                      "but /healthz would be open to whoever can route to it. Set "
                      "NAMZU_SANDBOX_TOKEN to a per-instance secret, bind a loopback address "
                      "(NAMZU_SANDBOX_BIND=127.0.0.1), or set "
                      "NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED=1 (exactly that spelling: 1, true, "
                      "yes or on, in any case, with no surrounding whitespace) to serve without "
                      "a credential on purpose",
                      c->bind),
            NULL);

  if (!js_number_knob ("NAMZU_SANDBOX_PORT", 2024, &port, error))
    return NULL;
  if (!nz_is_safe_integer (port) || port < 0 || port > 65535)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "NAMZU_SANDBOX_PORT must be an integer in [0, 65535]"),
            NULL);
  c->port = (guint16)port;
  for (gsize i = 0; i < G_N_ELEMENTS (ms_knobs); i++)
    {
      if (!js_number_knob (ms_knobs[i].name, ms_knobs[i].fallback, &v, error))
        return NULL;
      *(gint64 *)G_STRUCT_MEMBER_P (c, ms_knobs[i].offset) = clamp_ms (v);
    }
  /* `??` in the reference: an empty value is Number('') = 0 = disabled, not the default. */
  if (idle == NULL)
    c->idle_timeout_ms = 300000;
  else if (*idle == '\0')
    c->idle_timeout_ms = 0;
  else if (!nz_parse_js_number (idle, &v))
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "NAMZU_SANDBOX_IDLE_TIMEOUT_MS must be a number"),
            NULL);
  else
    c->idle_timeout_ms = clamp_ms (v);
  /* Ours, so validated: a typo must not leave a sandbox running past the deadline its host set.
   * A deadline already past is allowed: the worker then exits at once. */
  {
    const char *exp = g_getenv ("NAMZU_SANDBOX_EXPIRES_AT_MS");

    if (exp != NULL && *exp != '\0'
        && (!nz_parse_js_number (exp, &v) || !nz_is_safe_integer (v) || v <= 0))
      return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                        "NAMZU_SANDBOX_EXPIRES_AT_MS must be a positive safe integer "
                        "(milliseconds since the epoch)"),
              NULL);
    c->expires_at_ms = exp != NULL && *exp != '\0' ? (gint64)v : 0;
  }
  if (c->limits.max_tracked_executions < 1)
    c->limits.max_tracked_executions = 1;
  /* A confirmation window of 0 stays 0 (Number('0') in the reference): the group is checked
   * once right after each signal, so nothing is ever confirmed and the worker retires. */
  /* A zero bound would refuse every connection; the smallest is one. */
  c->max_preauth_connections = MAX (c->max_preauth_connections, 1);
  c->preauth_deadline_ms = MAX (c->preauth_deadline_ms, 1);
  c->preauth_idle_timeout_ms = MAX (c->preauth_idle_timeout_ms, 1);
  return g_steal_pointer (&c);
}
