/* The execute op parsed once for both wires (lib/engine/nz-op-execute.c): every refusal in the
 * spec's words for the agent (A.6.3: "code[: detail]") and the worker (C.4: code, message,
 * status), in the references' order, and a request that parses into what nz_exec_start takes.
 * Reserve, cancel's target and the file ops (nz-op-files.c) likewise. */
#include <glib/gstdio.h>
#include <string.h>

#include "nz-agent-config.h"
#include "nz-exec-registry.h"
#include "nz-json.h"
#include "nz-op-execute.h"
#include "nz-op-files.h"
#include "../nz-test.h"

static char *ws;
static NzAgentConfig *config;
static NzGuest *guest;

static void
setup (void)
{
  ws = g_dir_make_tmp ("nz-op-execute-XXXXXX", NULL);
  ck_assert (ws != NULL);
  g_setenv ("NAMZU_SANDBOX_WORKSPACE", ws, TRUE);
  g_setenv ("NAMZU_SANDBOX_MAX_TIMEOUT_MS", "60000", TRUE);
  config = nz_agent_config_new_embedded (NULL);
  ck_assert (config != NULL);
  guest = nz_guest_new (&config->limits, config->workspace, config->read_roots,
                        config->write_roots);
}

static void
teardown (void)
{
  nz_guest_free (guest);
  nz_agent_config_free (config);
  g_rmdir (ws);
  g_free (ws);
}

#define RESERVED "exec_00000000-0000-4000-8000-000000000001"
#define STARTED "exec_00000000-0000-4000-8000-000000000002"
#define UNKNOWN "exec_00000000-0000-4000-8000-00000000ffff"

static const struct
{
  NzWire wire;
  const char *body;
  const char *agent;   /* the agent's message */
  const char *code;    /* the worker's error code */
  guint status;        /* and its HTTP status */
  const char *detail;  /* and its message (NULL: none) */
} cases[] = {
  { NZ_WIRE_AGENT, "{}", "missing_command" },
  { NZ_WIRE_WORKER, "{\"command\":\"\"}", NULL, "missing_command", 400, NULL },
  { NZ_WIRE_WORKER, "{\"command\":\"x\",\"normalExitPolicy\":\"computer-lifetime\"}", NULL,
    "computer_lifetime_not_enabled", 400, NULL },
  { NZ_WIRE_WORKER, "{\"command\":\"x\",\"normalExitPolicy\":\"lax\"}", NULL,
    "invalid_normal_exit_policy", 400, NULL },
  /* The agent does not read the worker's policy. */
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"normalExitPolicy\":\"lax\",\"executionId\":7}",
    "invalid_execution_id" },
  { NZ_WIRE_WORKER, "{\"command\":\"x\",\"executionId\":\"exec_XYZ\"}", NULL,
    "invalid_execution_id", 400, NULL },
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"retainOutput\":true}", "retain_requires_execution_id" },
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"cwd\":7}",
    "invalid_cwd: The \"path\" argument must be of type string" },
  { NZ_WIRE_WORKER, "{\"command\":\"x\",\"cwd\":7}", NULL, "invalid_cwd", 400,
    "The \"path\" argument must be of type string" },
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"timeoutMs\":\"5\"}",
    "invalid_timeout: timeoutMs must be a finite number in (0, 60000] "
    "(NAMZU_SANDBOX_MAX_TIMEOUT_MS)" },
  { NZ_WIRE_WORKER, "{\"command\":\"x\",\"timeoutMs\":60001}", NULL, "invalid_timeout", 400,
    "timeoutMs must be a finite number in (0, 60000]" },
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"executionId\":\"" UNKNOWN "\"}", "unknown_execution" },
  { NZ_WIRE_WORKER, "{\"command\":\"x\",\"executionId\":\"" UNKNOWN "\"}", NULL,
    "unknown_execution", 404, NULL },
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"executionId\":\"" STARTED "\"}",
    "execution_not_reserved: terminal" },
  { NZ_WIRE_AGENT, "{\"command\":\"x\",\"args\":[\"a\",1]}",
    "The \"args[1]\" argument must be of type string" },
};

/* RESERVED is reserved; STARTED ran and ended (cancelled). */
static void
reserve_two (void)
{
  gboolean existing = FALSE;
  NzExecRecord *started;

  ck_assert (nz_exec_registry_reserve (guest->registry, RESERVED, nz_guest_now_ms (), &existing,
                                       NULL) != NULL);
  started = nz_exec_registry_reserve (guest->registry, STARTED, nz_guest_now_ms (), &existing,
                                      NULL);
  nz_exec_registry_remember_terminal (guest->registry, started, NZ_EXEC_OUTCOME_CANCELLED, NULL,
                                      NULL, nz_guest_now_ms ());
}

START_TEST (test_refusals)
{
  g_autoptr (JsonObject) body = nz_json_parse_object (cases[_i].body, -1, NULL);
  g_auto (NzRefusal) refusal = { 0 };
  g_autoptr (NzExecRequest) req = NULL;

  reserve_two ();
  ck_assert (body != NULL);
  req = nz_op_execute_parse (guest, body, cases[_i].wire, &refusal);
  ck_assert_msg (req == NULL, "accepted %s", cases[_i].body);
  if (cases[_i].wire == NZ_WIRE_AGENT)
    {
      g_autofree char *msg = nz_refusal_agent_message (&refusal);

      ck_assert_str_eq (msg, cases[_i].agent);
    }
  else
    {
      ck_assert_str_eq (refusal.code, cases[_i].code);
      ck_assert_uint_eq (refusal.http_status, cases[_i].status);
      ck_assert_msg (g_strcmp0 (refusal.detail, cases[_i].detail) == 0, "%s", refusal.detail);
    }
}
END_TEST

/* The worker names a terminal record by its outcome, with a 409; a reserved record is taken;
 * the worker coerces args with JS String(); both build the same spec. */
START_TEST (test_reserved_and_accepted)
{
  g_autoptr (JsonObject) b1 = nz_json_parse_object (
      "{\"command\":\"x\",\"executionId\":\"" STARTED "\"}", -1, NULL);
  g_autoptr (JsonObject) b2 = nz_json_parse_object (
      "{\"command\":\"echo\",\"args\":[\"a\",1,true],\"timeoutMs\":\"1500\",\"stdin\":\"in\","
      "\"executionId\":\"" RESERVED "\",\"maxOutputBytes\":1e30}", -1, NULL);
  g_auto (NzRefusal) r1 = { 0 }, r2 = { 0 };
  g_autoptr (NzExecRequest) bad = NULL, ok = NULL;

  reserve_two ();
  bad = nz_op_execute_parse (guest, b1, NZ_WIRE_WORKER, &r1);
  ck_assert (bad == NULL);
  ck_assert_str_eq (r1.code, "execution_not_reserved");
  ck_assert_uint_eq (r1.http_status, 409);
  ck_assert_str_eq (r1.state, "cancelled");
  ok = nz_op_execute_parse (guest, b2, NZ_WIRE_WORKER, &r2);
  ck_assert_msg (ok != NULL, "%s %s", r2.code, r2.detail);
  ck_assert_str_eq (ok->spec.command, "echo");
  ck_assert_str_eq (ok->spec.args[0], "a");
  ck_assert_str_eq (ok->spec.args[1], "1");
  ck_assert_str_eq (ok->spec.args[2], "true");
  ck_assert (ok->spec.args[3] == NULL);
  ck_assert_int_eq (ok->spec.timeout_ms, 1500);
  ck_assert_int_eq (ok->spec.max_output_bytes, G_MAXINT64);
  ck_assert_str_eq (ok->spec.cwd, ws);
  ck_assert (ok->spec.stdin_data != NULL && g_bytes_get_size (ok->spec.stdin_data) == 2);
  ck_assert_str_eq (ok->rec->id, RESERVED);
}
END_TEST

/* cancel's target, parsed once: an id the wire refuses, one nobody reserved, one that is. */
START_TEST (test_cancel_target)
{
  static const char *const bodies[] = { "{}", "{\"executionId\":\"exec_XYZ\"}",
                                        "{\"executionId\":\"" UNKNOWN "\"}",
                                        "{\"executionId\":\"" RESERVED "\"}" };
  static const guint want_status[] = { 400, 400, 404, 0 };

  reserve_two ();
  for (gsize i = 0; i < G_N_ELEMENTS (bodies); i++)
    for (NzWire wire = NZ_WIRE_AGENT; wire <= NZ_WIRE_WORKER; wire++)
      {
        g_autoptr (JsonObject) body = nz_json_parse_object (bodies[i], -1, NULL);
        g_auto (NzRefusal) refusal = { 0 };
        NzExecRecord *rec = nz_op_cancel_target (guest, body, wire, &refusal);

        ck_assert_uint_eq (refusal.http_status, want_status[i]);
        ck_assert ((rec != NULL) == (want_status[i] == 0));
        if (rec != NULL)
          ck_assert_str_eq (rec->id, RESERVED);
        else
          ck_assert_str_eq (refusal.code, want_status[i] == 404 ? "unknown_execution"
                                                                : "invalid_execution_id");
      }
}
END_TEST

/* reserve, once for both wires: the agent takes a named id (idempotently) and refuses a bad
 * one or any while retiring; the worker mints whatever the body says; both refuse at capacity
 * with the worker's count in its message. */
START_TEST (test_reserve)
{
  g_autoptr (JsonObject) named = nz_json_parse_object ("{\"executionId\":\"" RESERVED "\"}", -1,
                                                       NULL);
  g_autoptr (JsonObject) bad = nz_json_parse_object ("{\"executionId\":7}", -1, NULL);
  g_autoptr (JsonObject) empty = nz_json_parse_object ("{\"executionId\":\"\"}", -1, NULL);
  g_auto (NzRefusal) r = { 0 };
  gboolean existing = TRUE;
  NzExecRecord *rec, *again;
  NzGuestLimits limits = config->limits;
  NzGuest *small;

  rec = nz_op_reserve (guest, named, NZ_WIRE_AGENT, nz_guest_now_ms (), &existing, &r);
  ck_assert (rec != NULL && !existing);
  ck_assert_str_eq (rec->id, RESERVED);
  again = nz_op_reserve (guest, named, NZ_WIRE_AGENT, nz_guest_now_ms (), &existing, &r);
  ck_assert (again == rec && existing);
  /* An empty id is no id: minted. */
  rec = nz_op_reserve (guest, empty, NZ_WIRE_AGENT, nz_guest_now_ms (), &existing, &r);
  ck_assert (rec != NULL && !existing && g_str_has_prefix (rec->id, "exec_"));
  ck_assert (nz_op_reserve (guest, bad, NZ_WIRE_AGENT, nz_guest_now_ms (), NULL, &r) == NULL);
  ck_assert_str_eq (r.code, "invalid_execution_id");
  ck_assert_uint_eq (r.http_status, 400);
  /* The worker takes no id from the host. */
  rec = nz_op_reserve (guest, named, NZ_WIRE_WORKER, nz_guest_now_ms (), NULL, &r);
  ck_assert (rec != NULL);
  ck_assert_str_ne (rec->id, RESERVED);
  ck_assert (nz_op_reserve (guest, bad, NZ_WIRE_WORKER, nz_guest_now_ms (), NULL, &r) != NULL);

  limits.max_tracked_executions = 1;
  small = nz_guest_new (&limits, config->workspace, config->read_roots, config->write_roots);
  ck_assert (nz_op_reserve (small, NULL, NZ_WIRE_WORKER, nz_guest_now_ms (), NULL, &r) != NULL);
  ck_assert (nz_op_reserve (small, NULL, NZ_WIRE_WORKER, nz_guest_now_ms (), NULL, &r) == NULL);
  ck_assert_str_eq (r.code, "execution_capacity");
  ck_assert_uint_eq (r.http_status, 503);
  ck_assert_str_eq (r.detail, "worker already tracks 1 execution leases");
  nz_refusal_clear (&r);
  ck_assert (nz_op_reserve (small, named, NZ_WIRE_AGENT, nz_guest_now_ms (), NULL, &r) == NULL);
  ck_assert_str_eq (r.code, "execution_capacity");
  ck_assert (r.detail == NULL);
  nz_guest_retire (small, "test");
  ck_assert (nz_op_reserve (small, named, NZ_WIRE_AGENT, nz_guest_now_ms (), NULL, &r) == NULL);
  ck_assert_str_eq (r.code, "agent_retiring");
  nz_guest_free (small);
}
END_TEST

static const struct
{
  NzWire wire;
  NzFileOp op;
  const char *body;
  const char *code;   /* NULL: accepted, or (with @detail) the type refusal */
  const char *detail;
} file_cases[] = {
  { NZ_WIRE_AGENT, NZ_FILE_OP_READ, "{}", "missing_path" },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"\"}", "missing_path" },
  { NZ_WIRE_AGENT, NZ_FILE_OP_READ, "{\"path\":false}", "missing_path" },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":7}", NULL, NZ_FILE_PATH_TYPE_WORDS },
  { NZ_WIRE_AGENT, NZ_FILE_OP_READ, "{\"path\":[1]}", NULL, NZ_FILE_PATH_TYPE_WORDS },
  { NZ_WIRE_AGENT, NZ_FILE_OP_WRITE, "{\"content\":\"x\"}", "missing_path_or_content" },
  /* The worker asks for the content with the path; the agent checks the path's type first. */
  { NZ_WIRE_WORKER, NZ_FILE_OP_WRITE, "{\"path\":7}", "missing_path_or_content" },
  { NZ_WIRE_AGENT, NZ_FILE_OP_WRITE, "{\"path\":7}", NULL, NZ_FILE_PATH_TYPE_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_WRITE, "{\"path\":7,\"content\":\"\"}", NULL,
    NZ_FILE_PATH_TYPE_WORDS },
  { NZ_WIRE_AGENT, NZ_FILE_OP_WRITE, "{\"path\":\"a\"}", "missing_path_or_content" },
  { NZ_WIRE_AGENT, NZ_FILE_OP_WRITE, "{\"path\":\"a\",\"part\":[]}", "write_part_invalid_shape" },
  /* The worker's ranges (post-23.0.0): never read whole instead. */
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":null}", NULL,
    NZ_FILE_RANGE_SHAPE_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":[]}", NULL,
    NZ_FILE_RANGE_SHAPE_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":{\"version\":2}}", NULL,
    NZ_FILE_RANGE_VERSION_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":{\"version\":\"1\"}}", NULL,
    NZ_FILE_RANGE_VERSION_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":{\"version\":1,\"offset\":-1}}",
    NULL, NZ_FILE_RANGE_NUMBER_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":{\"version\":1,\"offset\":1.5}}",
    NULL, NZ_FILE_RANGE_NUMBER_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"path\":\"a\",\"range\":{\"version\":1,\"length\":-1}}",
    NULL, NZ_FILE_RANGE_NUMBER_WORDS },
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ,
    "{\"path\":\"a\",\"range\":{\"version\":1,\"length\":33554433}}", NULL,
    "read_file_range_too_large: the range asks 33554433 bytes, over the 33554432-byte limit "
    "(readFileRanges.maxBytes)" },
  /* A probe is only the literal true. */
  { NZ_WIRE_WORKER, NZ_FILE_OP_READ, "{\"capabilitiesOnly\":\"true\"}", "missing_path" },
  /* The worker has no parts: a part is no content. */
  { NZ_WIRE_WORKER, NZ_FILE_OP_WRITE, "{\"path\":\"a\",\"part\":{}}", "missing_path_or_content" },
};

START_TEST (test_file_refusals)
{
  g_autoptr (JsonObject) body = nz_json_parse_object (file_cases[_i].body, -1, NULL);
  g_auto (NzRefusal) r = { 0 };
  NzFileRequest req;

  ck_assert (body != NULL);
  ck_assert_msg (!nz_op_file_parse (body, file_cases[_i].op, file_cases[_i].wire, &req, &r),
                 "accepted %s", file_cases[_i].body);
  ck_assert_uint_eq (r.http_status, 400);
  ck_assert_msg (g_strcmp0 (r.code, file_cases[_i].code) == 0, "%s: %s", file_cases[_i].body,
                 r.code);
  ck_assert_msg (g_strcmp0 (r.detail, file_cases[_i].detail) == 0, "%s", r.detail);
}
END_TEST

/* What each wire reads of an accepted file op: the agent's ranges and parts, the encoding. */
START_TEST (test_file_accepted)
{
  g_autoptr (JsonObject) ranged = nz_json_parse_object (
      "{\"path\":\"a\",\"offset\":null,\"length\":3,\"encoding\":\"base64\"}", -1, NULL);
  g_autoptr (JsonObject) whole = nz_json_parse_object (
      "{\"path\":\"a\",\"offset\":null,\"encoding\":\"utf8\"}", -1, NULL);
  g_autoptr (JsonObject) part = nz_json_parse_object (
      "{\"path\":\"a\",\"part\":{\"index\":0},\"content\":\"x\"}", -1, NULL);
  g_auto (NzRefusal) r = { 0 };
  NzFileRequest req;

  ck_assert (nz_op_file_parse (ranged, NZ_FILE_OP_READ, NZ_WIRE_AGENT, &req, &r));
  ck_assert (req.ranged && req.base64);
  ck_assert_str_eq (req.path, "a");
  ck_assert (nz_op_file_parse (ranged, NZ_FILE_OP_READ, NZ_WIRE_WORKER, &req, &r));
  ck_assert (!req.ranged);
  ck_assert (nz_op_file_parse (whole, NZ_FILE_OP_READ, NZ_WIRE_AGENT, &req, &r));
  ck_assert (!req.ranged && !req.base64);
  ck_assert_str_eq (req.encoding, "utf8");
  ck_assert (nz_op_file_parse (part, NZ_FILE_OP_WRITE, NZ_WIRE_AGENT, &req, &r));
  ck_assert (req.part != NULL && req.content != NULL);
  ck_assert (nz_op_file_parse (part, NZ_FILE_OP_WRITE, NZ_WIRE_WORKER, &req, &r));
  ck_assert (req.part == NULL && req.content != NULL);
  {
    g_autoptr (JsonObject) probe = nz_json_parse_object ("{\"capabilitiesOnly\":true}", -1, NULL);
    g_autoptr (JsonObject) range = nz_json_parse_object (
        "{\"path\":\"a\",\"range\":{\"version\":1,\"offset\":7,\"length\":33554432}}", -1, NULL);
    g_autoptr (JsonObject) rest = nz_json_parse_object (
        "{\"path\":\"a\",\"range\":{\"version\":1}}", -1, NULL);

    ck_assert (nz_op_file_parse (probe, NZ_FILE_OP_READ, NZ_WIRE_WORKER, &req, &r));
    ck_assert (req.capabilities_only);
    /* The agent has no probe: it asks for a path. */
    ck_assert (!nz_op_file_parse (probe, NZ_FILE_OP_READ, NZ_WIRE_AGENT, &req, &r));
    nz_refusal_clear (&r);
    ck_assert (nz_op_file_parse (range, NZ_FILE_OP_READ, NZ_WIRE_WORKER, &req, &r));
    ck_assert (req.has_range && !req.capabilities_only);
    ck_assert_int_eq (req.range_offset, 7);
    ck_assert_int_eq (req.range_length, 33554432);
    ck_assert (nz_op_file_parse (rest, NZ_FILE_OP_READ, NZ_WIRE_WORKER, &req, &r));
    ck_assert (req.has_range && req.range_offset == 0 && req.range_length == -1);
    ck_assert (nz_op_file_parse (whole, NZ_FILE_OP_READ, NZ_WIRE_WORKER, &req, &r));
    ck_assert (!req.has_range);
  }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("op-execute");
  TCase *tc = tcase_create ("op-execute");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_loop_test (tc, test_refusals, 0, G_N_ELEMENTS (cases));
  tcase_add_test (tc, test_reserved_and_accepted);
  tcase_add_test (tc, test_cancel_target);
  tcase_add_test (tc, test_reserve);
  tcase_add_loop_test (tc, test_file_refusals, 0, G_N_ELEMENTS (file_cases));
  tcase_add_test (tc, test_file_accepted);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
