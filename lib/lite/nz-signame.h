/* Signal names as the agent's result frames spell them ("SIGTERM"), in plain C. */
#pragma once

/* The name of @signo, or NULL for a number that is no signal of this table. */
const char *nz_signame (int signo);

/* The number of signal @name, or 0. */
int nz_signame_lookup (const char *name);
