/* nz-lite-handle: see nz-lite-handle.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nz-jsonlite.h"
#include "nz-lite-handle.h"

bool
nz_lite_handle_id_is_valid (const char *id)
{
  if (id == NULL || strlen (id) != 15 || strncmp (id, "nz-", 3) != 0)
    return false;
  for (const char *p = id + 3; *p != '\0'; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

char *
nz_lite_handle_read_stdin_id (NzLiteBuf *seen)
{
  NzJlValue root;
  const char *s, *e;

  for (;;)
    {
      char chunk[4096];
      ssize_t n = read (STDIN_FILENO, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return NULL;
      if (n == 0)
        break;
      nz_lite_buf_add (seen, chunk, (size_t)n);
      if (memchr (chunk, '\n', (size_t)n) != NULL && nz_jl_parse (seen->data, seen->len, &root)
          && root.type == NZ_JL_OBJECT)
        break;
      if (seen->len > NZ_LITE_HANDLE_STDIN_MAX)
        return NULL;
    }
  for (s = seen->data, e = s + seen->len;
       s != NULL && s < e && *s != '\0' && strchr (" \t\n\r\f\v", *s); s++)
    ;
  if (s == NULL || s == e || !nz_jl_parse (s, (size_t)(e - s), &root) || root.type != NZ_JL_OBJECT
      || nz_jl_member (&root, "error", &(NzJlValue){ 0 }))
    return NULL;
  return nz_jl_member_string (&root, "id");
}

char *
nz_lite_handle_state_dir (void)
{
  const char *env = getenv ("NAMZU_STATE_DIR"), *xdg = getenv ("XDG_RUNTIME_DIR");
  NzLiteBuf path = { 0 };

  if (env != NULL && *env != '\0')
    nz_lite_buf_str (&path, env);
  else if (xdg != NULL && xdg[0] == '/')
    nz_lite_buf_printf (&path, "%s/namzu", xdg);
  else if (geteuid () == 0)
    nz_lite_buf_str (&path, "/run/namzu");
  if (path.data != NULL && path.data[0] != '/')
    {
      free (path.data);
      return NULL;
    }
  return path.data;
}

/* The whole of @fd into @text, within NZ_LITE_HANDLE_FILE_MAX. */
static bool
read_file (int fd, NzLiteBuf *text)
{
  for (;;)
    {
      char chunk[4096];
      ssize_t n = read (fd, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 || text->len > NZ_LITE_HANDLE_FILE_MAX)
        return false;
      if (n == 0)
        return true;
      nz_lite_buf_add (text, chunk, (size_t)n);
    }
}

static int64_t
wall_now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* @priv's member @name as a number, or -1. */
static double
priv_number (const NzJlValue *priv, const char *name)
{
  NzJlValue v;
  double d;

  return nz_jl_member (priv, name, &v) && nz_jl_number (&v, &d) ? d : -1;
}

/* A microvm:kubernetes sandbox is the plain case only while opening it needs no API call
 * (nz-kube-backend.c nz_kube_backend_open_transport): a task sandbox whose lease is far from
 * due (more than 55% of claimTtlSeconds left, past the renewal's latest jittered point of 55%),
 * or a workspace that is Running. Everything else (a renewal, a lease run out, a suspended
 * workspace) is the GLib implementation's; so are a dial failure or an 'unauthorized' reserve
 * (nothing ran yet), which it answers with its one rebind (spec D.7). */
static bool
kube_needs_no_api (const NzJlValue *root)
{
  NzJlValue priv;
  char *mode;
  bool running;
  double expires, ttl_s;

  if (!nz_jl_member (root, "private", &priv) || priv.type != NZ_JL_OBJECT)
    return false;
  if (nz_jl_member (&priv, "workspace", &(NzJlValue){ 0 }))
    {
      mode = nz_jl_member_string (&priv, "operatingMode");
      running = mode != NULL && strcmp (mode, "Running") == 0;
      free (mode);
      return running;
    }
  expires = priv_number (&priv, "leaseExpiresAt");
  ttl_s = priv_number (&priv, "claimTtlSeconds");
  return expires > 0 && ttl_s > 0 && expires - (double)wall_now_ms () > ttl_s * 1000 * 0.55;
}

bool
nz_lite_handle_load (const char *id, NzLiteHandle *h)
{
  NzLiteBuf path = { 0 }, text = { 0 };
  NzJlValue root, created;
  char *dir, *got_id = NULL, *backend = NULL, *tier = NULL;
  double num;
  bool ok = false;
  int fd = -1;

  *h = (NzLiteHandle){ 0 };
  if ((dir = nz_lite_handle_state_dir ()) == NULL || !nz_lite_handle_id_is_valid (id))
    {
      free (dir);
      return false;
    }
  nz_lite_buf_printf (&path, "%s/%s/handle.json", dir, id);
  free (dir);
  if ((fd = open (path.data, O_RDONLY | O_CLOEXEC)) >= 0 && read_file (fd, &text)
      && text.data != NULL && nz_jl_parse (text.data, text.len, &root) && root.type == NZ_JL_OBJECT)
    {
      got_id = nz_jl_member_string (&root, "id");
      backend = nz_jl_member_string (&root, "backend");
      tier = nz_jl_member_string (&root, "tier");
      h->endpoint = nz_jl_member_string (&root, "endpoint");
      h->token = nz_jl_member_string (&root, "token");
      ok = got_id != NULL && strcmp (got_id, id) == 0 && backend != NULL && tier != NULL
           && (strcmp (backend, "microvm:kubernetes") != 0 || kube_needs_no_api (&root))
           && nz_jl_member (&root, "createdAt", &created) && nz_jl_number (&created, &num)
           && h->endpoint != NULL;
    }
  if (fd >= 0)
    close (fd);
  if (ok)
    h->id = got_id;
  else
    {
      free (got_id);
      nz_lite_handle_clear (h);
    }
  free (backend);
  free (tier);
  free (path.data);
  free (text.data);
  return ok;
}

void
nz_lite_handle_clear (NzLiteHandle *h)
{
  free (h->id);
  free (h->endpoint);
  if (h->token != NULL)
    explicit_bzero (h->token, strlen (h->token));
  free (h->token);
  *h = (NzLiteHandle){ 0 };
}
