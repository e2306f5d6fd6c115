/* nz-sandbox-env.h: the sandbox's environment (namzu-create --env, --env-file, the config's
 * `env`, spec A.1 SandboxBackendOptions.env): variables every command of the sandbox gets,
 * under its own per-command env. Parsed and validated here, before any I/O but the env file.
 *
 * An entry is "NAME=VALUE": NAME is a shell name ([A-Za-z_][A-Za-z0-9_]*), VALUE UTF-8 with no
 * NUL. Refused: the reserved names (NAMZU_SANDBOX_*, NAMZU_AGENT_*, NAMZU_WORKER_*: they
 * configure the worker and agent inside the sandbox, its credential among them, and the child
 * environment scrub removes them from every command), and, in a sandbox with an egress
 * allowlist, the six proxy variables namzu points at its egress proxy. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The whole environment, every "NAME=VALUE" counted with its terminator: far above what a
 * sandbox needs, far below what an execve (argv for docker, one variable for the bwrap agent)
 * can carry. */
#define NZ_SANDBOX_ENV_MAX_BYTES 65536
/* An --env-file larger than this is refused before it is parsed (comments count). */
#define NZ_SANDBOX_ENV_FILE_MAX_BYTES (1024 * 1024)
/* namzu-agent's knob for the bwrap backend (a namzu extension): the sandbox environment as a
 * JSON object of strings, applied to every child after the scrub, under the request's env. */
#define NZ_SANDBOX_ENV_AGENT_KNOB "NAMZU_AGENT_SANDBOX_ENV"

/* TRUE for a shell name: [A-Za-z_][A-Za-z0-9_]*. */
gboolean nz_sandbox_env_name_is_valid (const char *name);

/* The reserved prefix @name starts with ("NAMZU_SANDBOX_", ...), or NULL. */
const char *nz_sandbox_env_reserved_prefix (const char *name);

/* TRUE for a variable namzu sets itself in a sandbox with an egress allowlist
 * (HTTP_PROXY, http_proxy, HTTPS_PROXY, https_proxy, NO_PROXY, no_proxy). */
gboolean nz_sandbox_env_is_proxy_name (const char *name);

/* Checks one entry (@value is @value_len bytes, so an embedded NUL is seen); @where names it in
 * the refusal ("--env", "env file F line 3", "env"). INVALID_ARGS. */
gboolean nz_sandbox_env_check_entry (const char *name, const char *value, gsize value_len,
                                     const char *where, GError **error);

/* Checks, then sets NAME=VALUE in @env (char * "NAME=VALUE"); a name already there keeps its
 * place and takes the new value (the last one given wins). */
gboolean nz_sandbox_env_put (GPtrArray *env, const char *name, const char *value, gsize value_len,
                             const char *where, GError **error);

/* --env: "NAME=VALUE", or a bare "NAME" that takes this process's value of NAME (refused when
 * it is unset, rather than dropped). */
gboolean nz_sandbox_env_add_arg (GPtrArray *env, const char *arg, GError **error);

/* --env-file: docker's format. One NAME=VALUE per line, the value verbatim (no quotes, no
 * escapes, trailing spaces kept); leading whitespace skipped; blank lines and lines starting
 * with '#' ignored; CRLF and a UTF-8 BOM accepted; a bare NAME takes this process's value
 * (refused when unset). @path names the file in refusals. */
gboolean nz_sandbox_env_add_file_data (GPtrArray *env, const char *data, gsize len,
                                       const char *path, GError **error);
/* Reads @path (at most NZ_SANDBOX_ENV_FILE_MAX_BYTES) and adds it as above. */
gboolean nz_sandbox_env_add_file (GPtrArray *env, const char *path, GError **error);

/* The config's `env` (spec A.1: Record<string, string>): an object of string members, each
 * refused naming "env.NAME" into @reasons. */
void nz_sandbox_env_parse_config (JsonNode *node, GPtrArray *env, GPtrArray *reasons);

/* What holds for the whole set (every entry, the size bound, the proxy names when
 * @allowlist), each refusal appended to @reasons. */
void nz_sandbox_env_check_all (GPtrArray *env, gboolean allowlist, GPtrArray *reasons);

/* The names, in order, for the handle's `envNames` (never the values). New reference. */
JsonArray *nz_sandbox_env_names (GPtrArray *env);

/* Records the names as "envNames" in a handle's private members @priv, when there are any;
 * nz_backend_public_handle shows them. */
void nz_sandbox_env_record (JsonObject *priv, GPtrArray *env);

/* NZ_SANDBOX_ENV_AGENT_KNOB's value: {"NAME":"VALUE",...}. New string. */
char *nz_sandbox_env_to_json (GPtrArray *env);

G_END_DECLS
