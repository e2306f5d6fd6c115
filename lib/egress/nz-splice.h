/* nz-splice.h: a bounded two-way relay between two GIOStreams. Each direction holds one fixed
 * buffer and reads only while it has room, so a slow reader on one side pauses the other side
 * (flow control, no unbounded buffering). Between two plain sockets (CONNECT tunnels, plain
 * HTTP, the bwrap relay) it reads and writes the fds directly, non-blocking, from one GSource;
 * otherwise (TLS) it chains GIO async reads and writes of NZ_SPLICE_CHUNK. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define NZ_SPLICE_CHUNK (64 * 1024)
/* The whole buffer of one direction between two plain sockets: large, so each wakeup moves a
 * lot, and fixed, so a stalled peer costs at most this much. */
#define NZ_SPLICE_BUFFER (256 * 1024)

typedef struct NzSplice NzSplice;

/* Called once, when both directions are finished or one failed, or the splice idled out. */
typedef void (*NzSpliceDone) (gpointer user_data);

/* Starts relaying @a <-> @b (both borrowed; the caller keeps them alive until @done).
 * @a_head (may be NULL) is written to @b first: bytes read past a request head.
 * @idle_timeout_s (0 = none) ends the splice when no byte moved either way for that long.
 * @half_close: on EOF from one side, shut down writing on the other (plain TCP tunnels); when
 * FALSE, EOF from either side ends the splice (TLS, one-shot HTTP). */
NzSplice *nz_splice_start (GIOStream *a, GIOStream *b, GBytes *a_head, guint idle_timeout_s,
                           gboolean half_close, NzSpliceDone done, gpointer user_data);
/* Cancels a splice in progress (done still runs, from the main loop). */
void nz_splice_cancel (NzSplice *s);
/* Frees a finished splice. */
void nz_splice_free (NzSplice *s);

/* Total bytes moved a -> b and b -> a. */
guint64 nz_splice_bytes (NzSplice *s, gboolean a_to_b);

G_END_DECLS
