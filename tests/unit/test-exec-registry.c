/* Unit tests for the execution registry (spec C.2): id shape, reservation, idempotency,
 * leases, pruning and capacity eviction. Time is passed in, so no sleeping. */
#include <string.h>

#include "nz-errors.h"
#include "nz-exec-registry.h"
#include "../nz-test.h"

#define LEASE 30000
#define TERMINAL_TTL 60000
#define RETAINED_TTL 600000

START_TEST (test_id_shape)
{
  const char *good[] = {
    "exec_123e4567-e89b-12d3-a456-426614174000",
    "exec_123E4567-E89B-42D3-B456-426614174000",
    "exec_00000000-0000-5000-8000-000000000000",
    "exec_ffffffff-ffff-1fff-9fff-ffffffffffff",
  };
  const char *bad[] = {
    "123e4567-e89b-12d3-a456-426614174000",
    "exec_123e4567-e89b-02d3-a456-426614174000",  /* version 0 */
    "exec_123e4567-e89b-62d3-a456-426614174000",  /* version 6 */
    "exec_123e4567-e89b-12d3-c456-426614174000",  /* variant c */
    "exec_123e4567-e89b-12d3-a456-42661417400",   /* short */
    "exec_123e4567-e89b-12d3-a456-4266141740000", /* long */
    "exec_123e4567e89b-12d3-a456-426614174000",
    "exec_123g4567-e89b-12d3-a456-426614174000",
    "EXEC_123e4567-e89b-12d3-a456-426614174000",
    "",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    ck_assert_msg (nz_exec_id_is_valid (good[i]), "%s", good[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    ck_assert_msg (!nz_exec_id_is_valid (bad[i]), "%s", bad[i]);
  ck_assert (!nz_exec_id_is_valid (NULL));
}
END_TEST

START_TEST (test_reserve_minted_and_idempotent)
{
  g_autoptr (NzExecRegistry) reg = nz_exec_registry_new (8, LEASE, TERMINAL_TTL, RETAINED_TTL);
  const char *id = "exec_123e4567-e89b-42d3-a456-426614174000";
  gboolean existing = TRUE;
  NzExecRecord *minted = nz_exec_registry_reserve (reg, NULL, 1000, &existing, NULL);
  NzExecRecord *named;
  NzExecRecord *again;

  ck_assert_ptr_nonnull (minted);
  ck_assert (!existing);
  ck_assert (nz_exec_id_is_valid (minted->id));
  ck_assert_int_eq (minted->state, NZ_EXEC_STATE_RESERVED);
  ck_assert_int_eq (minted->expires_at, 1000 + LEASE);

  named = nz_exec_registry_reserve (reg, id, 2000, &existing, NULL);
  ck_assert_str_eq (named->id, id);
  ck_assert (!existing);
  /* Re-reserving returns the same record, untouched: the lease is not extended. */
  named->state = NZ_EXEC_STATE_RUNNING;
  again = nz_exec_registry_reserve (reg, id, 5000, &existing, NULL);
  ck_assert_ptr_eq (again, named);
  ck_assert (existing);
  ck_assert_int_eq (again->state, NZ_EXEC_STATE_RUNNING);
  ck_assert_uint_eq (nz_exec_registry_size (reg), 2);
  ck_assert_ptr_eq (nz_exec_registry_lookup (reg, id), named);
  ck_assert_ptr_null (nz_exec_registry_lookup (reg, "exec_nope"));
}
END_TEST

START_TEST (test_prune)
{
  g_autoptr (NzExecRegistry) reg = nz_exec_registry_new (8, LEASE, TERMINAL_TTL, RETAINED_TTL);
  NzExecRecord *reserved = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  NzExecRecord *running = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  NzExecRecord *terminal = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  NzExecRecord *retained = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  g_autofree char *reserved_id = g_strdup (reserved->id);
  g_autofree char *running_id = g_strdup (running->id);
  g_autofree char *terminal_id = g_strdup (terminal->id);
  g_autofree char *retained_id = g_strdup (retained->id);
  NzExecResult result = { .exit_code = 0 };

  nz_exec_registry_mark_starting (reg, running, 10);
  ck_assert_int_eq (running->expires_at, 0);
  ck_assert_int_eq (running->started_at, 10);
  running->state = NZ_EXEC_STATE_RUNNING;
  nz_exec_registry_remember_terminal (reg, terminal, NZ_EXEC_OUTCOME_COMPLETED, &result, NULL, 100);
  ck_assert_int_eq (terminal->state, NZ_EXEC_STATE_TERMINAL);
  ck_assert_int_eq (terminal->expires_at, 100 + TERMINAL_TTL);
  ck_assert (terminal->has_result);
  retained->has_log = TRUE;
  nz_exec_registry_remember_terminal (reg, retained, NZ_EXEC_OUTCOME_FAILED, NULL, "boom", 100);
  ck_assert_int_eq (retained->expires_at, 100 + RETAINED_TTL);
  ck_assert_str_eq (retained->error, "boom");

  nz_exec_registry_prune (reg, LEASE - 1);
  ck_assert_uint_eq (nz_exec_registry_size (reg), 4);
  nz_exec_registry_prune (reg, LEASE);
  ck_assert_ptr_null (nz_exec_registry_lookup (reg, reserved_id));
  nz_exec_registry_prune (reg, 100 + TERMINAL_TTL);
  ck_assert_ptr_null (nz_exec_registry_lookup (reg, terminal_id));
  ck_assert_ptr_nonnull (nz_exec_registry_lookup (reg, retained_id));
  nz_exec_registry_prune (reg, G_GINT64_CONSTANT (1) << 50);
  ck_assert_ptr_null (nz_exec_registry_lookup (reg, retained_id));
  /* Running records never expire. */
  ck_assert_ptr_nonnull (nz_exec_registry_lookup (reg, running_id));
  ck_assert_uint_eq (nz_exec_registry_size (reg), 1);
}
END_TEST

START_TEST (test_capacity)
{
  g_autoptr (NzExecRegistry) reg = nz_exec_registry_new (3, LEASE, TERMINAL_TTL, RETAINED_TTL);
  g_autoptr (GError) error = NULL;
  NzExecRecord *a = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  NzExecRecord *b = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  NzExecRecord *c = nz_exec_registry_reserve (reg, NULL, 0, NULL, NULL);
  g_autofree char *a_id = g_strdup (a->id);
  g_autofree char *b_id = g_strdup (b->id);
  g_autofree char *c_id = g_strdup (c->id);
  NzExecRecord *d;
  NzExecRecord *e;

  /* Reserved and running records are never evicted. */
  ck_assert_ptr_null (nz_exec_registry_reserve (reg, NULL, 1, NULL, &error));
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_BUSY));
  ck_assert_str_eq (error->message, "execution_capacity");
  g_clear_error (&error);

  /* Terminal ones go, the earliest expiry first. */
  nz_exec_registry_remember_terminal (reg, b, NZ_EXEC_OUTCOME_COMPLETED, NULL, NULL, 500);
  nz_exec_registry_remember_terminal (reg, c, NZ_EXEC_OUTCOME_COMPLETED, NULL, NULL, 200);
  d = nz_exec_registry_reserve (reg, NULL, 1, NULL, &error);
  ck_assert_ptr_nonnull (d);
  ck_assert_ptr_null (nz_exec_registry_lookup (reg, c_id));
  ck_assert_ptr_nonnull (nz_exec_registry_lookup (reg, b_id));
  e = nz_exec_registry_reserve (reg, NULL, 1, NULL, &error);
  ck_assert_ptr_nonnull (e);
  ck_assert_ptr_null (nz_exec_registry_lookup (reg, b_id));
  ck_assert_ptr_nonnull (nz_exec_registry_lookup (reg, a_id));
  ck_assert_ptr_null (nz_exec_registry_reserve (reg, NULL, 1, NULL, NULL));
  ck_assert_uint_eq (nz_exec_registry_size (reg), 3);
}
END_TEST

START_TEST (test_names)
{
  ck_assert_str_eq (nz_exec_state_to_string (NZ_EXEC_STATE_RESERVED), "reserved");
  ck_assert_str_eq (nz_exec_state_to_string (NZ_EXEC_STATE_STARTING), "starting");
  ck_assert_str_eq (nz_exec_state_to_string (NZ_EXEC_STATE_RUNNING), "running");
  ck_assert_str_eq (nz_exec_state_to_string (NZ_EXEC_STATE_EXITED), "exited");
  ck_assert_str_eq (nz_exec_state_to_string (NZ_EXEC_STATE_TERMINAL), "terminal");
  ck_assert_str_eq (nz_exec_outcome_to_string (NZ_EXEC_OUTCOME_COMPLETED), "completed");
  ck_assert_str_eq (nz_exec_outcome_to_string (NZ_EXEC_OUTCOME_FAILED), "failed");
  ck_assert_str_eq (nz_exec_outcome_to_string (NZ_EXEC_OUTCOME_CANCELLED), "cancelled");
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("exec-registry");
  TCase *tc = tcase_create ("exec-registry");

  tcase_add_test (tc, test_id_shape);
  tcase_add_test (tc, test_reserve_minted_and_idempotent);
  tcase_add_test (tc, test_prune);
  tcase_add_test (tc, test_capacity);
  tcase_add_test (tc, test_names);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
