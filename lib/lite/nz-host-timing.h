/* The host side's timings and bounds, from the reference host (spec D.2.2, D.2.4, D.2.5),
 * shared by lib/client and namzu-exec's libc-only front so both wait exactly as long. */
#pragma once

#define NZ_HOST_CONNECT_TIMEOUT_MS 5000
#define NZ_HOST_READ_IDLE_TIMEOUT_MS 60000
#define NZ_HOST_POST_RESPONSE_CLOSE_TIMEOUT_MS 1000
#define NZ_HOST_DEFAULT_EXECUTION_TIMEOUT_MS 300000
#define NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS 10000
#define NZ_HOST_TCP_KEEPALIVE_INITIAL_DELAY_S 15
#define NZ_HOST_CANCEL_CONFIRM_BUDGET_MS 8000
#define NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS 2000
#define NZ_HOST_CANCEL_RETRY_INTERVAL_MS 100
