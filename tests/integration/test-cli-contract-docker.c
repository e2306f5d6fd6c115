/* test-cli-contract on container:docker: the cases that need a sandbox, run against the worker
 * in the worker image ($NAMZU_WORKER_IMAGE, else namzu-worker:latest), checked against the same
 * docs/cli.md. One source: only the backend the sandboxes are created on differs. */
#define NZ_CONTRACT_DOCKER 1
#include "test-cli-contract.c"
