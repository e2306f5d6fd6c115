/* nz-seed-ensure.c: the seed algorithm (spec G.3), run entirely through the sandbox's exec
 * transport: preflight, marker read, one check for every repository, refuse drift, clone what
 * is missing into a partial sibling and rename it into place, write the marker, sweep stale
 * partials.
 *
 * Every step is `sh -c SCRIPT namzu-seed ARGS...`: the scripts below are constants and every
 * value (root, URL, ref, commit, paths) reaches them as a positional argument, so nothing a
 * seed says is ever parsed as shell. */
#include <string.h>

#include "nz-agent-client.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-json.h"
#include "nz-seed.h"

/* Error output quoted in a message is cut to its last 800 characters (spec G.3 tail()). */
#define TAIL_CHARS 800

/* $1 = root (no trailing slash). Exit 3 "missing X" when a tool is absent, 4 when the root
 * cannot be written. GNU `mv -T` is what makes the final rename refuse to nest a clone inside
 * a directory someone else created meanwhile. */
static const char preflight_script[]
    = "for t in git find mkdir mktemp rm mv; do\n"
      "  command -v \"$t\" >/dev/null 2>&1 || { echo \"missing $t\"; exit 3; }\n"
      "done\n"
      "mkdir -p -- \"$1/.namzu/seed\" || { echo unwritable; exit 4; }\n"
      "p=$(mktemp -d \"$1/.namzu/seed/probe.XXXXXX\") || { echo unwritable; exit 4; }\n"
      "mkdir -- \"$p/a\" || { rm -rf -- \"$p\"; echo unwritable; exit 4; }\n"
      "if ! mv -T -- \"$p/a\" \"$p/b\" 2>/dev/null || [ ! -d \"$p/b\" ]; then\n"
      "  rm -rf -- \"$p\"; echo 'missing mv -T'; exit 3\n"
      "fi\n"
      "rm -rf -- \"$p\"\n";

/* $1 = marker path. A missing marker is no records. */
static const char marker_read_script[] = "cat -- \"$1\" 2>/dev/null || true\n";

/* Five arguments per repository: DIR URL WANT REF EXACT. One line per repository:
 * missing - | occupied - | origin HEAD | ref HEAD | pin HEAD | history HEAD | present HEAD WANT.
 * A symlink is never followed: what it points at is not ours to judge. */
static const char check_script[]
    = "while [ \"$#\" -ge 5 ]; do\n"
      "  d=$1 url=$2 want=$3 ref=$4 exact=$5\n"
      "  shift 5\n"
      "  if [ -L \"$d\" ]; then echo 'occupied -'; continue; fi\n"
      "  if [ ! -e \"$d\" ]; then echo 'missing -'; continue; fi\n"
      "  if [ ! -d \"$d\" ] || [ ! -e \"$d/.git\" ]; then echo 'occupied -'; continue; fi\n"
      "  head=$(git -C \"$d\" rev-parse -q --verify 'HEAD^{commit}' 2>/dev/null) || head=\n"
      "  if [ -z \"$head\" ]; then echo 'occupied -'; continue; fi\n"
      "  origin=$(git -C \"$d\" config --get remote.origin.url 2>/dev/null) || origin=\n"
      "  if [ \"$origin\" != \"$url\" ]; then echo \"origin $head\"; continue; fi\n"
      "  if [ -z \"$want\" ]; then\n"
      "    if [ \"$ref\" = :default ]; then\n"
      "      tip=$(git -C \"$d\" rev-parse -q --verify 'refs/remotes/origin/HEAD^{commit}' "
      "2>/dev/null) || tip=\n"
      "    else\n"
      "      tip=$(git -C \"$d\" rev-parse -q --verify \"refs/remotes/origin/$ref^{commit}\" "
      "2>/dev/null) ||\n"
      "        tip=$(git -C \"$d\" rev-parse -q --verify \"refs/tags/$ref^{commit}\" 2>/dev/null) "
      "|| tip=\n"
      "    fi\n"
      "    if [ -z \"$tip\" ] || [ \"$tip\" != \"$head\" ]; then echo \"ref $head\"; continue; fi\n"
      "    want=$tip\n"
      "  fi\n"
      "  if [ \"$exact\" = 1 ] && [ \"$want\" != \"$head\" ]; then echo \"pin $head\"; continue; "
      "fi\n"
      "  if ! git -C \"$d\" merge-base --is-ancestor \"$want\" HEAD 2>/dev/null; then\n"
      "    echo \"history $head\"; continue\n"
      "  fi\n"
      "  echo \"present $head $want\"\n"
      "done\n";

/* DIR URL NONCE DEPTH REF COMMIT. The clone lands in DIR.namzu-partial-NONCE and is renamed
 * into place only when complete, so a killed clone never leaves a half repository at DIR.
 * Prints "cloned HEAD", or "raced HEAD" when DIR appeared meanwhile (our partial is removed). */
static const char clone_script[]
    = "d=$1 url=$2 depth=$4 ref=$5 commit=$6\n"
      "p=$1.namzu-partial-$3\n"
      "parent=${d%/*}\n"
      "[ -n \"$parent\" ] || parent=/\n"
      "mkdir -p -- \"$parent\" || exit 1\n"
      "set -- clone --quiet\n"
      "if [ -n \"$depth\" ]; then set -- \"$@\" --depth \"$depth\"; fi\n"
      "if [ -n \"$ref\" ]; then set -- \"$@\" --branch \"$ref\"; fi\n"
      "git -c credential.helper= \"$@\" -- \"$url\" \"$p\" || { rm -rf -- \"$p\"; exit 1; }\n"
      "if [ -n \"$commit\" ]; then\n"
      "  git -C \"$p\" -c advice.detachedHead=false checkout --quiet --detach \"$commit\" ||\n"
      "    { rm -rf -- \"$p\"; exit 1; }\n"
      "fi\n"
      "head=$(git -C \"$p\" rev-parse HEAD) || { rm -rf -- \"$p\"; exit 1; }\n"
      "if mv -T -- \"$p\" \"$d\" 2>/dev/null; then echo \"cloned $head\"; else\n"
      "  rm -rf -- \"$p\"; echo \"raced $head\"\n"
      "fi\n";

/* MARKER NONCE JSON MINUTES PARENT...: write the marker through a temporary named by this
 * call, then remove partials older than MINUTES from each parent (only crashed calls leave
 * them; never anything else). */
static const char finish_script[]
    = "m=$1 t=$1.tmp.$2 j=$3 age=$4\n"
      "shift 4\n"
      "if ! { printf '%s\\n' \"$j\" > \"$t\" && mv -f -- \"$t\" \"$m\"; }; then\n"
      "  rm -f -- \"$t\"; exit 1\n"
      "fi\n"
      "for p in \"$@\"; do\n"
      "  [ -d \"$p\" ] || continue\n"
      "  find \"$p\" -mindepth 1 -maxdepth 1 -type d -name '*.namzu-partial-*' -mmin \"+$age\" "
      "-exec rm -rf -- {} + 2>/dev/null || true\n"
      "done\n"
      "exit 0\n";

typedef struct
{
  NzAgentClient *client;
  const NzSeedOptions *opts;
  GCancellable *cancellable;
} Ctx;

typedef struct
{
  int status; /* shell-style: exit code, 124 timeout, 128+N signal */
  gboolean timed_out;
  GString *out;
  GString *err;
} Run;

static void
run_clear (Run *r)
{
  if (r->out != NULL)
    g_string_free (r->out, TRUE);
  if (r->err != NULL)
    g_string_free (r->err, TRUE);
  memset (r, 0, sizeof *r);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Run, run_clear)

typedef struct
{
  const NzSeedRepo *repo;
  char *path;     /* <root>/<dir> */
  char *from;     /* recordedFrom: ":commit", the ref, or "" */
  char *recorded; /* marker commit, trusted only under the same `from` */
  char *state;    /* check token */
  char *head;
  char *held; /* WANT from a `present` line */
  const char *status;
  char *commit;                /* reported HEAD */
  char *rec_commit, *rec_from; /* what the new marker records */
} Repo;

static void
repo_clear (Repo *r)
{
  g_free (r->path);
  g_free (r->from);
  g_free (r->recorded);
  g_free (r->state);
  g_free (r->head);
  g_free (r->held);
  g_free (r->commit);
  g_free (r->rec_commit);
  g_free (r->rec_from);
}

static gboolean seed_error (GError **error, NzSeedErrorCode code, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);

static gboolean
seed_error (GError **error, NzSeedErrorCode code, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NZ_SEED_ERROR, code, NZ_SEED_MESSAGE_PREFIX "%s", msg);
  return FALSE;
}

/* Trimmed text, its last TAIL_CHARS characters prefixed with an ellipsis if longer. */
static char *
tail (const Run *r)
{
  const char *src = r->err->len > 0 ? r->err->str : r->out->str;
  g_autofree char *t = g_strstrip (g_strdup (src));
  glong n = g_utf8_strlen (t, -1);

  if (n <= TAIL_CHARS)
    return g_steal_pointer (&t);
  return g_strconcat ("…", g_utf8_offset_to_pointer (t, n - TAIL_CHARS), NULL);
}

static void
on_output (NzExecStream stream, const char *data, gsize len, gpointer user_data)
{
  Run *r = user_data;

  g_string_append_len (stream == NZ_EXEC_STDOUT ? r->out : r->err, data, len);
}

/* Runs @script with @args (NULL-terminated) as `sh -c SCRIPT namzu-seed ARGS...`, prompts and
 * credential helpers off. FALSE only when the transport failed; a non-zero exit is r->status. */
static gboolean
run_sh (Ctx *ctx, const char *script, const char *const *args, Run *r, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) result = NULL;
  JsonArray *argv = json_array_new ();
  JsonObject *env = json_object_new ();

  r->out = g_string_new (NULL);
  r->err = g_string_new (NULL);
  json_object_set_string_member (body, "command", "sh");
  json_array_add_string_element (argv, "-c");
  json_array_add_string_element (argv, script);
  json_array_add_string_element (argv, "namzu-seed");
  for (guint i = 0; args[i] != NULL; i++)
    json_array_add_string_element (argv, args[i]);
  json_object_set_array_member (body, "args", argv);
  /* A URL that wants a password fails at once instead of waiting on a prompt no one sees, and
   * no helper or askpass program in the guest is asked for a secret (spec G.3). */
  json_object_set_string_member (env, "GIT_TERMINAL_PROMPT", "0");
  json_object_set_string_member (env, "GIT_ASKPASS", "");
  json_object_set_string_member (env, "SSH_ASKPASS", "");
  json_object_set_string_member (env, "GCM_INTERACTIVE", "never");
  json_object_set_object_member (body, "env", env);
  if (ctx->opts->timeout_ms > 0)
    json_object_set_int_member (body, "timeoutMs", ctx->opts->timeout_ms);

  result = nz_agent_client_exec (ctx->client, body, on_output, r, NULL, ctx->cancellable, error);
  if (result == NULL)
    return FALSE;
  r->timed_out = nz_json_get_bool (result, "timedOut", FALSE);
  r->status = nz_exec_exit_status (result);
  if (r->status < 0)
    return nz_throw (error, NZ_ERROR_PROTOCOL, "the agent reported no usable exit status");
  return TRUE;
}

static const char *
recorded_from (const NzSeedRepo *repo)
{
  if (repo->commit != NULL)
    return ":commit";
  return repo->ref != NULL ? repo->ref : "";
}

static const char *
explain (const char *state)
{
  if (strcmp (state, "origin") == 0)
    return "has a different origin URL";
  if (strcmp (state, "history") == 0)
    return "no longer contains its pinned or recorded commit";
  if (strcmp (state, "occupied") == 0)
    return "is a directory that is not a git repository";
  return NULL;
}

/* The whole sentence for one drifted repository. */
static char *
drift_sentence (const Repo *r)
{
  if (strcmp (r->state, "ref") == 0 && r->repo->ref != NULL)
    return g_strdup_printf ("%s does not hold the seed's ref '%s' at HEAD", r->repo->name,
                            r->repo->ref);
  if (strcmp (r->state, "ref") == 0)
    return g_strdup_printf ("%s does not hold the seed's ref (the remote's default branch) at "
                            "HEAD",
                            r->repo->name);
  if (strcmp (r->state, "pin") == 0)
    return g_strdup_printf ("%s is not checked out at its pinned commit %s", r->repo->name,
                            r->repo->commit);
  return g_strdup_printf ("%s %s", r->repo->name, explain (r->state));
}

static gboolean
is_drift_state (const char *state)
{
  return strcmp (state, "origin") == 0 || strcmp (state, "history") == 0
         || strcmp (state, "ref") == 0 || strcmp (state, "pin") == 0
         || strcmp (state, "occupied") == 0;
}

static void progress (Ctx *ctx, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static void
progress (Ctx *ctx, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  if (ctx->opts->progress == NULL)
    return;
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  ctx->opts->progress (msg, ctx->opts->progress_data);
}

static gboolean
preflight (Ctx *ctx, const char *base, GError **error)
{
  const char *args[] = { base, NULL };
  g_auto (Run) r = { 0 };
  g_autoptr (GError) local = NULL;
  g_autofree char *t = NULL;

  if (!run_sh (ctx, preflight_script, args, &r, &local))
    {
      if (local->domain == G_SPAWN_ERROR)
        return seed_error (error, NZ_SEED_ERROR_TOOL_MISSING,
                           "could not run sh in the "
                           "sandbox: %s",
                           local->message);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (r.status == 0)
    return TRUE;
  if (g_str_has_prefix (r.out->str, "missing "))
    {
      g_autofree char *tool = g_strstrip (g_strdup (r.out->str + strlen ("missing ")));

      return seed_error (error, NZ_SEED_ERROR_TOOL_MISSING,
                         "the sandbox is missing %s, which "
                         "seeds need (sh git find mkdir mktemp rm and GNU mv -T)",
                         tool);
    }
  if (r.status == 127)
    return seed_error (error, NZ_SEED_ERROR_TOOL_MISSING, "could not run sh in the sandbox");
  t = tail (&r);
  return seed_error (error, NZ_SEED_ERROR_INVALID, "root %s is not writable in the sandbox: %s",
                     ctx->opts->root, t);
}

/* Reads the marker's records. The marker is guest-writable: a record is only a memo of which
 * commit a ref meant, used under the same ref and only when it is a well-formed commit id. */
static gboolean
read_marker (Ctx *ctx, const char *marker, Repo *repos, guint n, GError **error)
{
  const char *args[] = { marker, NULL };
  g_auto (Run) r = { 0 };
  g_autoptr (JsonObject) obj = NULL;
  JsonObject *commits, *refs;

  if (!run_sh (ctx, marker_read_script, args, &r, error))
    return FALSE;
  obj = r.status == 0 ? nz_agent_reply_parse (r.out->str, r.out->len, NULL) : NULL;
  commits = obj != NULL ? nz_json_get_object (obj, "commits") : NULL;
  refs = obj != NULL ? nz_json_get_object (obj, "refs") : NULL;
  if (commits == NULL || refs == NULL)
    return TRUE;
  for (guint i = 0; i < n; i++)
    {
      const char *c = nz_json_get_string (commits, repos[i].repo->name);
      const char *f = nz_json_get_string (refs, repos[i].repo->name);

      if (f != NULL && strcmp (f, repos[i].from) == 0 && nz_seed_is_commit_id (c))
        repos[i].recorded = g_strdup (c);
    }
  return TRUE;
}

/* Appends the five check arguments for @r. */
static void
add_check_args (GPtrArray *args, Repo *r, gboolean force_exact)
{
  const char *want = r->repo->commit != NULL ? r->repo->commit : r->recorded;
  const char *ref = want != NULL ? "" : r->repo->ref != NULL ? r->repo->ref : ":default";
  /* A pin the marker has not seen held must be HEAD exactly; an old pin moved forward is
   * fine only under the same pin. */
  gboolean exact
      = r->repo->commit != NULL && (force_exact || g_strcmp0 (r->recorded, r->repo->commit) != 0);

  g_ptr_array_add (args, r->path);
  g_ptr_array_add (args, r->repo->url);
  g_ptr_array_add (args, (gpointer)(want != NULL ? want : ""));
  g_ptr_array_add (args, (gpointer)ref);
  g_ptr_array_add (args, (gpointer)(exact ? "1" : "0"));
}

/* Runs the check for @repos[@idx] (every repository when @idx is G_MAXUINT). */
static gboolean
check (Ctx *ctx, Repo *repos, guint n, guint idx, GError **error)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  g_auto (Run) r = { 0 };
  g_auto (GStrv) lines = NULL;
  guint first = idx == G_MAXUINT ? 0 : idx;
  guint count = idx == G_MAXUINT ? n : 1;

  for (guint i = first; i < first + count; i++)
    add_check_args (args, &repos[i], idx != G_MAXUINT);
  g_ptr_array_add (args, NULL);
  if (!run_sh (ctx, check_script, (const char *const *)args->pdata, &r, error))
    return FALSE;
  if (r.status != 0)
    {
      g_autofree char *t = tail (&r);

      return seed_error (error, NZ_SEED_ERROR_INVALID, "could not inspect the seed root: %s", t);
    }
  lines = g_strsplit (r.out->str, "\n", -1);
  if (g_strv_length (lines) != count + 1 || *lines[count] != '\0')
    return seed_error (error, NZ_SEED_ERROR_INVALID,
                       "could not inspect the seed root: "
                       "unexpected output");
  for (guint i = 0; i < count; i++)
    {
      Repo *rp = &repos[first + i];
      g_auto (GStrv) tok = g_strsplit (lines[i], " ", -1);
      guint nt = g_strv_length (tok);
      gboolean present = nt == 3 && strcmp (tok[0], "present") == 0;
      gboolean dash = nt == 2 && strcmp (tok[1], "-") == 0;

      if (!(present || (nt == 2 && (is_drift_state (tok[0]) || strcmp (tok[0], "missing") == 0))))
        return seed_error (error, NZ_SEED_ERROR_INVALID,
                           "could not inspect the seed root: "
                           "unknown state '%s'",
                           lines[i]);
      /* Everything we pass on must be a commit id or "-": the guest wrote it. */
      if ((!dash && !nz_seed_is_commit_id (tok[1])) || (present && !nz_seed_is_commit_id (tok[2])))
        return seed_error (error, NZ_SEED_ERROR_INVALID,
                           "could not inspect the seed root: "
                           "malformed line '%s'",
                           lines[i]);
      g_free (rp->state);
      g_free (rp->head);
      g_clear_pointer (&rp->held, g_free);
      rp->state = g_strdup (tok[0]);
      rp->head = dash ? NULL : g_strdup (tok[1]);
      if (present)
        rp->held = g_strdup (tok[2]);
    }
  return TRUE;
}

static void
set_present (Repo *r)
{
  r->status = "present";
  r->commit = g_strdup (r->head);
  r->rec_commit = g_strdup (r->held != NULL ? r->held : r->head);
  r->rec_from = g_strdup (r->from);
}

static void
set_drifted (Repo *r)
{
  r->status = "drifted";
  r->commit = g_strdup (r->head);
  /* Keep the old record, if any: drift is never a reason to forget what was held. */
  if (r->recorded != NULL)
    {
      r->rec_commit = g_strdup (r->recorded);
      r->rec_from = g_strdup (r->from);
    }
}

static gboolean
clone (Ctx *ctx, Repo *repos, guint n, guint idx, GError **error)
{
  Repo *r = &repos[idx];
  const NzSeedRepo *repo = r->repo;
  g_autofree char *nonce = NULL;
  g_autofree char *depth = NULL;
  g_auto (Run) run = { 0 };
  g_auto (GStrv) tok = NULL;
  const char *args[7];
  guint8 rnd[6];

  for (gsize i = 0; i < sizeof rnd; i++)
    rnd[i] = (guint8)g_random_int_range (0, 256);
  nonce = g_strdup_printf ("%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                           rnd[5]);
  /* A pinned commit needs the history that holds it: full clone. */
  if (repo->commit == NULL)
    depth = g_strdup_printf ("%" G_GINT64_FORMAT,
                             repo->depth > 0 ? repo->depth : NZ_SEED_DEFAULT_DEPTH);
  args[0] = r->path;
  args[1] = repo->url;
  args[2] = nonce;
  args[3] = depth != NULL ? depth : "";
  args[4] = repo->ref != NULL ? repo->ref : "";
  args[5] = repo->commit != NULL ? repo->commit : "";
  args[6] = NULL;
  progress (ctx, "cloning %s from %s", repo->name, repo->url);
  if (!run_sh (ctx, clone_script, args, &run, error))
    return FALSE;
  tok = g_strsplit (g_strstrip (run.out->str), " ", -1);
  if (run.status != 0 || g_strv_length (tok) != 2 || !nz_seed_is_commit_id (tok[1])
      || (strcmp (tok[0], "cloned") != 0 && strcmp (tok[0], "raced") != 0))
    {
      g_autofree char *t = tail (&run);

      return seed_error (error, NZ_SEED_ERROR_CLONE_FAILED,
                         "cloning %s from %s failed (exit "
                         "%d%s): %s",
                         repo->name, repo->url, run.status, run.timed_out ? ", timed out" : "", t);
    }
  if (strcmp (tok[0], "cloned") == 0)
    {
      r->status = "cloned";
      r->commit = g_strdup (tok[1]);
      r->rec_commit = g_strdup (repo->commit != NULL ? repo->commit : tok[1]);
      r->rec_from = g_strdup (r->from);
      return TRUE;
    }
  /* Someone else put a directory there while we cloned: judge theirs like any other. */
  if (!check (ctx, repos, n, idx, error))
    return FALSE;
  if (strcmp (r->state, "present") == 0)
    {
      set_present (r);
      return TRUE;
    }
  if (strcmp (r->state, "missing") == 0)
    return seed_error (error, NZ_SEED_ERROR_CLONE_FAILED,
                       "%s was placed by someone else while "
                       "this call cloned it, and is gone again; this call's own clone was "
                       "removed, run it again",
                       repo->name);
  if (ctx->opts->report_drift)
    {
      set_drifted (r);
      return TRUE;
    }
  {
    g_autofree char *what = drift_sentence (r);

    return seed_error (error, NZ_SEED_ERROR_DRIFT,
                       "%s appeared while this call was cloning "
                       "it, and %s. This call's own clone was removed; nothing else was "
                       "changed",
                       repo->name, what);
  }
}

static JsonObject *
build_report (const NzSeed *seed, const char *digest, const char *root, Repo *repos, guint n)
{
  JsonObject *o = json_object_new ();
  JsonArray *arr = json_array_new ();

  json_object_set_string_member (o, "seed", seed->name);
  json_object_set_string_member (o, "digest", digest);
  json_object_set_string_member (o, "root", root);
  for (guint i = 0; i < n; i++)
    {
      JsonObject *ro = json_object_new ();

      json_object_set_string_member (ro, "name", repos[i].repo->name);
      json_object_set_string_member (ro, "dir", repos[i].repo->dir);
      json_object_set_string_member (ro, "status", repos[i].status);
      if (repos[i].commit != NULL)
        json_object_set_string_member (ro, "commit", repos[i].commit);
      else
        json_object_set_null_member (ro, "commit");
      if (strcmp (repos[i].status, "drifted") == 0)
        json_object_set_string_member (ro, "drift", repos[i].state);
      json_array_add_object_element (arr, ro);
    }
  json_object_set_array_member (o, "repositories", arr);
  return o;
}

static gboolean
finish (Ctx *ctx, const NzSeed *seed, const char *digest, const char *marker, Repo *repos, guint n,
        GError **error)
{
  g_autoptr (JsonObject) m = json_object_new ();
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GHashTable) parents = g_hash_table_new (g_str_hash, g_str_equal);
  JsonObject *commits = json_object_new ();
  JsonObject *refs = json_object_new ();
  g_auto (Run) r = { 0 };
  guint8 rnd[6];

  json_object_set_string_member (m, "seed", seed->name);
  json_object_set_string_member (m, "digest", digest);
  for (guint i = 0; i < n; i++)
    if (repos[i].rec_commit != NULL)
      {
        json_object_set_string_member (commits, repos[i].repo->name, repos[i].rec_commit);
        json_object_set_string_member (refs, repos[i].repo->name, repos[i].rec_from);
      }
  json_object_set_object_member (m, "commits", commits);
  json_object_set_object_member (m, "refs", refs);

  for (gsize i = 0; i < sizeof rnd; i++)
    rnd[i] = (guint8)g_random_int_range (0, 256);
  g_ptr_array_add (args, g_strdup (marker));
  g_ptr_array_add (args, g_strdup_printf ("%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
                                          rnd[3], rnd[4], rnd[5]));
  g_ptr_array_add (args, nz_json_object_to_string (m, NULL));
  g_ptr_array_add (args, g_strdup_printf ("%d", NZ_SEED_STALE_PARTIAL_MINUTES));
  for (guint i = 0; i < n; i++)
    {
      const char *slash = strrchr (repos[i].path, '/');
      g_autofree char *parent = slash == repos[i].path
                                    ? g_strdup ("/")
                                    : g_strndup (repos[i].path, slash - repos[i].path);

      if (g_hash_table_contains (parents, parent))
        continue;
      g_hash_table_add (parents, parent);
      g_ptr_array_add (args, g_steal_pointer (&parent));
    }
  g_ptr_array_add (args, NULL);
  if (!run_sh (ctx, finish_script, (const char *const *)args->pdata, &r, error))
    return FALSE;
  if (r.status != 0)
    {
      g_autofree char *t = tail (&r);

      return seed_error (error, NZ_SEED_ERROR_INVALID, "could not write the seed marker: %s", t);
    }
  return TRUE;
}

/* Everything after the repositories are known; fills repos[].status as it learns. */
static gboolean
ensure (Ctx *ctx, const NzSeed *seed, const char *digest, const char *base, Repo *repos, guint n,
        GError **error)
{
  g_autofree char *marker = g_strdup_printf ("%s/.namzu/seed/%s.json", base, seed->name);
  g_autoptr (GString) drift = g_string_new (NULL);

  progress (ctx, "checking %u repositories under %s", n, ctx->opts->root);
  if (!preflight (ctx, base, error) || !read_marker (ctx, marker, repos, n, error)
      || !check (ctx, repos, n, G_MAXUINT, error))
    return FALSE;

  for (guint i = 0; i < n; i++)
    {
      Repo *r = &repos[i];

      if (strcmp (r->state, "present") == 0)
        set_present (r);
      else if (strcmp (r->state, "missing") == 0)
        r->status = "missing";
      else
        {
          g_autofree char *sentence = drift_sentence (r);

          set_drifted (r);
          g_string_append_printf (drift, "%s%s", drift->len > 0 ? "; " : "", sentence);
        }
    }
  /* Drift is refused before anything is cloned or written (spec G.3 step 4). */
  if (drift->len > 0 && !ctx->opts->report_drift)
    return seed_error (error, NZ_SEED_ERROR_DRIFT,
                       "%s. Nothing was changed; resolve it by "
                       "hand, or pass onDrift: 'report' (namzu-seed --on-drift=report)",
                       drift->str);
  for (guint i = 0; i < n; i++)
    if (strcmp (repos[i].status, "missing") == 0 && !clone (ctx, repos, n, i, error))
      return FALSE;
  progress (ctx, "writing the seed marker");
  return finish (ctx, seed, digest, marker, repos, n, error);
}

gboolean
nz_seed_ensure (NzAgentClient *client, const NzSeed *seed, const NzSeedOptions *opts,
                JsonObject **out_report, GCancellable *cancellable, GError **error)
{
  Ctx ctx = { client, opts, cancellable };
  g_autofree char *base = NULL;
  g_autofree char *digest = NULL;
  Repo *repos;
  guint n;
  gboolean ok;

  g_return_val_if_fail (client != NULL, FALSE);
  g_return_val_if_fail (seed != NULL, FALSE);
  g_return_val_if_fail (opts != NULL, FALSE);

  if (out_report != NULL)
    *out_report = NULL;
  if (!nz_seed_check_root (opts->root, error))
    return FALSE;
  base = g_strdup (opts->root);
  while (*base != '\0' && base[strlen (base) - 1] == '/')
    base[strlen (base) - 1] = '\0';
  digest = nz_seed_digest (seed);

  n = seed->repos->len;
  repos = g_new0 (Repo, n);
  for (guint i = 0; i < n; i++)
    {
      repos[i].repo = seed->repos->pdata[i];
      repos[i].path = g_strdup_printf ("%s/%s", base, repos[i].repo->dir);
      repos[i].from = g_strdup (recorded_from (repos[i].repo));
    }
  ok = ensure (&ctx, seed, digest, base, repos, n, error);
  /* Once the check ran every repository has a status: report it, also on failure. */
  if (out_report != NULL && repos[0].status != NULL)
    *out_report = build_report (seed, digest, opts->root, repos, n);
  for (guint i = 0; i < n; i++)
    repo_clear (&repos[i]);
  g_free (repos);
  return ok;
}
