/* hostile-agent: a fake guest agent (or namzu-worker) that answers one op the way a hostile
 * workload that took over its agent could. It stands in for a compromised sandbox, which the
 * tests cannot build on purpose; everything else about it is the real wire (spec A.2 framing,
 * the worker's GET /healthz and GET /v1/agent upgrade).
 *
 *   hostile-agent unix:/PATH SHAPE OP     a unix socket agent
 *   hostile-agent http SHAPE OP           a worker-shaped HTTP server on 127.0.0.1, port 0
 *
 * Prints "listening on <endpoint>" once bound. healthz (and reserve-execution, so an exec gets
 * as far as its stream) are answered correctly; OP gets SHAPE; any other op gets {"ok":true}.
 * OP "http-head" makes the worker's HTTP response itself hostile. Each connection is served
 * by a forked child, so a silent or endless one never holds up the next. libc only. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *shape, *target;

static const char healthz[]
    = "{\"ok\":true,\"protocolVersion\":2,\"features\":[\"write-file-parts\",\"execution-attach\","
      "\"stream-heartbeat\",\"read-file-stream\",\"sessions\",\"quiesce\",\"flush\","
      "\"guest-boot-id\"],\"gb\":\"boot\"}";

static void
put (int fd, const void *data, size_t len)
{
  const char *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        _exit (0); /* the client hung up: that is what it should do */
      p += n;
      len -= (size_t)n;
    }
}

static void
put_frame (int fd, const char *payload, size_t len)
{
  char head[32];

  snprintf (head, sizeof head, "%08x\n", (unsigned)len);
  put (fd, head, 9);
  put (fd, payload, len);
}

static void
put_json (int fd, const char *payload)
{
  put_frame (fd, payload, strlen (payload));
}

static void
put_terminator (int fd)
{
  put (fd, "00000000\n", 9);
}

/* Reads the request frame; returns its payload (malloc'd, NUL-terminated) or NULL. */
static char *
read_request (int fd, char *pre, size_t pre_len)
{
  char head[9];
  size_t got = 0;
  char *body;
  unsigned long len;

  if (pre_len > 0)
    {
      size_t n = pre_len < 9 ? pre_len : 9;

      memcpy (head, pre, n);
      got = n;
      pre += n;
      pre_len -= n;
    }
  while (got < 9)
    {
      ssize_t n = read (fd, head + got, 9 - got);

      if (n <= 0)
        return NULL;
      got += (size_t)n;
    }
  head[8] = '\0';
  len = strtoul (head, NULL, 16);
  if (len > (64u << 20))
    return NULL;
  body = calloc (1, len + 1);
  got = pre_len < len ? pre_len : len;
  if (got > 0)
    memcpy (body, pre, got);
  while (got < len)
    {
      ssize_t n = read (fd, body + got, len - got);

      if (n <= 0)
        break;
      got += (size_t)n;
    }
  return body;
}

static bool
is_stream_op (const char *op)
{
  static const char *const streams[] = { "execute",  "attach-execution", "attach-session",
                                         "terminal", "read-file-stream", "tcp-connect",
                                         NULL };

  for (int i = 0; streams[i] != NULL; i++)
    if (strcmp (op, streams[i]) == 0)
      return true;
  return false;
}

/* The frame that would end @op's stream, with @members inside. */
static void
put_terminal_frame (int fd, const char *op, const char *members)
{
  char buf[1024];
  const char *type = strcmp (op, "execute") == 0            ? "result"
                     : strcmp (op, "attach-execution") == 0 ? "attach_result"
                     : strcmp (op, "read-file-stream") == 0 ? "end"
                                                            : "exit";

  snprintf (buf, sizeof buf, "{\"type\":\"%s\"%s%s}", type, *members != '\0' ? "," : "", members);
  put_json (fd, buf);
}

static void
silent (int fd)
{
  char buf[256];

  /* Never answers; returns when the client hangs up. */
  while (read (fd, buf, sizeof buf) > 0)
    ;
  _exit (0);
}

static void
deep (int fd, const char *prefix, size_t levels)
{
  size_t plen = strlen (prefix);
  size_t len = plen + 2 * levels + 1;
  char *p = malloc (len);

  memcpy (p, prefix, plen);
  memset (p + plen, '[', levels);
  memset (p + plen + levels, ']', levels);
  p[len - 1] = '}';
  put_frame (fd, p, len);
  free (p);
}

/* Answers @op with the test's shape. */
static void
hostile (int fd, const char *op)
{
  bool stream = is_stream_op (op);

  if (strcmp (shape, "extra-members") == 0)
    {
      /* A well-formed end whose frame carries members nobody documented and documented ones
       * of the wrong type: what a host prints must be its own documented shape. */
      if (!stream)
        put_json (fd, "{\"ok\":true,\"injected\":\"pwned\",\"durationMs\":\"x\","
                      "\"scope\":\"pid-namespace\",\"graceMs\":\"x\",\"rounds\":1,\"stopped\":"
                      "[{\"pid\":1,\"command\":\"sh\",\"signal\":\"SIGTERM\",\"evil\":1},\"evil\"],"
                      "\"sessions\":[{\"sessionId\":\"s1\",\"kind\":\"detached\",\"command\":"
                      "\"sh\",\"args\":[\"-c\",5],\"startedAt\":1,\"lastInputAt\":1,"
                      "\"lastOutputAt\":1,\"nextOffset\":0,\"droppedBytes\":0,\"state\":"
                      "\"running\",\"attached\":false,\"evil\":true}]}");
      else
        {
          put_json (fd, "{\"type\":\"stdout_delta\",\"data\":\"hi\\n\",\"injected\":1}");
          put_terminal_frame (fd, op,
                              "\"exitCode\":0,\"timedOut\":\"no\",\"durationMs\":\"x\","
                              "\"signal\":\"SIGNOPE\",\"stdoutTruncated\":[],\"injected\":"
                              "\"pwned\",\"timing\":{\"evil\":1},\"executionId\":\"exec_evil\"");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "wrong-types") == 0)
    {
      if (!stream)
        put_json (fd, "{\"ok\":true,\"error\":5,\"message\":[],\"executionId\":5,\"state\":{},"
                      "\"sizeBytes\":\"12\",\"sessions\":5,\"stopped\":\"all\",\"rounds\":[],"
                      "\"result\":7,\"sessionId\":false,\"durationMs\":\"x\"}");
      else
        {
          put_json (fd, "{\"type\":\"ready\",\"heartbeatMs\":\"x\",\"nextOffset\":\"x\"}");
          put_json (fd, "{\"type\":\"attached\",\"fromOffset\":-1e300,\"droppedBytes\":1e300}");
          put_json (fd, "{\"type\":\"meta\",\"length\":1e300,\"sizeBytes\":\"x\"}");
          put_json (fd, "{\"type\":\"stdout_delta\",\"data\":5,\"nextOffset\":1e300}");
          put_json (fd, "{\"type\":\"stderr_delta\",\"data\":[],\"offset\":\"x\"}");
          put_json (fd, "{\"type\":\"data\",\"data\":5,\"stream\":5,\"nextOffset\":-1}");
          put_json (fd, "{\"type\":5,\"data\":\"x\"}");
          put_terminal_frame (fd, op,
                              "\"exitCode\":\"0\",\"signal\":1e300,\"timedOut\":\"y\","
                              "\"result\":5,\"outcome\":[],\"error\":{},"
                              "\"bytesSent\":\"x\",\"nextOffset\":-5");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "wrong-types-refusal") == 0)
    {
      if (!stream)
        put_json (fd, "{\"ok\":false,\"error\":5,\"message\":{\"a\":1}}");
      else
        {
          put_json (fd, "{\"type\":\"error\",\"error\":5,\"message\":[]}");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "nulls") == 0)
    {
      if (!stream)
        put_json (fd, "{\"ok\":null,\"error\":null,\"message\":null,\"executionId\":null}");
      else
        {
          put_json (fd, "{\"type\":\"ready\",\"gb\":null,\"heartbeatMs\":null}");
          put_json (fd, "{\"type\":null,\"data\":null}");
          put_json (fd, "{\"type\":\"stdout_delta\",\"data\":null,\"nextOffset\":null}");
          put_json (fd, "{\"type\":\"data\",\"data\":null,\"stream\":null}");
          put_json (fd, "{\"type\":\"meta\",\"length\":null}");
          put_terminal_frame (fd, op,
                              "\"exitCode\":null,\"signal\":null,\"result\":null,"
                              "\"outcome\":null,\"error\":null,\"bytesSent\":null");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "ok-nulls") == 0)
    {
      if (!stream)
        put_json (fd, "{\"ok\":true,\"error\":null,\"message\":null,\"executionId\":null,"
                      "\"state\":null,\"sessions\":null,\"stopped\":null,\"sizeBytes\":null}");
      else
        {
          put_json (fd, "{\"type\":\"error\",\"error\":null,\"message\":null}");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "missing") == 0)
    {
      if (!stream)
        put_json (fd, "{}");
      else
        {
          put_json (fd, "{}");
          put_json (fd, "{\"type\":\"ready\"}");
          put_json (fd, "{\"type\":\"stdout_delta\"}");
          put_json (fd, "{\"type\":\"data\"}");
          put_json (fd, "{\"type\":\"meta\",\"length\":0}");
          put_json (fd, "{\"type\":\"detached\"}");
          put_terminal_frame (fd, op, "");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "error-bare") == 0)
    {
      /* An error frame with nothing else: no code, no message. */
      if (!stream)
        put_json (fd, "{\"ok\":false}");
      else
        {
          put_json (fd, "{\"type\":\"error\"}");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "not-object") == 0)
    {
      put_json (fd, stream ? "5" : "[]");
      put_terminator (fd);
    }
  else if (strcmp (shape, "bad-json") == 0)
    put_json (fd, "{\"ok\":tru");
  else if (strcmp (shape, "garbage-header") == 0)
    put (fd, "zzzzzzzz\n{}", 11);
  else if (strcmp (shape, "huge-announce") == 0)
    /* 4 GiB - 1 announced: a client that allocates what it is told dies here. */
    put (fd, "ffffffff\n{\"ok\":true", 19);
  else if (strcmp (shape, "truncated") == 0)
    put (fd, "00000064\n{\"ok\":true", 19);
  else if (strcmp (shape, "truncated-header") == 0)
    put (fd, "0000", 4);
  else if (strcmp (shape, "silent") == 0)
    silent (fd);
  else if (strcmp (shape, "ready-silent") == 0)
    {
      /* Ready, a 100 ms heartbeat agreed, then nothing ever again. */
      put_json (fd, "{\"type\":\"ready\",\"heartbeatMs\":100}");
      silent (fd);
    }
  else if (strcmp (shape, "endless") == 0)
    {
      /* Frames for ever, each a valid one of the op's kind. */
      for (;;)
        put_json (fd, stream ? "{\"type\":\"heartbeat\"}" : "{\"ok\":true}");
    }
  else if (strcmp (shape, "endless-partial") == 0)
    {
      /* One frame that announces 200 MiB and trickles it without end. */
      static char zeros[65536];

      memset (zeros, ' ', sizeof zeros);
      put (fd, "0c800000\n{\"ok\":true,\"x\":\"", 25);
      for (;;)
        put (fd, zeros, sizeof zeros);
    }
  else if (strcmp (shape, "deep") == 0)
    {
      /* Deep nesting: json-glib recurses once per level. */
      deep (fd, stream ? "{\"type\":\"stdout_delta\",\"data\":\"x\",\"a\":" : "{\"ok\":true,\"a\":",
            1u << 20);
      if (stream)
        put_terminator (fd);
    }
  else if (strcmp (shape, "wrong-kind") == 0)
    {
      /* A reply op gets a stream; a stream op gets a reply and no terminator. */
      if (!stream)
        {
          put_json (fd, "{\"type\":\"result\",\"exitCode\":0}");
          put_terminator (fd);
        }
      else
        put_json (fd, "{\"ok\":true,\"executionId\":\"x\",\"result\":{\"exitCode\":0}}");
    }
  else if (strcmp (shape, "wrong-id") == 0)
    {
      if (!stream)
        put_json (fd, "{\"ok\":true,\"executionId\":\"exec_somebody_else\",\"state\":\"running\","
                      "\"sessionId\":\"other\"}");
      else
        {
          put_json (fd, "{\"type\":\"attached\",\"executionId\":\"other\",\"fromOffset\":0,"
                        "\"droppedBytes\":0,\"sessionId\":\"other\"}");
          put_terminal_frame (fd, op,
                              "\"executionId\":\"other\",\"exitCode\":0,"
                              "\"outcome\":\"completed\",\"result\":{\"exitCode\":0}");
          put_terminator (fd);
        }
    }
  else if (strcmp (shape, "after-terminator") == 0)
    {
      if (stream)
        {
          put_terminal_frame (fd, op,
                              "\"exitCode\":0,\"result\":{\"exitCode\":0},"
                              "\"bytesSent\":0");
          put_terminator (fd);
        }
      else
        put_json (fd, "{\"ok\":true}");
      for (;;)
        put_json (fd, "{\"ok\":true}");
    }
  else
    {
      fprintf (stderr, "hostile-agent: unknown shape %s\n", shape);
      _exit (2);
    }
}

static char *
op_of (const char *req)
{
  const char *p = req != NULL ? strstr (req, "\"op\":\"") : NULL;
  const char *end;

  if (p == NULL)
    return strdup ("");
  p += 6;
  end = strchr (p, '"');
  return strndup (p, end != NULL ? (size_t)(end - p) : strlen (p));
}

static void
serve_agent (int fd, char *pre, size_t pre_len)
{
  char *req = read_request (fd, pre, pre_len);
  char *op = op_of (req);

  if (strcmp (op, target) == 0)
    hostile (fd, op);
  else if (strcmp (op, "healthz") == 0)
    put_json (fd, healthz);
  else if (strcmp (op, "reserve-execution") == 0)
    put_json (fd, "{\"ok\":true,\"executionId\":\"exec_hostile\",\"state\":\"reserved\"}");
  else
    put_json (fd, "{\"ok\":true}");
  shutdown (fd, SHUT_WR);
  silent (fd);
}

static void
serve_http (int fd)
{
  char buf[8192];
  size_t got = 0;
  char *end = NULL;

  while (end == NULL && got < sizeof buf - 1)
    {
      ssize_t n = read (fd, buf + got, sizeof buf - 1 - got);

      if (n <= 0)
        _exit (0);
      got += (size_t)n;
      buf[got] = '\0';
      end = strstr (buf, "\r\n\r\n");
    }
  if (end == NULL)
    _exit (0);
  if (strcmp (target, "http-head") == 0)
    {
      if (strcmp (shape, "silent") == 0)
        silent (fd);
      if (strcmp (shape, "endless") == 0)
        {
          put (fd, "HTTP/1.1 200 OK\r\n", 17);
          for (;;)
            put (fd, "X-A: b\r\n", 8);
        }
      if (strcmp (shape, "garbage-header") == 0)
        put (fd, "SSH-2.0-OpenSSH\r\n\r\n", 19);
      else if (strcmp (shape, "huge-announce") == 0)
        {
          put (fd, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n{", 52);
          for (;;)
            put (fd, "[[[[[[[[", 8);
        }
      else if (strcmp (shape, "deep") == 0)
        {
          const char head[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";

          put (fd, head, strlen (head));
          deep (fd, "{\"ok\":true,\"a\":", 1u << 20);
        }
      else
        put (fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\n\r\n", 52);
      _exit (0);
    }
  if (strncmp (buf, "GET /healthz ", 13) == 0)
    {
      char head[256];

      snprintf (head, sizeof head,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                "Connection: close\r\n\r\n",
                strlen (healthz));
      put (fd, head, strlen (head));
      put (fd, healthz, strlen (healthz));
      _exit (0);
    }
  {
    const char up[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                      "Upgrade: namzu-agent/2\r\n\r\n";

    put (fd, up, strlen (up));
    end += 4;
    serve_agent (fd, end, got - (size_t)(end - buf));
  }
}

int
main (int argc, char **argv)
{
  bool http;
  int lfd;

  if (argc != 4)
    {
      fprintf (stderr, "usage: hostile-agent unix:/PATH|http SHAPE OP\n");
      return 2;
    }
  shape = argv[2];
  target = argv[3];
  http = strcmp (argv[1], "http") == 0;
  signal (SIGCHLD, SIG_IGN); /* children reap themselves */
  signal (SIGPIPE, SIG_DFL);
  if (http)
    {
      struct sockaddr_in sin
          = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
      socklen_t sl = sizeof sin;

      lfd = socket (AF_INET, SOCK_STREAM, 0);
      if (lfd < 0 || bind (lfd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen (lfd, 64) < 0
          || getsockname (lfd, (struct sockaddr *)&sin, &sl) < 0)
        return perror ("hostile-agent: listen"), 1;
      printf ("listening on http://127.0.0.1:%u\n", ntohs (sin.sin_port));
    }
  else
    {
      struct sockaddr_un sun = { .sun_family = AF_UNIX };

      if (strncmp (argv[1], "unix:", 5) != 0 || strlen (argv[1] + 5) >= sizeof sun.sun_path)
        return fprintf (stderr, "hostile-agent: bad endpoint %s\n", argv[1]), 2;
      strcpy (sun.sun_path, argv[1] + 5);
      unlink (sun.sun_path);
      lfd = socket (AF_UNIX, SOCK_STREAM, 0);
      if (lfd < 0 || bind (lfd, (struct sockaddr *)&sun, sizeof sun) < 0 || listen (lfd, 64) < 0)
        return perror ("hostile-agent: listen"), 1;
      printf ("listening on %s\n", argv[1]);
    }
  fflush (stdout);
  for (;;)
    {
      int fd = accept (lfd, NULL, NULL);

      if (fd < 0)
        {
          if (errno == EINTR)
            continue;
          return 1;
        }
      if (fork () == 0)
        {
          close (lfd);
          if (http)
            serve_http (fd);
          else
            serve_agent (fd, NULL, 0);
          _exit (0);
        }
      close (fd);
    }
}
