/* seed-cases.h: the namzu-seed end-to-end cases, run on every backend a test binary sets up
 * (test-seed.c: container:bwrap; test-seed-docker.c: container:docker), and the helpers they
 * and the backend-only cases share. */
#pragma once

#include "nz-json.h"
#include "sandbox-harness.h"

#define ROOT "/home/namzu/seeds"
#define URL_BASE "https://seed.test/"
/* The seed most cases use: repository r, at URL_BASE r.git. */
#define ONE_REPO                                                                                   \
  "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}"

/* Where the repositories are served from differs per backend (the sandbox's own upload-pack
 * reading a bind on bwrap, `git http-backend` on the host for docker), and so does where a
 * test can hold a clone mid-pack. */
typedef struct
{
  /* Installs @script (sh; $F names a directory for flags) as the uploadpack.packObjectsHook
   * of whatever serves the repositories, before it packs; NULL removes it. */
  void (*pack_hook) (const char *script);
  /* Whether flag $F/@name exists; raises it. */
  gboolean (*flag) (const char *name);
  void (*raise_flag) (const char *name);
} SeedServer;

extern const SeedServer *seed_server; /* set by the test binary */
extern char *seed_up;                 /* the case's bare repositories, on the host */

/* harness_begin (@templ), then seed_up and a git environment the host's config cannot change;
 * seed_end() from a passing case's teardown. */
void seed_begin (const char *templ);
void seed_end (void);

/* A bare repository <seed_up>/<name>.git on branch main with @n commits; returns HEAD. */
char *make_repo (const char *name, int n);
/* Replaces <seed_up>/<name>.git's main with an unrelated history (a force-push); its tip. */
char *force_push_new_history (const char *name);

/* Writes @json to a file in harness.tmp and returns its path. */
char *seed_file (const char *json);
/* namzu-seed --root ROOT [@extra] on @json in harness.sandbox: the exit status, and the one
 * JSON document (asserted to be one line). */
int seed (const char *json, JsonObject **doc, char **err, const char *extra);
JsonObject *repo_report (JsonObject *doc, guint i);
void assert_repo (JsonObject *doc, guint i, const char *name, const char *status,
                  const char *commit);
const char *error_code (JsonObject *doc);
const char *error_message (JsonObject *doc);
/* Nothing named *.namzu-partial-* anywhere under ROOT. */
void assert_no_partials (void);

/* A test case named @backend holding every shared case, run with @server and the backend's
 * checked fixture; the binary adds its own cases to it. */
TCase *seed_tcase (const char *backend, const SeedServer *server, SFun setup, SFun teardown);
