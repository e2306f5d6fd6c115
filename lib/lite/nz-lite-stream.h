/* nz-lite-stream: namzu-exec's front's driver of the exec core (nz-lite-core.h), in plain C
 * (no GLib): blocking poll I/O over nz-lite-wire, output written through to fds 1 and 2 as it
 * arrives, a signal on the wire's signalfd or output that cannot be written cancelling the
 * execution by id until the agent confirms it (spec D.2.5). */
#pragma once

#include <stdbool.h>

#include "nz-lite-core.h"
#include "nz-lite-wire.h"

/* Runs @core from @action (what nz_lite_core_reserved returned) to NZ_LITE_CORE_DONE over @w;
 * the execute stream is observed for at most @observation_ms. Output that cannot be written
 * cancels the run like a signal would, so it ends CANCELLED with @w->signo still 0. */
void nz_lite_stream_run (NzLiteWire *w, NzLiteCore *core, NzLiteCoreAction action,
                         unsigned long long observation_ms);
