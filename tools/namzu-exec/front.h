/* What namzu-exec's front (front.c) and the full implementation (main.c) agree on. */
#pragma once

/* The GLib implementation the front hands over to; NZ_EXEC_FULL_PATH is its installed path. */
#define NZ_EXEC_FULL_NAME "namzu-exec-full"
/* Set by the front when a cancellation in a sandbox stayed unconfirmed: its value is the
 * message, and main.c retires the sandbox the argv names instead of running anything. */
#define NZ_EXEC_RETIRE_ENV "NZ_EXEC_RETIRE_UNCONFIRMED"
