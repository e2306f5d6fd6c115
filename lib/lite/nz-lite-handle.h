/* nz-lite-handle: the plain case of lib/backend/nz-state.c's sandbox handle resolution, in
 * plain C (no GLib), for namzu-exec's front. Every "false"/NULL here means "not the plain
 * case": the caller hands the work to the GLib implementation, which words the failure. */
#pragma once

#include <stdbool.h>

#include "nz-lite-buf.h"

/* nz-state.c's bound on a handle piped on stdin; a private handle file is small too. */
#define NZ_LITE_HANDLE_STDIN_MAX (64 * 1024)
#define NZ_LITE_HANDLE_FILE_MAX (1024 * 1024)

typedef struct
{
  char *id, *endpoint, *token; /* owned */
} NzLiteHandle;

/* Whether @id has the shape nz-state.c mints ("nz-" and 12 lowercase hex digits). */
bool nz_lite_handle_id_is_valid (const char *id);

/* nz-state.c's read_handle_id(): reads stdin into @seen up to the end of the first complete
 * object on a line, and returns its "id" (free it), or NULL. Everything read stays in @seen
 * so the caller can hand it on. */
char *nz_lite_handle_read_stdin_id (NzLiteBuf *seen);

/* The state directory: $NAMZU_STATE_DIR, $XDG_RUNTIME_DIR/namzu, or /run/namzu for root.
 * Returns a new string, or NULL when none applies or it is not absolute. */
char *nz_lite_handle_state_dir (void);

/* Loads <state dir>/@id/handle.json into *@h (clear it with nz_lite_handle_clear). */
bool nz_lite_handle_load (const char *id, NzLiteHandle *h);

void nz_lite_handle_clear (NzLiteHandle *h);
