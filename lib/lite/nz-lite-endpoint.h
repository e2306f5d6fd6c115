/* nz-lite-endpoint: an agent endpoint's text, parsed and described once, in plain C (no
 * GLib), for namzu-exec's front (nz-lite-wire) and lib/client (nz_agent_endpoint_parse):
 * "unix:/ABSOLUTE/PATH", "tcp:HOST:PORT" ("tcp:[::1]:PORT" for IPv6), "vsock:/ABSOLUTE/UDS#PORT"
 * (spec D.2.1) and "http://HOST:PORT" (a namzu-worker, spec B.6). Library code: it never logs
 * and never exits. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum
{
  NZ_LITE_EP_UNIX,
  NZ_LITE_EP_TCP,
  NZ_LITE_EP_HTTP,  /* a namzu-worker: GET /v1/agent upgraded to namzu-agent/2 */
  NZ_LITE_EP_VSOCK, /* Firecracker hybrid vsock: host-side UDS + CONNECT <port> */
} NzLiteEpKind;

typedef struct
{
  NzLiteEpKind kind;
  char *path;                /* UNIX: the socket's path; VSOCK: the host-side UDS's; owned */
  char *host;                /* TCP, HTTP: a host name or address, without brackets; owned */
  unsigned port;             /* TCP, HTTP: in [1, 65535] */
  unsigned vsock_port;       /* VSOCK: the guest port named in the CONNECT line */
  char desc[PATH_MAX + 300]; /* the endpoint as errors name it: "tcp:[::1]:7", "http://h:80" */
} NzLiteEndpoint;

/* Parses @text into *@ep (zeroed first, so nz_lite_endpoint_clear is always safe). False with
 * @why (@why_size bytes) saying what is wrong: "agent endpoint \"TEXT\": expected ...". */
bool nz_lite_endpoint_parse (const char *text, NzLiteEndpoint *ep, char *why, size_t why_size);

void nz_lite_endpoint_clear (NzLiteEndpoint *ep);
