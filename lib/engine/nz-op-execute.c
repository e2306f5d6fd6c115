#include "nz-op-execute.h"

#include <math.h>
#include <string.h>

#include "nz-exec-registry.h"
#include "nz-json.h"
#include "nz-output-log.h"
#include "nz-request.h"

void
nz_refusal_clear (NzRefusal *refusal)
{
  g_clear_pointer (&refusal->detail, g_free);
  *refusal = (NzRefusal){ 0 };
}

char *
nz_refusal_agent_message (const NzRefusal *refusal)
{
  if (refusal->code == NULL)
    return g_strdup (refusal->detail);
  if (refusal->detail == NULL)
    return g_strdup (refusal->code);
  return g_strdup_printf ("%s: %s", refusal->code, refusal->detail);
}

void
nz_exec_request_free (NzExecRequest *req)
{
  if (req == NULL)
    return;
  g_clear_pointer (&req->rec, nz_exec_record_unref);
  g_free (req->cwd);
  g_clear_pointer (&req->args, g_ptr_array_unref);
  g_strfreev (req->envp);
  g_clear_pointer (&req->stdin_bytes, g_bytes_unref);
  g_free (req);
}

#define member nz_json_member

/* FALSE with *@refusal set; @detail is taken. */
static gboolean
refuse (NzRefusal *refusal, const char *code, guint http_status, char *detail)
{
  refusal->code = code;
  refusal->http_status = http_status;
  refusal->detail = detail;
  return FALSE;
}

static gboolean
check_timeout (NzGuest *guest, JsonObject *body, NzWire wire, double *timeout, NzRefusal *refusal)
{
  JsonNode *node = member (body, "timeoutMs");
  gboolean number = TRUE;

  if (node == NULL)
    return TRUE;
  /* The worker takes JS Number() of anything; the agent a JSON number only. */
  if (wire == NZ_WIRE_WORKER)
    *timeout = nz_json_js_number (node);
  else
    number = nz_json_get_number (body, "timeoutMs", timeout);
  /* Above the ceiling is refused, never shortened: a caller asking for more time than the
   * guest allows must learn it before the command runs. */
  if (number && nz_request_timeout_in_range (guest, *timeout))
    return TRUE;
  return refuse (refusal, "invalid_timeout", 400,
                 g_strdup_printf ("timeoutMs must be a finite number in (0, %" G_GINT64_FORMAT
                                  "]%s",
                                  guest->limits.max_timeout_ms,
                                  wire == NZ_WIRE_AGENT ? " (NAMZU_SANDBOX_MAX_TIMEOUT_MS)" : ""));
}

/* The record @id names, which must be reserved; for a retained execution its output log. */
static NzExecRecord *
take_reservation (NzGuest *guest, const char *id, gboolean retain, NzWire wire,
                  NzRefusal *refusal)
{
  NzExecRecord *tracked;

  nz_exec_registry_prune (guest->registry, nz_guest_now_ms ());
  tracked = nz_exec_registry_lookup (guest->registry, id);
  if (tracked == NULL)
    return (refuse (refusal, "unknown_execution", 404, NULL), NULL);
  if (tracked->state != NZ_EXEC_STATE_RESERVED)
    {
      /* The worker names a terminal record by its outcome; the agent by its state. */
      refusal->state = wire == NZ_WIRE_WORKER && tracked->state == NZ_EXEC_STATE_TERMINAL
                           ? nz_exec_outcome_to_string (tracked->outcome)
                           : nz_exec_state_to_string (tracked->state);
      return (refuse (refusal, "execution_not_reserved", 409,
                      wire == NZ_WIRE_AGENT ? g_strdup (refusal->state) : NULL),
              NULL);
    }
  if (retain)
    {
      /* The slot is found before anything runs; the reservation stays intact. */
      if (!nz_exec_registry_make_room_for_log (guest->registry,
                                               guest->limits.max_retained_output_logs))
        return (refuse (refusal, "retained_output_capacity", 400,
                        g_strdup_printf ("limit %" G_GINT64_FORMAT
                                         " (NAMZU_AGENT_MAX_RETAINED_OUTPUT_LOGS)",
                                         guest->limits.max_retained_output_logs)),
                NULL);
      tracked->log = nz_output_log_new ((guint64)guest->limits.execution_log_bytes);
      tracked->has_log = TRUE;
    }
  return nz_exec_record_ref (tracked);
}

/* args: the worker takes Array.isArray(args) ? args : [], each element as JS String(); the
 * agent refuses an element that is not a string, and the record ends `failed`. */
static gboolean
take_args (NzGuest *guest, JsonObject *body, NzWire wire, NzExecRequest *req, NzRefusal *refusal)
{
  JsonArray *arr = body != NULL ? nz_json_get_array (body, "args") : NULL;

  req->args = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; arr != NULL && i < json_array_get_length (arr); i++)
    {
      JsonNode *e = json_array_get_element (arr, i);
      const char *a = nz_json_node_string (e);

      if (wire == NZ_WIRE_WORKER)
        g_ptr_array_add (req->args, nz_json_js_string (e));
      else if (a != NULL)
        g_ptr_array_add (req->args, g_strdup (a));
      else
        {
          char *msg = g_strdup_printf ("The \"args[%u]\" argument must be of type string", i);

          nz_exec_registry_remember_terminal (guest->registry, req->rec, NZ_EXEC_OUTCOME_FAILED,
                                              NULL, msg, nz_guest_now_ms ());
          /* No code: the message is the whole refusal, as the reference's TypeError. */
          return refuse (refusal, NULL, 400, msg);
        }
    }
  g_ptr_array_add (req->args, NULL);
  return TRUE;
}

NzExecRequest *
nz_op_execute_parse (NzGuest *guest, JsonObject *body, NzWire wire, NzRefusal *refusal)
{
  g_autoptr (NzExecRequest) req = g_new0 (NzExecRequest, 1);
  const char *command = nz_json_node_string (member (body, "command"));
  JsonNode *id_node = member (body, "executionId");
  gboolean retain = wire == NZ_WIRE_AGENT && body != NULL
                    && nz_json_get_bool (body, "retainOutput", FALSE);
  g_autoptr (GError) error = NULL;
  const char *id = NULL;
  double timeout = NZ_GUEST_DEFAULT_TIMEOUT_MS;
  double max_output;

  *refusal = (NzRefusal){ 0 };
  if (command == NULL || *command == '\0')
    return (refuse (refusal, "missing_command", 400, NULL), NULL);
  if (wire == NZ_WIRE_WORKER && member (body, "normalExitPolicy") != NULL)
    {
      const char *policy = nz_json_node_string (member (body, "normalExitPolicy"));

      if (g_strcmp0 (policy, "computer-lifetime") == 0)
        return (refuse (refusal, "computer_lifetime_not_enabled", 400, NULL), NULL);
      if (g_strcmp0 (policy, "strict") != 0)
        return (refuse (refusal, "invalid_normal_exit_policy", 400, NULL), NULL);
    }
  if (id_node != NULL)
    {
      id = nz_json_node_string (id_node);
      if (wire == NZ_WIRE_WORKER ? !nz_exec_worker_id_is_valid (id)
                                 : id == NULL || !nz_exec_id_is_valid (id))
        return (refuse (refusal, "invalid_execution_id", 400, NULL), NULL);
    }
  if (retain && id == NULL)
    return (refuse (refusal, "retain_requires_execution_id", 400, NULL), NULL);
  if ((req->cwd = nz_request_resolve_cwd (guest, member (body, "cwd"), &error)) == NULL)
    return (refuse (refusal, "invalid_cwd", 400, g_strdup (error->message)), NULL);
  if (!check_timeout (guest, body, wire, &timeout, refusal))
    return NULL;
  max_output = nz_request_max_output (member (body, "maxOutputBytes"));
  if (id != NULL)
    req->rec = take_reservation (guest, id, retain, wire, refusal);
  else
    /* Untracked: a private record with the same process group, timeout and kill path, but
     * not cancellable by id. */
    req->rec = nz_exec_record_new (NULL);
  if (req->rec == NULL || !take_args (guest, body, wire, req, refusal))
    return NULL;
  req->envp = nz_guest_child_environ (body != NULL ? nz_json_get_object (body, "env") : NULL);
  req->stdin_bytes = nz_request_stdin (member (body, "stdin"));

  req->spec.command = command;
  req->spec.args = (const char *const *)req->args->pdata;
  req->spec.cwd = req->cwd;
  req->spec.envp = req->envp;
  req->spec.stdin_data = req->stdin_bytes;
  req->spec.timeout_ms = (gint64)ceil (timeout);
  /* Each reference's own saturation point. */
  req->spec.max_output_bytes = max_output >= (wire == NZ_WIRE_WORKER ? 9.2e18 : (double)G_MAXINT64)
                                   ? G_MAXINT64
                                   : (gint64)MAX (max_output, 0);
  return g_steal_pointer (&req);
}

NzExecRecord *
nz_op_cancel_target (NzGuest *guest, JsonObject *body, NzWire wire, NzRefusal *refusal)
{
  const char *id = nz_json_node_string (member (body, "executionId"));
  NzExecRecord *rec;

  *refusal = (NzRefusal){ 0 };
  if (wire == NZ_WIRE_WORKER ? !nz_exec_worker_id_is_valid (id)
                             : id == NULL || !nz_exec_id_is_valid (id))
    return (refuse (refusal, "invalid_execution_id", 400, NULL), NULL);
  if (wire == NZ_WIRE_WORKER)
    nz_exec_registry_prune (guest->registry, nz_guest_now_ms ());
  rec = nz_exec_registry_lookup (guest->registry, id);
  if (rec == NULL)
    return (refuse (refusal, "unknown_execution", 404, NULL), NULL);
  return rec;
}

NzExecRecord *
nz_op_reserve (NzGuest *guest, JsonObject *body, NzWire wire, gint64 now_ms, gboolean *existing,
               NzRefusal *refusal)
{
  JsonNode *id_node = wire == NZ_WIRE_AGENT ? member (body, "executionId") : NULL;
  const char *id = NULL;
  NzExecRecord *rec;

  *refusal = (NzRefusal){ 0 };
  if (existing != NULL)
    *existing = FALSE;
  nz_exec_registry_prune (guest->registry, now_ms);
  /* The worker's gate answered worker_retiring before routing. */
  if (wire == NZ_WIRE_AGENT && guest->retiring)
    return (refuse (refusal, "agent_retiring", 503, NULL), NULL);
  /* "Provided" is JS-truthy: an absent, null or empty id lets the guest mint one. */
  if (nz_json_js_truthy (id_node))
    {
      id = nz_json_node_string (id_node);
      if (id == NULL || !nz_exec_id_is_valid (id))
        return (refuse (refusal, "invalid_execution_id", 400, NULL), NULL);
    }
  rec = nz_exec_registry_reserve (guest->registry, id, now_ms, existing, NULL);
  if (rec == NULL)
    return (refuse (refusal, "execution_capacity", 503,
                    wire == NZ_WIRE_WORKER
                        ? g_strdup_printf ("worker already tracks %" G_GINT64_FORMAT
                                           " execution leases",
                                           guest->limits.max_tracked_executions)
                        : NULL),
            NULL);
  return rec;
}
