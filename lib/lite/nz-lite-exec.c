/* nz-lite-exec: see nz-lite-exec.h. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
