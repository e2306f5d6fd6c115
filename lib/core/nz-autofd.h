/* nz-autofd.h: GLib 2.74 has no g_autofd; this is the small backport, with the other
 * clear-a-handle helper the servers share. */
#pragma once

#include <errno.h>
#include <glib.h>
#include <unistd.h>

G_BEGIN_DECLS

/* Destroys and drops an attached source, if any; *@source is NULL afterwards. */
static inline void
nz_clear_source (GSource **source)
{
  if (*source == NULL)
    return;
  g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

static inline void
nz_close_fd (int *fdp)
{
  int errsv = errno;

  if (*fdp >= 0)
    close (*fdp);
  *fdp = -1;
  errno = errsv;
}

/* Declare an int that is closed when it goes out of scope: `nz_autofd int fd = -1;` */
#define nz_autofd __attribute__ ((cleanup (nz_close_fd)))

/* Hand an fd's ownership out of an nz_autofd variable. */
static inline int
nz_steal_fd (int *fdp)
{
  int fd = *fdp;

  *fdp = -1;
  return fd;
}

G_END_DECLS
