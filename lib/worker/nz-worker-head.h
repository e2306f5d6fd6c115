/* nz-worker-head.h: a request's head, checked on its raw bytes before libsoup parses it.
 * libsoup unfolds obs-folded lines, turns a bare CR into a space, drops NULs and ignores a
 * line with no colon, where the reference (Node's parser) and RFC 9112 refuse the request: a
 * folded Authorization could otherwise authorise, and the framing shapes below are how
 * requests are smuggled. Each connection serves one request (docs/worker.md), so its first
 * head is the only one there is. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* libsoup's own bound on a head (HEADER_SIZE_LIMIT). */
#define NZ_WORKER_HEAD_LIMIT 65536

/* What the reference's HTTP server sends for a request it cannot parse, then it closes. */
#define NZ_WORKER_HEAD_REFUSAL "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"

/* The length of the head at @data (@len bytes there), blank line included, or 0 when it has
 * not ended yet. */
gsize nz_worker_head_length (const char *data, gsize len);

/* Whether the head @head (@len bytes, nz_worker_head_length's) may be parsed: FALSE with
 * *@why (a static string) for a NUL, a CR not followed by LF, an obs-folded line (one that
 * starts with SP or HTAB), a header line with no colon, an empty name or whitespace before the
 * colon, a Content-Length that is not digits or that disagrees with another, and
 * Transfer-Encoding beside Content-Length. */
gboolean nz_worker_head_check (const char *head, gsize len, const char **why);

/* Called once the head on @connection is complete: @refused NULL when it may be parsed, else
 * why it may not (the caller answers NZ_WORKER_HEAD_REFUSAL); @connection NULL when the peer
 * left first. @connection is the callee's to hand on (it keeps a reference if it needs one). */
typedef void (*NzWorkerHeadFunc) (GSocketConnection *connection, const char *refused,
                                  gpointer user_data);

/* Waits, without reading (the bytes stay for libsoup), until @connection's first head has
 * arrived, checks it, and calls @func. The socket wakes us only when more than what was seen
 * has arrived (SO_RCVLOWAT), so a trickling peer costs no busy loop; the pre-auth bounds
 * still end a slow one. Once @cancellable is cancelled (the server goes away) @func is never
 * called and the connection is let go. */
void nz_worker_head_wait (GSocketConnection *connection, GCancellable *cancellable,
                          NzWorkerHeadFunc func, gpointer user_data);

G_END_DECLS
