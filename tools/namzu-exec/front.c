/* namzu-exec's front: the common case in plain C, without loading GLib.
 *
 * Starting a program that links GLib, GIO and json-glib costs ~200 page faults before main()
 * (measured on this VM), more than the whole round trip to a warm sandbox. So the common case —
 * raw passthrough of one command (options -s, -t, -e, -C, --endpoint) on a unix:, tcp: or
 * http:// endpoint — is served here: reserve-execution then execute exactly as
 * lib/client/nz-agent-client.c does, output written through as it arrives, the result mapped to
 * the exit status as tools/namzu-exec/main.c does, and SIGINT/SIGTERM/SIGHUP or a closed
 * output cancelling the remote execution and waiting for its confirmation.
 *
 * Everything else is handed, with the unchanged argv, to the GLib implementation
 * (namzu-exec-full): other options, --help, usage mistakes, a handle or endpoint that is not
 * the plain case, and every failure before the execute request was sent (nothing ran yet, so
 * the full implementation redoes the work and reports the failure in its own words). Stdin it
 * already read (a handle) is handed over in a memfd, so nothing is lost. After execute was
 * sent, failures are reported here with main.c's words, except an unconfirmed cancellation in
 * a sandbox, which needs the backend's retire hook: main.c does that, told by
 * NZ_EXEC_RETIRE_ENV. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "front.h"
#include "nz-host-timing.h"
#include "nz-jsonlite.h"
#include "nz-signame.h"

/* lib/client's NZ_AGENT_REPLY_FRAME_LIMIT and NZ_AGENT_TCP_PREAUTH_FRAME_LIMIT. */
#define REPLY_FRAME_LIMIT (256u * 1024 * 1024)
#define TCP_PREAUTH_FRAME_LIMIT (8u * 1024 * 1024)
/* nz-state.c's bound on a handle piped on stdin; a private handle file is small too. */
#define STDIN_HANDLE_MAX (64 * 1024)
#define HANDLE_FILE_MAX (1024 * 1024)
/* nz-worker-http.c's bound on a worker's response head. */
#define HTTP_HEAD_LIMIT 16384
#define EXIT_NAMZU 125

typedef struct
{
  char *data;
  size_t len, cap;
} Buf;

static void
buf_add (Buf *b, const void *data, size_t len)
{
  if (b->len + len + 1 > b->cap)
    {
      size_t cap = b->cap ? b->cap : 256;

      while (cap < b->len + len + 1)
        cap *= 2;
      if ((b->data = realloc (b->data, cap)) == NULL)
        abort ();
      b->cap = cap;
    }
  memcpy (b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
}

static void
buf_str (Buf *b, const char *s)
{
  buf_add (b, s, strlen (s));
}

static void
buf_printf (Buf *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
buf_printf (Buf *b, const char *fmt, ...)
{
  char *text;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vasprintf (&text, fmt, ap);
  va_end (ap);
  if (n < 0)
    abort ();
  buf_add (b, text, (size_t)n);
  free (text);
}

/* A JSON string. False for text that is not UTF-8: the full implementation decides then. */
static bool
buf_json_string (Buf *b, const char *s)
{
  NzJlValue check;
  size_t mark = b->len;

  buf_str (b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
    {
      if (*p == '"' || *p == '\\')
        buf_printf (b, "\\%c", *p);
      else if (*p < 0x20)
        buf_printf (b, "\\u%04x", *p);
      else
        buf_add (b, p, 1);
    }
  buf_str (b, "\"");
  return nz_jl_parse (b->data + mark, b->len - mark, &check);
}

/* ---- the hand-over to the full implementation --------------------------------------------- */

static char **saved_argv;
static Buf stdin_seen;   /* what we read of stdin, handed over in a memfd */
static bool stdin_read;
static sigset_t saved_mask;
static bool mask_saved;

static void
say (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
say (const char *fmt, ...)
{
  Buf b = { 0 };
  char *msg;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  va_end (ap);
  buf_printf (&b, "namzu-exec: %s\n", msg);
  (void)!write (STDERR_FILENO, b.data, b.len);
  free (msg);
  free (b.data);
}

/* Never returns. @retire_message: an unconfirmed cancellation main.c must retire for. */
static void __attribute__ ((noreturn))
hand_over (const char *retire_message)
{
  char self[PATH_MAX], full[PATH_MAX + 32];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  char *slash;

  if (stdin_read)
    {
      int fd = memfd_create ("namzu-exec-stdin", MFD_CLOEXEC);

      if (fd < 0 || write (fd, stdin_seen.data ? stdin_seen.data : "", stdin_seen.len)
                        != (ssize_t)stdin_seen.len
          || lseek (fd, 0, SEEK_SET) != 0 || dup2 (fd, STDIN_FILENO) < 0)
        {
          say ("cannot hand the stdin already read to %s: %s", NZ_EXEC_FULL_NAME,
               strerror (errno));
          exit (EXIT_NAMZU);
        }
      close (fd);
    }
  if (retire_message != NULL)
    setenv (NZ_EXEC_RETIRE_ENV, retire_message, 1);
  signal (SIGPIPE, SIG_DFL);
  if (mask_saved)
    sigprocmask (SIG_SETMASK, &saved_mask, NULL);
  /* Next to us in the build tree, in ../libexec of a relocated install, else where meson
   * installed it. */
  if (n > 0 && (self[n] = '\0', slash = strrchr (self, '/')) != NULL)
    for (int i = 0; i < 2; i++)
      {
        snprintf (full, sizeof full, "%.*s/%s%s", (int)(slash - self), self,
                  i == 0 ? "" : "../libexec/", NZ_EXEC_FULL_NAME);
        if (access (full, X_OK) == 0)
          execv (full, saved_argv);
      }
  execv (NZ_EXEC_FULL_PATH, saved_argv);
  say ("cannot run %s: %s", NZ_EXEC_FULL_PATH, strerror (errno));
  exit (EXIT_NAMZU);
}

/* ---- options and the request body -------------------------------------------------------- */

typedef struct
{
  const char *sandbox, *timeout, *cwd, *endpoint;
  const char **env;
  int n_env;
  char **command;
} Opts;

/* Matches -S VALUE, --LONG VALUE and --LONG=VALUE. Anything fancier goes to GOption. */
static bool
take_value (char **argv, int *i, char short_name, const char *long_name, const char **out)
{
  const char *a = argv[*i];
  size_t n = strlen (long_name);

  if (strncmp (a, "--", 2) == 0 && strncmp (a + 2, long_name, n) == 0 && a[2 + n] == '=')
    {
      *out = a + 3 + n;
      return true;
    }
  if (!((short_name != '\0' && a[1] == short_name && a[2] == '\0')
        || (strncmp (a, "--", 2) == 0 && strcmp (a + 2, long_name) == 0)))
    return false;
  if (argv[*i + 1] == NULL || argv[*i + 1][0] == '-')
    hand_over (NULL);
  *out = argv[++*i];
  return true;
}

static void
parse_options (int argc, char **argv, Opts *o)
{
  int i;

  o->env = calloc ((size_t)argc, sizeof *o->env);
  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i], *env = NULL;

      if (strcmp (a, "--") == 0)
        {
          i++;
          break;
        }
      if (a[0] != '-')
        break;
      if (take_value (argv, &i, 's', "sandbox", &o->sandbox)
          || take_value (argv, &i, 't', "timeout", &o->timeout)
          || take_value (argv, &i, 'C', "cwd", &o->cwd)
          || take_value (argv, &i, '\0', "endpoint", &o->endpoint))
        continue;
      if (take_value (argv, &i, 'e', "env", &env))
        {
          o->env[o->n_env++] = env;
          continue;
        }
      hand_over (NULL); /* -i, --json, --detach, --help, a mistake, ... */
    }
  o->command = argv + i;
  if (o->command[0] == NULL || o->command[0][0] == '\0')
    hand_over (NULL);
  /* GOption's handling of a later "--" is its own; leave such a command line to it. */
  for (char **p = o->command; *p != NULL; p++)
    if (strcmp (*p, "--") == 0)
      hand_over (NULL);
}

/* main.c's parse_timeout_ms; anything it would refuse goes to it for the refusal. */
static long long
parse_timeout_ms (const char *text)
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
        hand_over (NULL);
      for (size_t k = 0; k < len - sl; k++)
        {
          if (text[k] < '0' || text[k] > '9' || v > INT64_MAX / 3600000)
            hand_over (NULL);
          v = v * 10 + (unsigned)(text[k] - '0');
        }
      if (v < 1 || v > INT64_MAX / 3600000)
        hand_over (NULL);
      return (long long)v * units[u].ms;
    }
  hand_over (NULL);
}

/* The execute body as main.c's build_body() makes it, without the closing brace so the
 * execution id can follow. */
static void
build_body (const Opts *o, Buf *b)
{
  bool ok = true;

  buf_str (b, "{\"command\":");
  ok &= buf_json_string (b, o->command[0]);
  buf_str (b, ",\"args\":[");
  for (int i = 1; o->command[i] != NULL; i++)
    {
      if (i > 1)
        buf_str (b, ",");
      ok &= buf_json_string (b, o->command[i]);
    }
  buf_str (b, "]");
  if (o->cwd != NULL)
    {
      buf_str (b, ",\"cwd\":");
      ok &= buf_json_string (b, o->cwd);
    }
  if (o->n_env > 0)
    buf_str (b, ",\"env\":{");
  for (int i = 0, first = 1; i < o->n_env; i++)
    {
      const char *eq = strchr (o->env[i], '='), *value = NULL;
      size_t klen = eq != NULL ? (size_t)(eq - o->env[i]) : 0;
      bool seen = false;
      char *key;

      if (klen == 0)
        hand_over (NULL);
      /* json-glib keeps a repeated key where it first appeared, with the last value. */
      for (int j = 0; j < o->n_env; j++)
        if (strncmp (o->env[j], o->env[i], klen + 1) == 0)
          {
            seen |= j < i;
            value = o->env[j] + klen + 1;
          }
      if (seen)
        continue;
      key = strndup (o->env[i], klen);
      buf_str (b, first ? "" : ",");
      ok &= buf_json_string (b, key);
      buf_str (b, ":");
      ok &= buf_json_string (b, value);
      free (key);
      first = 0;
    }
  if (o->n_env > 0)
    buf_str (b, "}");
  if (o->timeout != NULL)
    buf_printf (b, ",\"timeoutMs\":%lld", parse_timeout_ms (o->timeout));
  if (!ok)
    hand_over (NULL);
}

/* ---- where to run: nz-state.c's resolution, the plain case only ------------------------- */

static bool
id_is_valid (const char *id)
{
  if (id == NULL || strlen (id) != 15 || strncmp (id, "nz-", 3) != 0)
    return false;
  for (const char *p = id + 3; *p != '\0'; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

/* read_handle_id(): stop at the end of the first complete object on a line; the id, or a
 * hand-over (which re-feeds these bytes) for anything but a plain handle. */
static char *
read_handle_id (void)
{
  NzJlValue root;
  const char *s, *e;

  stdin_read = true;
  for (;;)
    {
      char chunk[4096];
      ssize_t n = read (STDIN_FILENO, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        hand_over (NULL);
      if (n == 0)
        break;
      buf_add (&stdin_seen, chunk, (size_t)n);
      if (memchr (chunk, '\n', (size_t)n) != NULL
          && nz_jl_parse (stdin_seen.data, stdin_seen.len, &root) && root.type == NZ_JL_OBJECT)
        break;
      if (stdin_seen.len > STDIN_HANDLE_MAX)
        hand_over (NULL);
    }
  for (s = stdin_seen.data, e = s + stdin_seen.len; s != NULL && s < e && *s != '\0' && strchr (" \t\n\r\f\v", *s); s++)
    ;
  if (s == NULL || s == e || !nz_jl_parse (s, (size_t)(e - s), &root) || root.type != NZ_JL_OBJECT
      || nz_jl_member (&root, "error", &(NzJlValue){ 0 }))
    hand_over (NULL);
  return nz_jl_member_string (&root, "id");
}

typedef struct
{
  char *id, *endpoint, *token;
} Handle;

static void
load_handle (const char *id, Handle *h)
{
  const char *env = getenv ("NAMZU_STATE_DIR"), *xdg = getenv ("XDG_RUNTIME_DIR");
  Buf path = { 0 }, text = { 0 };
  NzJlValue root, created;
  char *got_id, *backend, *tier;
  double num;
  int fd;

  if (env != NULL && *env != '\0')
    buf_printf (&path, "%s", env);
  else if (xdg != NULL && xdg[0] == '/')
    buf_printf (&path, "%s/namzu", xdg);
  else if (geteuid () == 0)
    buf_str (&path, "/run/namzu");
  if (path.data == NULL || path.data[0] != '/' || !id_is_valid (id))
    hand_over (NULL);
  buf_printf (&path, "/%s/handle.json", id);
  if ((fd = open (path.data, O_RDONLY | O_CLOEXEC)) < 0)
    hand_over (NULL);
  for (;;)
    {
      char chunk[4096];
      ssize_t n = read (fd, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 || text.len > HANDLE_FILE_MAX)
        hand_over (NULL);
      if (n == 0)
        break;
      buf_add (&text, chunk, (size_t)n);
    }
  close (fd);
  if (text.data == NULL || !nz_jl_parse (text.data, text.len, &root) || root.type != NZ_JL_OBJECT)
    hand_over (NULL);
  got_id = nz_jl_member_string (&root, "id");
  backend = nz_jl_member_string (&root, "backend");
  tier = nz_jl_member_string (&root, "tier");
  h->endpoint = nz_jl_member_string (&root, "endpoint");
  h->token = nz_jl_member_string (&root, "token");
  if (got_id == NULL || strcmp (got_id, id) != 0 || backend == NULL || tier == NULL
      || !nz_jl_member (&root, "createdAt", &created) || !nz_jl_number (&created, &num)
      || h->endpoint == NULL)
    hand_over (NULL);
  h->id = got_id;
  free (backend);
  free (tier);
  free (path.data);
  free (text.data);
}

/* ---- endpoints ------------------------------------------------------------------------------ */

typedef enum { EP_UNIX, EP_TCP, EP_HTTP } EpKind;

typedef struct
{
  EpKind kind;
  char *path, *host;
  unsigned port;
  char desc[PATH_MAX + 300]; /* nz_agent_endpoint_describe()'s text */
} Endpoint;

static void
parse_host_port (const char *hostport, Endpoint *ep)
{
  const char *colon = strrchr (hostport, ':');
  unsigned long port = 0;
  struct in_addr addr;

  if (colon == NULL || colon == hostport || colon[1] == '\0')
    hand_over (NULL);
  for (const char *p = colon + 1; *p != '\0'; p++)
    if (*p < '0' || *p > '9' || (port = port * 10 + (unsigned)(*p - '0')) > 65535)
      hand_over (NULL);
  ep->host = strndup (hostport, (size_t)(colon - hostport));
  if (port == 0 || inet_pton (AF_INET, ep->host, &addr) != 1)
    hand_over (NULL);
  ep->port = (unsigned)port;
}

static void
parse_endpoint (const char *text, Endpoint *ep)
{
  size_t len = strlen (text);

  if (len > 5 && len - 5 < PATH_MAX && strncmp (text, "unix:/", 6) == 0)
    {
      ep->kind = EP_UNIX;
      ep->path = strdup (text + 5);
      snprintf (ep->desc, sizeof ep->desc, "unix:%s", ep->path);
      return;
    }
  if (strncmp (text, "tcp:", 4) == 0)
    {
      ep->kind = EP_TCP;
      parse_host_port (text + 4, ep);
      snprintf (ep->desc, sizeof ep->desc, "tcp:%s:%u", ep->host, ep->port);
      return;
    }
  if (strncasecmp (text, "http://", 7) == 0)
    {
      char *hp = strdup (text + 7);
      size_t n = strlen (hp);

      while (n > 0 && hp[n - 1] == '/')
        hp[--n] = '\0';
      if (strpbrk (hp, "/@") != NULL)
        hand_over (NULL);
      ep->kind = EP_HTTP;
      parse_host_port (hp, ep);
      snprintf (ep->desc, sizeof ep->desc, "http://%s:%u", ep->host, ep->port);
      free (hp);
      return;
    }
  hand_over (NULL); /* vsock:, or a mistake the full implementation words */
}

/* ---- connections ---------------------------------------------------------------------------- */

typedef enum
{
  ERR_NONE,
  ERR_DIAL,      /* nothing was sent */
  ERR_CANCELLED, /* a signal arrived */
  ERR_PROTOCOL,
  ERR_INVALID,
  ERR_TIMED_OUT,
  ERR_FAILED,
  ERR_NOENT,
  ERR_NOEXEC,
} ErrKind;

typedef struct
{
  ErrKind kind;
  char msg[1024];
} Err;

static Endpoint ep;
static const char *token;
static int sigfd = -1;
static int got_signal;

static bool signal_pending (void);

static bool
set_err (Err *e, ErrKind kind, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static bool
set_err (Err *e, ErrKind kind, const char *fmt, ...)
{
  va_list ap;

  e->kind = kind;
  va_start (ap, fmt);
  vsnprintf (e->msg, sizeof e->msg, fmt, ap);
  va_end (ap);
  return false;
}

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct
{
  int fd;
  Buf in;
  size_t pos; /* start of the unread bytes in @in */
  bool eof;
} Conn;

static void
conn_close (Conn *k)
{
  if (k->fd >= 0)
    close (k->fd);
  free (k->in.data);
  *k = (Conn){ .fd = -1 };
}

/* Waits for @events on @k until @deadline; with @watch_signals a signal ends the wait. */
static bool
conn_wait (Conn *k, short events, int64_t deadline, bool watch_signals, Err *e)
{
  for (;;)
    {
      struct pollfd p[2] = { { k->fd, events, 0 }, { sigfd, POLLIN, 0 } };
      int64_t left = deadline - now_ms ();
      int r;

      if (left <= 0)
        return set_err (e, ERR_TIMED_OUT, "timed out");
      r = poll (p, watch_signals && sigfd >= 0 ? 2 : 1, (int)(left > INT_MAX ? INT_MAX : left));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return set_err (e, ERR_FAILED, "agent %s: poll: %s", ep.desc, strerror (errno));
      if (watch_signals && (p[1].revents & POLLIN) && signal_pending ())
        return set_err (e, ERR_CANCELLED, "Operation was cancelled");
      if (p[0].revents != 0)
        return true;
    }
}

/* An IPv4 literal only: a name would need NSS, which a static program cannot load reliably,
 * so names (and IPv6) are the full implementation's (parse_endpoint checks). */
static int
dial_inet (Err *e)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t)ep.port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err = 0, idle = NZ_HOST_TCP_KEEPALIVE_INITIAL_DELAY_S, on = 1, rc;
  socklen_t elen = sizeof err;
  struct pollfd p = { fd, POLLOUT, 0 };

  inet_pton (AF_INET, ep.host, &sa.sin_addr);
  if (fd < 0)
    err = errno;
  else if (connect (fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
    err = errno;
  else
    {
      while ((rc = poll (&p, 1, NZ_HOST_CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR)
        ;
      if (rc == 0)
        err = ETIMEDOUT;
      else if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    }
  if (err != 0)
    {
      set_err (e, ERR_DIAL, "Could not connect to %s: %s", ep.host, strerror (err));
      if (fd >= 0)
        close (fd);
      return -1;
    }
  /* The agent's keepalive (spec D.2.1), so a dead peer is noticed. */
  setsockopt (fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt (fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  return fd;
}

static bool
send_all (Conn *k, const char *data, size_t len, bool watch_signals, Err *e)
{
  while (len > 0)
    {
      ssize_t n;

      /* Write-idle bound: an agent that stops reading for this long is gone. */
      if (!conn_wait (k, POLLOUT, now_ms () + NZ_HOST_READ_IDLE_TIMEOUT_MS, watch_signals, e))
        return false;
      n = send (k->fd, data, len, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (n < 0)
        return set_err (e, ERR_FAILED, "agent %s: Error sending data: %s", ep.desc,
                        strerror (errno));
      data += n;
      len -= (size_t)n;
    }
  return true;
}

/* Reads more into @k->in. False on error; sets @k->eof at the end. */
static bool
conn_fill (Conn *k, int64_t deadline, bool watch_signals, Err *e)
{
  char chunk[65536];
  ssize_t n;

  if (!conn_wait (k, POLLIN, deadline, watch_signals, e))
    return false;
  n = recv (k->fd, chunk, sizeof chunk, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  /* A reset after the peer's last frame reads like a close. */
  if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)))
    k->eof = true;
  else if (n < 0)
    return set_err (e, ERR_FAILED, "agent %s: Error receiving data: %s", ep.desc,
                    strerror (errno));
  else
    buf_add (&k->in, chunk, (size_t)n);
  return true;
}

/* A worker: GET /v1/agent upgraded to namzu-agent/2 with the bearer token; what follows the
 * 101 head is agent framing (lib/client/nz-worker-http.c). */
static bool
http_upgrade (Conn *k, const char *what, Err *e)
{
  int64_t deadline = now_ms () + NZ_HOST_CONNECT_TIMEOUT_MS;
  Buf req = { 0 };
  char *end, *up;
  bool sent;

  buf_printf (&req, "GET /v1/agent HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: namzu\r\n"
                    "Connection: Upgrade\r\nUpgrade: namzu-agent/2\r\n", ep.host, ep.port);
  if (token != NULL && *token != '\0')
    buf_printf (&req, "Authorization: Bearer %s\r\n", token);
  buf_str (&req, "\r\n");
  sent = send_all (k, req.data, req.len, true, e);
  explicit_bzero (req.data, req.len);
  free (req.data);
  if (!sent)
    return false;
  while (k->in.data == NULL || (end = strstr (k->in.data, "\r\n\r\n")) == NULL)
    {
      if (k->in.len > HTTP_HEAD_LIMIT || k->eof || memchr (k->in.data ?: "", '\0', k->in.len))
        return set_err (e, ERR_FAILED, "agent %s: %s failed: no HTTP/1.1 101 response", ep.desc,
                        what);
      if (!conn_fill (k, deadline, true, e))
        return false;
    }
  *end = '\0';
  up = strcasestr (k->in.data, "\r\nUpgrade:");
  if (strncmp (k->in.data, "HTTP/1.", 7) != 0 || strncmp (k->in.data + 8, " 101", 4) != 0
      || up == NULL || strstr (up, "namzu-agent/2") == NULL)
    return set_err (e, ERR_FAILED, "agent %s: %s failed: HTTP %.3s", ep.desc, what,
                    k->in.len > 12 ? k->in.data + 9 : "???");
  k->pos = (size_t)(end + 4 - k->in.data);
  return true;
}

/* Dials, upgrades a worker connection, and sends the envelope {op, body?, token?}. */
static bool
conn_request (Conn *k, const char *op, const char *body, bool watch_signals, Err *e)
{
  Buf env = { 0 };
  char header[10];
  bool ok;

  *k = (Conn){ .fd = -1 };
  if (ep.kind == EP_UNIX)
    {
      struct sockaddr_un sa = { .sun_family = AF_UNIX };

      k->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      snprintf (sa.sun_path, sizeof sa.sun_path, "%s", ep.path);
      if (k->fd < 0 || strlen (ep.path) >= sizeof sa.sun_path
          || connect (k->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        {
          set_err (e, ERR_DIAL, "Could not connect: %s", strerror (errno));
          return false;
        }
      fcntl (k->fd, F_SETFL, O_NONBLOCK);
    }
  else if ((k->fd = dial_inet (e)) < 0)
    return false;
  if (ep.kind == EP_HTTP && !http_upgrade (k, op, e))
    return false;
  buf_printf (&env, "%08x\n{\"op\":\"%s\"", 0, op);
  if (body != NULL)
    buf_printf (&env, ",\"body\":%s", body);
  /* A worker takes the token in its bearer header instead. */
  if (token != NULL && ep.kind != EP_HTTP)
    {
      buf_str (&env, ",\"token\":");
      if (!buf_json_string (&env, token))
        hand_over (NULL);
    }
  buf_str (&env, "}");
  snprintf (header, sizeof header, "%08x", (unsigned)(env.len - 9));
  memcpy (env.data, header, 8);
  ok = send_all (k, env.data, env.len, watch_signals, e);
  explicit_bzero (env.data, env.len);
  free (env.data);
  return ok;
}

typedef enum { READ_FRAME, READ_EOF, READ_TIMEOUT, READ_ERROR } ReadStatus;

/* The next frame's payload (empty: the terminator) into *@payload (valid until the next
 * read), or EOF, or @deadline passing. */
static ReadStatus
conn_read_frame (Conn *k, int64_t deadline, bool watch_signals, NzJlValue *frame, size_t *plen,
                 Err *e)
{
  for (;;)
    {
      const char *p = k->in.data + k->pos;
      size_t avail = k->in.len - k->pos;
      const char *nl = avail > 0 ? memchr (p, '\n', avail < 9 ? avail : 9) : NULL;
      unsigned long long len = 0;

      if (nl != NULL && nl - p != 8)
        return set_err (e, ERR_PROTOCOL, "agent %s: malformed frame header (newline at %d)",
                        ep.desc, (int)(nl - p)), READ_ERROR;
      if (avail >= 9 && nl == NULL)
        return set_err (e, ERR_PROTOCOL,
                        "agent %s: malformed frame header (no newline in the first 9 bytes)",
                        ep.desc), READ_ERROR;
      if (avail >= 9)
        {
          if (strspn (p, "0123456789abcdefABCDEF") < 8)
            return set_err (e, ERR_PROTOCOL, "agent %s: invalid frame length header \"%.8s\"",
                            ep.desc, p), READ_ERROR;
          len = strtoull (p, NULL, 16);
          if (len > REPLY_FRAME_LIMIT)
            return set_err (e, ERR_PROTOCOL,
                            "agent %s: frame announces %llu bytes, over the %u-byte limit",
                            ep.desc, len, REPLY_FRAME_LIMIT), READ_ERROR;
          if (avail >= 9 + len)
            {
              *plen = (size_t)len;
              frame->start = p + 9;
              frame->len = (size_t)len;
              k->pos += 9 + (size_t)len;
              return READ_FRAME;
            }
        }
      if (k->eof)
        return READ_EOF;
      /* Keep the buffer from growing with consumed frames. */
      if (k->pos > 0)
        {
          memmove (k->in.data, k->in.data + k->pos, avail);
          k->in.len = avail;
          k->pos = 0;
        }
      if (!conn_fill (k, deadline, watch_signals, e))
        return e->kind == ERR_TIMED_OUT ? READ_TIMEOUT : READ_ERROR;
    }
}

/* After the last frame the agent closes its side (spec D.2.4's strings). */
static bool
conn_expect_close (Conn *k, const char *what, bool control, bool watch_signals, Err *e)
{
  NzJlValue extra;
  size_t len;

  switch (conn_read_frame (k, now_ms () + NZ_HOST_POST_RESPONSE_CLOSE_TIMEOUT_MS, watch_signals, &extra,
                           &len, e))
    {
    case READ_EOF:
      if (k->in.len > k->pos)
        return set_err (e, ERR_PROTOCOL, "agent %s: %s has trailing partial data", ep.desc, what);
      return true;
    case READ_FRAME:
      return set_err (e, ERR_PROTOCOL, "agent %s: %s emitted %s", ep.desc, what,
                      control ? "multiple frames" : "data after its terminator");
    case READ_TIMEOUT:
      if (k->in.len > k->pos)
        return set_err (e, ERR_PROTOCOL, "agent %s: %s has trailing partial data", ep.desc, what);
      return set_err (e, ERR_PROTOCOL, "agent %s: %s peer did not close after %s", ep.desc,
                      control ? "control" : what, control ? "reply" : "terminator");
    case READ_ERROR:
    default:
      return false;
    }
}

/* Reads the one reply of a reply op on @k, copied to *@out (free it). */
static bool
read_reply (Conn *k, unsigned idle_ms, bool watch_signals, char **out, NzJlValue *reply, Err *e)
{
  size_t len = 0;

  switch (conn_read_frame (k, now_ms () + idle_ms, watch_signals, reply, &len, e))
    {
    case READ_FRAME:
      break;
    case READ_EOF:
      return set_err (e, ERR_PROTOCOL, "agent %s: %s", ep.desc, k->in.len > k->pos
                          ? "control reply has trailing partial data" : "socket closed before reply");
    case READ_TIMEOUT:
      return set_err (e, ERR_TIMED_OUT, "agent %s: read idle timeout after %ums", ep.desc, idle_ms);
    default:
      return false;
    }
  *out = strndup (reply->start, len);
  if (len == 0 || !nz_jl_parse (*out, len, reply) || reply->type != NZ_JL_OBJECT)
    return set_err (e, ERR_PROTOCOL, "agent %s: %s", ep.desc, len == 0
                        ? "control reply was an empty frame" : "reply is not a JSON object");
  return conn_expect_close (k, "control reply", true, watch_signals, e);
}

/* One reply op on its own connection. */
static bool
call (const char *op, const char *body, unsigned idle_ms, bool watch_signals, char **out,
      NzJlValue *reply, Err *e)
{
  Conn k;
  bool ok = conn_request (&k, op, body, watch_signals, e)
            && read_reply (&k, idle_ms, watch_signals, out, reply, e);

  conn_close (&k);
  return ok;
}

/* ---- cancel, the stream, the status ------------------------------------------------------- */

/* Cancels @id and waits for the agent's confirmation within the budget, retrying lost
 * connections (spec D.2.5); further signals are not watched. */
static bool
cancel_and_confirm (const char *id, Err *e)
{
  int64_t deadline = now_ms () + NZ_HOST_CANCEL_CONFIRM_BUDGET_MS;
  char body[160], last[sizeof e->msg] = "no attempt";

  snprintf (body, sizeof body, "{\"executionId\":\"%s\"}", id);
  while (now_ms () < deadline)
    {
      int64_t left = deadline - now_ms ();
      unsigned attempt = (unsigned)(left < NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS ? (left > 0 ? left : 1)
                                                                     : NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS);
      char *text = NULL, *err, *msg;
      NzJlValue reply;
      bool ok;

      if (!call ("cancel-execution", body, attempt, false, &text, &reply, e))
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
        set_err (e, ERR_FAILED, "agent %s: could not confirm that execution %s stopped (%s%s%s); "
                 "treat the sandbox as unusable and recreate it", ep.desc, id,
                 err ? err : "unknown error", msg ? ": " : "", msg ? msg : "");
      free (err);
      free (msg);
      free (text);
      return ok;
    }
  return set_err (e, ERR_FAILED, "could not confirm that execution %s stopped within %ums: %s", id,
                  NZ_HOST_CANCEL_CONFIRM_BUDGET_MS, last);
}

/* lib/client's set_agent_error() for an execute refusal. */
static void
agent_error (const char *code, const char *message, Err *e)
{
  char text[768];
  size_t n = strlen (code);

  if (message != NULL && *message != '\0')
    snprintf (text, sizeof text, "%s (%s)", code, message);
  else
    snprintf (text, sizeof text, "%s", code);
  if (strncmp (code, "spawn ", 6) == 0 && n > 7 && strcmp (code + n - 7, " ENOENT") == 0)
    set_err (e, ERR_NOENT, "%s", text);
  else if (strncmp (code, "spawn ", 6) == 0
           && ((n > 7 && strcmp (code + n - 7, " EACCES") == 0)
               || (n > 6 && strcmp (code + n - 6, " EPERM") == 0)
               || (n > 8 && strcmp (code + n - 8, " ENOEXEC") == 0)))
    set_err (e, ERR_NOEXEC, "%s", text);
  else if (strcmp (code, "agent_retiring") == 0)
    set_err (e, ERR_FAILED, "agent %s: agent is retiring: it fenced itself after a process-group "
             "shutdown could not be confirmed, so the sandbox must be recreated", ep.desc);
  else if (strncmp (code, "unknown_op:", 11) == 0)
    set_err (e, ERR_PROTOCOL, "agent %s: the agent does not implement guest agent protocol 2 "
             "(%s); run a namzu-agent from the same namzu release as this host", ep.desc, code);
  else if (strncmp (code, "invalid_", 8) == 0 || strcmp (code, "missing_command") == 0)
    set_err (e, ERR_INVALID, "execute refused: %s", text);
  else
    set_err (e, ERR_FAILED, "execute refused: %s", text);
}

static bool
write_all (int fd, const char *data, size_t len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          struct pollfd p = { fd, POLLOUT, 0 };

          poll (&p, 1, -1);
          continue;
        }
      if (n <= 0)
        return false;
      data += n;
      len -= (size_t)n;
    }
  return true;
}

/* nz_exec_exit_status(): timeout, then the signal, then the code; -1 if none is usable. */
static int
exit_status (const NzJlValue *result)
{
  char *name = nz_jl_member_string (result, "signal");
  NzJlValue code;
  double d;
  int status = -1;

  if (nz_jl_member_bool (result, "timedOut", false))
    status = 124;
  if (status < 0 && nz_signame_lookup (name) > 0)
    status = 128 + nz_signame_lookup (name);
  if (status < 0 && nz_jl_member (result, "exitCode", &code) && nz_jl_number (&code, &d) && d >= 0
      && d <= 255 && d == (int)d)
    status = (int)d;
  free (name);
  return status;
}

typedef struct
{
  char *result; /* the result frame's text */
  char *error_code, *error_message;
  bool broken_output;
} Stream;

/* One frame of the exec stream (lib/client's exec_frame and exec_output_frame). Returns
 * false to stop reading: an error, a refusal, or output that could not be written. */
static bool
stream_frame (Stream *s, const NzJlValue *raw, bool *refused, Err *e)
{
  NzJlValue frame, v;
  char *type, *data;
  size_t dlen = 0;

  if (!nz_jl_parse (raw->start, raw->len, &frame) || frame.type != NZ_JL_OBJECT)
    return set_err (e, ERR_PROTOCOL, "agent %s: exec stream frame: not a JSON object", ep.desc);
  if (s->result != NULL || s->error_code != NULL)
    return set_err (e, ERR_PROTOCOL, "agent %s: exec stream sent a frame after its result",
                    ep.desc);
  type = nz_jl_member_string (&frame, "type");
  if ((type == NULL && nz_jl_member (&frame, "ok", &v)) || (type && strcmp (type, "error") == 0))
    {
      /* A reply-shaped refusal (e.g. agent_retiring, spec A.5) ends with no terminator. */
      *refused = type == NULL;
      s->error_code = nz_jl_member_string (&frame, "error");
      s->error_message = nz_jl_member_string (&frame, "message");
      if (s->error_code == NULL)
        s->error_code = strdup ("unknown error");
    }
  else if (type != NULL && strcmp (type, "result") == 0)
    s->result = strndup (raw->start, raw->len);
  else if (type != NULL && (strcmp (type, "stdout_delta") == 0 || strcmp (type, "stderr_delta") == 0)
           && (data = nz_jl_member_string (&frame, "data")) != NULL)
    {
      (void)nz_jl_member (&frame, "data", &v);
      free (data);
      data = nz_jl_string (&v, &dlen);
      if (dlen > 0 && !write_all (type[1] == 't' && type[3] == 'o' ? STDOUT_FILENO : STDERR_FILENO,
                                  data, dlen))
        s->broken_output = true;
      free (data);
    }
  free (type);
  return !s->broken_output;
}

/* execute on its own connection until the terminator. */
static bool
run_stream (const char *request, unsigned long long observation_ms, Stream *s, Err *e)
{
  int64_t deadline = now_ms () + (int64_t)observation_ms;
  Conn k;
  bool ok = false, refused = false;

  if (!conn_request (&k, "execute", request, true, e))
    {
      conn_close (&k);
      return false;
    }
  for (;;)
    {
      NzJlValue raw;
      size_t len = 0;
      ReadStatus st = conn_read_frame (&k, deadline, true, &raw, &len, e);

      if (st == READ_EOF)
        set_err (e, ERR_PROTOCOL, "agent %s: %s", ep.desc, k.in.len > k.pos
                     ? "exec stream has trailing partial data"
                     : "socket closed before exec stream terminator");
      else if (st == READ_TIMEOUT)
        set_err (e, ERR_TIMED_OUT, "agent %s: exec stream observation exceeded %llums", ep.desc,
                 observation_ms);
      if (st != READ_FRAME)
        break;
      if (len == 0)
        {
          ok = conn_expect_close (&k, "exec stream", false, true, e);
          break;
        }
      if (!stream_frame (s, &raw, &refused, e) || refused)
        {
          ok = refused;
          break;
        }
    }
  conn_close (&k);
  if (ok && s->result == NULL && s->error_code == NULL)
    ok = set_err (e, ERR_PROTOCOL, "agent %s: exec stream ended without a result event", ep.desc);
  if (ok && s->error_code != NULL)
    ok = (agent_error (s->error_code, s->error_message, e), false);
  return ok;
}

/* main.c's finish() for a failure after execute was sent. @target: "sandbox ID" or NULL. */
static int
report (const Err *e, const char *command, const char *target)
{
  if (e->kind == ERR_NOENT)
    return say ("%s: command not found in the sandbox (%s)", command, e->msg), 127;
  if (e->kind == ERR_NOEXEC)
    return say ("%s: cannot execute (%s)", command, e->msg), 126;
  if (e->kind == ERR_INVALID || e->kind == ERR_PROTOCOL)
    return say ("%s", e->msg), EXIT_NAMZU;
  if (e->kind == ERR_DIAL && target == NULL)
    return say ("cannot reach agent %s: %s; is namzu-agent running there? (namzu-ls lists the "
                "sandboxes)", ep.desc, e->msg), EXIT_NAMZU;
  if (e->kind == ERR_DIAL)
    return say ("cannot reach %s (agent %s: %s); it may have stopped: check namzu-ls, or create a "
                "new sandbox with namzu-create", target, ep.desc, e->msg), EXIT_NAMZU;
  if (target != NULL)
    return say ("%s; the command's outcome in %s is unknown (check it with namzu-ls)", e->msg,
                target), EXIT_NAMZU;
  return say ("%s", e->msg), EXIT_NAMZU;
}

static bool
signal_pending (void)
{
  struct signalfd_siginfo si;

  if (read (sigfd, &si, sizeof si) != sizeof si)
    return false;
  got_signal = (int)si.ssi_signo;
  return true;
}

static void
watch_signals (void)
{
  sigset_t set;

  sigemptyset (&set);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGHUP);
  /* Blocked and read from a signalfd: a signal ends the current wait, never a write. */
  sigprocmask (SIG_BLOCK, &set, &saved_mask);
  mask_saved = true;
  sigfd = signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0)
    hand_over (NULL);
}

int
main (int argc, char **argv)
{
  /* Static: what is still allocated at exit stays reachable (LeakSanitizer's view). */
  static Opts o;
  static Handle h;
  static Buf body, request;
  static Stream s;
  static char *reserved, *id;
  Err e = { 0 };
  NzJlValue reply;
  char target[64] = "";
  double t = 0;
  unsigned long long observation_ms = NZ_HOST_DEFAULT_EXECUTION_TIMEOUT_MS;
  int status;

  saved_argv = argv;
  /* Only our own hand-over may ask namzu-exec-full to retire a sandbox. */
  unsetenv (NZ_EXEC_RETIRE_ENV);
  parse_options (argc, argv, &o);
  build_body (&o, &body);
  if (o.endpoint != NULL)
    {
      parse_endpoint (o.endpoint, &ep);
      token = getenv ("NAMZU_TOKEN");
    }
  else
    {
      const char *env = getenv ("NAMZU_SANDBOX");
      char *sid = o.sandbox != NULL && *o.sandbox != '\0' ? strdup (o.sandbox)
                  : env != NULL && *env != '\0'           ? strdup (env)
                  : !isatty (STDIN_FILENO)                ? read_handle_id ()
                                                          : NULL;

      if (sid == NULL)
        hand_over (NULL);
      load_handle (sid, &h);
      parse_endpoint (h.endpoint, &ep);
      token = h.token;
      snprintf (target, sizeof target, "sandbox %s", h.id);
      free (sid);
    }
  /* What a token-gated agent would refuse unread goes where that refusal is worded. */
  if (ep.kind == EP_TCP && body.len + (token ? 6 * strlen (token) : 0) + 256 > TCP_PREAUTH_FRAME_LIMIT)
    hand_over (NULL);
  if (o.timeout != NULL)
    t = (double)parse_timeout_ms (o.timeout);
  if (t > 0 && t < 1e15)
    observation_ms = (unsigned long long)t;
  observation_ms += NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS;
  if (observation_ms > INT32_MAX)
    observation_ms = INT32_MAX;

  /* A vanished reader is noticed as a write error (then we cancel), not a silent death. */
  signal (SIGPIPE, SIG_IGN);
  watch_signals ();
  /* No body: the agent mints the id (spec A.3). Any failure here ran nothing. */
  if (!call ("reserve-execution", NULL, NZ_HOST_READ_IDLE_TIMEOUT_MS, true, &reserved, &reply, &e))
    {
      if (e.kind != ERR_CANCELLED)
        hand_over (NULL);
      say ("%s: %s", nz_signame (got_signal), e.msg);
      return 128 + got_signal;
    }
  /* The id goes back into JSON unescaped (cancel's body): only the shape agents mint. */
  if (!nz_jl_member_bool (&reply, "ok", false)
      || (id = nz_jl_member_string (&reply, "executionId")) == NULL || strlen (id) > 64
      || id[strspn (id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")] != '\0')
    hand_over (NULL);
  /* A signal while reserving: the record is cancelled too, so it can never start later. */
  if (!signal_pending ())
    {
      buf_add (&request, body.data, body.len);
      buf_str (&request, ",\"executionId\":");
      buf_json_string (&request, id);
      buf_str (&request, "}");
      if (run_stream (request.data, observation_ms, &s, &e))
        {
          status = nz_jl_parse (s.result, strlen (s.result), &reply) ? exit_status (&reply) : -1;
          if (status < 0)
            return say ("the agent reported no usable exit status"), EXIT_NAMZU;
          return status;
        }
      if (e.kind != ERR_CANCELLED && !s.broken_output)
        return report (&e, o.command[0], target[0] ? target : NULL);
    }
  /* Whatever the stream was doing, the caller wants the command gone: cancel by id. */
  if (!cancel_and_confirm (id, &e))
    {
      if (target[0] == '\0')
        return say ("%s; no sandbox to retire with --endpoint: stop that agent yourself", e.msg),
               EXIT_NAMZU;
      hand_over (e.msg);
    }
  if (got_signal == 0)
    return 128 + SIGPIPE;
  say ("%s: execution %s cancelled; the agent confirmed it stopped", nz_signame (got_signal), id);
  return 128 + got_signal;
}
