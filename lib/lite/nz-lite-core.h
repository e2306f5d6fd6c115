/* nz-lite-core: the host's reserve -> execute -> cancel state machine (spec D.2.5), once, in
 * plain C (no GLib) and with no I/O of its own, so that namzu-exec's blocking front
 * (nz-lite-stream.c) and lib/client's GIO client both drive it. The driver does the I/O the
 * returned action names and feeds what came back (a reply's text, a stream frame's text, the
 * agent's close, a failure, a wish to cancel, the time); the core reads the agent's JSON
 * (untrusted), words refusals and protocol errors as both clients word them, and decides what
 * comes next. Library code: it never logs and never exits. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nz-lite-buf.h"
#include "nz-lite-wire.h"

typedef enum
{
  NZ_LITE_CORE_EXECUTE, /* send execute with @request, then NZ_LITE_CORE_READ */
  NZ_LITE_CORE_READ,    /* read the stream's next frame and feed it (empty: the terminator) */
  NZ_LITE_CORE_OUTPUT,  /* write @out (@out_len bytes) to @out_stream (1 or 2), then READ */
  NZ_LITE_CORE_CLOSE,   /* the terminator came: check that the agent closes, then feed it */
  NZ_LITE_CORE_CANCEL,  /* send cancel-execution with @cancel_body, waiting @attempt_ms */
  NZ_LITE_CORE_PAUSE,   /* wait NZ_HOST_CANCEL_RETRY_INTERVAL_MS, then tick */
  NZ_LITE_CORE_DONE,    /* see @end */
} NzLiteCoreAction;

typedef enum
{
  NZ_LITE_CORE_RESULT,      /* @result holds the result frame's text */
  NZ_LITE_CORE_FAILED,      /* @err: a refusal or a protocol error, in the core's words */
  NZ_LITE_CORE_IO_FAILED,   /* the failure the driver fed last stands, in the driver's words */
  NZ_LITE_CORE_CANCELLED,   /* the agent confirmed the cancellation; @err words it */
  NZ_LITE_CORE_UNCONFIRMED, /* the cancellation could not be confirmed; @err words it */
} NzLiteCoreEnd;

typedef struct
{
  const char *desc; /* the agent, as nz_agent_endpoint_describe() words it; not owned */
  char *id;         /* the reserved execution id */
  NzLiteBuf body;   /* the execute body, without its closing brace */
  NzLiteBuf request, cancel_body;
  bool streaming, cancel_wanted, cancelling, bad_frame;
  int64_t cancel_deadline;
  unsigned attempt_ms;
  char last[sizeof ((NzLiteErr *)0)->msg]; /* the last failed cancel attempt */
  int out_stream;
  char *out, *result, *error_code, *error_message;
  size_t out_len;
  NzLiteCoreEnd end;
  NzLiteErr err;
} NzLiteCore;

/* @body is the execute body's JSON text (@len bytes) without its closing brace, as
 * nz_lite_exec_build_body makes it; the execution id follows it. */
void nz_lite_core_init (NzLiteCore *c, const char *desc, const char *body, size_t len);

void nz_lite_core_clear (NzLiteCore *c);

/* The reserve-execution reply (a JSON object's text): EXECUTE, CANCEL (cancel was wanted
 * meanwhile: the reserved record is cancelled too, so it can never start later), or DONE
 * (FAILED: a refusal, or no executionId). */
NzLiteCoreAction nz_lite_core_reserved (NzLiteCore *c, const char *reply, size_t len,
                                        int64_t now_ms);

/* For a stream the caller started itself (the id is in its body, or none): frames only. */
void nz_lite_core_stream (NzLiteCore *c);

/* The caller wants the command gone (a signal, our output went away): takes effect at the
 * next failure the driver feeds (the driver ends its wait), or after the reserve reply. */
void nz_lite_core_want_cancel (NzLiteCore *c);

/* One frame of the execute stream: OUTPUT, READ, CLOSE (the terminator), or DONE (FAILED: a
 * frame that is no JSON object, sets @bad_frame; one after the result; a reply-shaped refusal
 * such as agent_retiring, spec A.5, which ends with no terminator). */
NzLiteCoreAction nz_lite_core_frame (NzLiteCore *c, const char *text, size_t len, int64_t now_ms);

/* The agent closed after the terminator: DONE (RESULT, or FAILED: an error frame's refusal,
 * or no result event). */
NzLiteCoreAction nz_lite_core_closed (NzLiteCore *c);

/* The driver's I/O failed (@kind, @msg: its words): while cancelling, one lost attempt (PAUSE
 * or DONE UNCONFIRMED when the budget is spent); else CANCEL when cancel is wanted (or @kind is
 * NZ_LITE_ERR_CANCELLED) and an id was reserved, else DONE (IO_FAILED). */
NzLiteCoreAction nz_lite_core_failed (NzLiteCore *c, NzLiteErrKind kind, const char *msg,
                                      int64_t now_ms);

/* The cancel-execution reply's text: DONE (CANCELLED, or UNCONFIRMED when the agent answered
 * no: asking again will not change it), or PAUSE when it is no JSON object. */
NzLiteCoreAction nz_lite_core_cancel_reply (NzLiteCore *c, const char *reply, size_t len,
                                            int64_t now_ms);

/* After PAUSE: CANCEL again, or DONE (UNCONFIRMED) when the budget is spent. */
NzLiteCoreAction nz_lite_core_tick (NzLiteCore *c, int64_t now_ms);

/* The words for a refusal @code (@message may be NULL) of @context ("execute",
 * "reserve-execution", "cancel-execution") by the agent @desc, with the kind that decides the
 * exit status: spawn ENOENT is NOENT, spawn EACCES/EPERM/ENOEXEC is NOEXEC. */
void nz_lite_core_refusal (const char *desc, const char *context, const char *code,
                           const char *message, NzLiteErr *e);

/* The observation window of an execute whose body asks @timeout_ms (<= 0: none): the agent's
 * default or the timeout, plus the transport grace, at most INT32_MAX. */
unsigned long long nz_lite_core_observation_ms (double timeout_ms);

/* What both namzu-exec programs say when a result carries no usable exit status, and when an
 * unconfirmed cancellation has no sandbox to retire (a printf format for the cancel's words). */
#define NZ_LITE_CORE_NO_STATUS_WORDS "the agent reported no usable exit status"
#define NZ_LITE_CORE_NO_RETIRE_FORMAT                                                              \
  "%s; no sandbox to retire with --endpoint: stop that agent yourself"

/* A run whose cancellation the agent confirmed, for both namzu-exec programs: the exit status,
 * 128 + @signo for a signal we took, or 128 + SIGPIPE when our output went away (@signo 0);
 * @msg gets the line to say, "SIGNAME: @what", or "" when there is nothing to say (a reader
 * that went away hears nothing). */
int nz_lite_core_cancelled (int signo, const char *what, char *msg, size_t msg_size);

/* The one table from a failure to the exit status and the line that says so, for both
 * namzu-exec programs: @kind and @what (the failure's words) of a run of @command in @target
 * ("sandbox ID", or NULL with --endpoint). @desc names the agent when @what does not (the
 * front's dial failures), else NULL. @reserved: an execution was reserved, so it may have run.
 * *@code (may be NULL) gets the --json error code, or NULL for the failure's own. */
int nz_lite_core_outcome (NzLiteErrKind kind, const char *what, const char *desc,
                          const char *command, const char *target, bool reserved, char *msg,
                          size_t msg_size, const char **code);
