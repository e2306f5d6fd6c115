/* nz-lite-exec: see nz-lite-exec.h. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nz-host-timing.h"
#include "nz-lite-exec.h"
#include "nz-signame.h"

long long
nz_lite_exec_parse_timeout_ms (const char *text)
{
  static const struct { const char *suffix; long long ms; } units[] = {
    { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "", 1 },
  };
  size_t len = strlen (text);

  for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
    {
      size_t sl = strlen (units[u].suffix);
      unsigned long long v = 0;

      if (len < sl || strcmp (text + len - sl, units[u].suffix) != 0)
        continue;
      if (len == sl)
        return -1;
      for (size_t k = 0; k < len - sl; k++)
        {
          if (text[k] < '0' || text[k] > '9' || v > INT64_MAX / 3600000)
            return -1;
          v = v * 10 + (unsigned)(text[k] - '0');
        }
      /* Bounded so that the hours still fit a 64-bit count of milliseconds. */
      if (v < 1 || v > INT64_MAX / 3600000)
        return -1;
      return (long long)v * units[u].ms;
    }
  return -1;
}

bool
nz_lite_exec_build_body (char *const *command, const char *cwd, const char *const *env,
                         int n_env, const char *timeout, NzLiteBuf *b)
{
  long long timeout_ms = -1;
  bool ok = true;

  nz_lite_buf_str (b, "{\"command\":");
  ok &= nz_lite_buf_json_string (b, command[0]);
  nz_lite_buf_str (b, ",\"args\":[");
  for (int i = 1; command[i] != NULL; i++)
    {
      if (i > 1)
        nz_lite_buf_str (b, ",");
      ok &= nz_lite_buf_json_string (b, command[i]);
    }
  nz_lite_buf_str (b, "]");
  if (cwd != NULL)
    {
      nz_lite_buf_str (b, ",\"cwd\":");
      ok &= nz_lite_buf_json_string (b, cwd);
    }
  if (n_env > 0)
    nz_lite_buf_str (b, ",\"env\":{");
  for (int i = 0, first = 1; i < n_env; i++)
    {
      const char *eq = strchr (env[i], '='), *value = NULL;
      size_t klen = eq != NULL ? (size_t)(eq - env[i]) : 0;
      bool seen = false;
      char *key;

      if (klen == 0)
        return false;
      /* json-glib keeps a repeated key where it first appeared, with the last value. */
      for (int j = 0; j < n_env; j++)
        if (strncmp (env[j], env[i], klen + 1) == 0)
          {
            seen |= j < i;
            value = env[j] + klen + 1;
          }
      if (seen)
        continue;
      key = strndup (env[i], klen);
      nz_lite_buf_str (b, first ? "" : ",");
      ok &= nz_lite_buf_json_string (b, key);
      nz_lite_buf_str (b, ":");
      ok &= nz_lite_buf_json_string (b, value);
      free (key);
      first = 0;
    }
  if (n_env > 0)
    nz_lite_buf_str (b, "}");
  if (timeout != NULL && (timeout_ms = nz_lite_exec_parse_timeout_ms (timeout)) < 0)
    return false;
  if (timeout != NULL)
    nz_lite_buf_printf (b, ",\"timeoutMs\":%lld", timeout_ms);
  return ok;
}

int
nz_lite_exit_status (bool timed_out, int signo, bool has_code, double code)
{
  if (timed_out)
    return NZ_LITE_EXIT_TIMEOUT;
  if (signo >= 1 && signo <= 64)
    return 128 + signo;
  if (has_code && code >= 0 && code <= 255 && code == (int)code)
    return (int)code;
  return -1;
}

int
nz_lite_exec_exit_status (const NzJlValue *result)
{
  char *name = nz_jl_member_string (result, "signal");
  NzJlValue code;
  double d = -1;
  bool has_code = nz_jl_member (result, "exitCode", &code) && nz_jl_number (&code, &d);
  int status = nz_lite_exit_status (nz_jl_member_bool (result, "timedOut", false),
                                    nz_signame_lookup (name), has_code, d);

  free (name);
  return status;
}

/* Whether @s (of length @n) ends in @suffix and has more before it. */
static bool
ends_with (const char *s, size_t n, const char *suffix)
{
  size_t sl = strlen (suffix);

  return n > sl && memcmp (s + n - sl, suffix, sl) == 0;
}

void
nz_lite_exec_refusal (const char *desc, const char *code, const char *message, NzLiteErr *e)
{
  char text[768];
  size_t n = strlen (code);

  if (message != NULL && *message != '\0')
    snprintf (text, sizeof text, "%s (%s)", code, message);
  else
    snprintf (text, sizeof text, "%s", code);
  if (strncmp (code, "spawn ", 6) == 0 && ends_with (code, n, " ENOENT"))
    nz_lite_wire_fail (e, NZ_LITE_ERR_NOENT, "%s", text);
  else if (strncmp (code, "spawn ", 6) == 0
           && (ends_with (code, n, " EACCES") || ends_with (code, n, " EPERM")
               || ends_with (code, n, " ENOEXEC")))
    nz_lite_wire_fail (e, NZ_LITE_ERR_NOEXEC, "%s", text);
  else if (strcmp (code, "agent_retiring") == 0)
    nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "agent %s: agent is retiring: it fenced itself after "
                       "a process-group shutdown could not be confirmed, so the sandbox must be "
                       "recreated", desc);
  else if (strncmp (code, "unknown_op:", 11) == 0)
    nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: the agent does not implement guest "
                       "agent protocol 2 (%s); run a namzu-agent from the same namzu release as "
                       "this host", desc, code);
  else if (strncmp (code, "invalid_", 8) == 0 || strcmp (code, "missing_command") == 0)
    nz_lite_wire_fail (e, NZ_LITE_ERR_INVALID, "execute refused: %s", text);
  else
    nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "execute refused: %s", text);
}

bool
nz_lite_exec_cancel (NzLiteWire *w, const char *id, NzLiteErr *e)
{
  int64_t deadline = nz_lite_wire_now_ms () + NZ_HOST_CANCEL_CONFIRM_BUDGET_MS;
  char body[160], last[sizeof e->msg] = "no attempt";

  snprintf (body, sizeof body, "{\"executionId\":\"%s\"}", id);
  while (nz_lite_wire_now_ms () < deadline)
    {
      int64_t left = deadline - nz_lite_wire_now_ms ();
      unsigned attempt = (unsigned)(left < NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS
                                        ? (left > 0 ? left : 1)
                                        : NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS);
      char *text = NULL, *err, *msg;
      NzJlValue reply;
      bool ok;

      if (!nz_lite_wire_call (w, "cancel-execution", body, attempt, false, &text, &reply, e))
        {
          snprintf (last, sizeof last, "%s", e->msg);
          free (text);
          usleep (NZ_HOST_CANCEL_RETRY_INTERVAL_MS * 1000);
          continue;
        }
      ok = nz_jl_member_bool (&reply, "ok", false);
      err = nz_jl_member_string (&reply, "error");
      msg = nz_jl_member_string (&reply, "message");
      /* The agent answered: whatever it said will not change by asking again. */
      if (!ok)
        nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "agent %s: could not confirm that execution %s "
                           "stopped (%s%s%s); treat the sandbox as unusable and recreate it",
                           w->ep.desc, id, err ? err : "unknown error", msg ? ": " : "",
                           msg ? msg : "");
      free (err);
      free (msg);
      free (text);
      return ok;
    }
  return nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED,
                            "could not confirm that execution %s stopped within %ums: %s", id,
                            NZ_HOST_CANCEL_CONFIRM_BUDGET_MS, last);
}
