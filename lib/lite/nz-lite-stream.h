/* nz-lite-stream: the execute stream and its outcome, in plain C (no GLib), for namzu-exec's
 * front: the stream read to its terminator with its output written through, and the failure
 * after execute was sent mapped to the exit status and the words tools/namzu-exec/report.c
 * uses (the command's own status, 126/127, 125). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nz-lite-wire.h"

typedef struct
{
  char *result;                      /* the result frame's text */
  char *error_code, *error_message;  /* a refusal or an error frame */
  bool broken_output;                /* our stdout/stderr could not be written */
} NzLiteStream;

/* execute @request on its own connection of @w until the terminator, writing stdout and
 * stderr deltas to fds 1 and 2 as they arrive; the connection is observed for at most
 * @observation_ms. True with @s->result set; false with @e (a refusal worded as lib/client
 * words it), or with @s->broken_output. */
bool nz_lite_stream_execute (NzLiteWire *w, const char *request, unsigned long long observation_ms,
                             NzLiteStream *s, NzLiteErr *e);

/* The exit status for failure @e after execute was sent to the agent @desc, and into @msg the
 * one line that says so. @target is "sandbox ID", or NULL with --endpoint. */
int nz_lite_stream_outcome (const NzLiteErr *e, const char *desc, const char *command,
                            const char *target, char *msg, size_t msg_size);
