/* docs/cli.md is the CLI's machine-readable contract: this test parses it and runs every tool
 * for real (the built tools, container:bwrap sandboxes; test-cli-contract-docker.c builds this
 * file again for container:docker) and checks every JSON object they print
 * against it: each required field present with its documented type, optional ones typed right
 * when present, and no field the page does not document (a field added without its row fails).
 *
 * docs/cli.md's shape, parsed here: a heading "### Object `NAME`", optionally a line
 * "Extends `OTHER`", then one table "| field | type | presence | stability | meaning |".
 * Adding an object is one heading and table there, and one row of `cases` below whose producer
 * runs the tool and hands its stdout to expect_lines(). */
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-json.h"
#include "sandbox-harness.h"

/* ---- the contract: docs/cli.md ---------------------------------------------------------- */

typedef enum
{
  T_STRING,
  T_INTEGER,
  T_NUMBER,
  T_BOOLEAN,
  T_NULL,
  T_OBJECT, /* members are the rows under it */
  T_MAP,    /* members not listed */
  T_REF,    /* another object of the page */
} Kind;

typedef struct
{
  Kind kind;
  gboolean array; /* "array of KIND" */
  char *ref;      /* T_REF: the object's name */
} Alt;

typedef struct
{
  char *field;  /* "a", "a.b", "a[].b" */
  GArray *alts; /* of Alt: "T or U" */
  gboolean required;
  gboolean stable;
} Row;

typedef struct
{
  char *name;
  char *extends;
  GPtrArray *rows; /* of Row */
} Contract;

static GHashTable *contracts; /* name -> Contract */
static GPtrArray *order;      /* names in page order */
static GHashTable *validated; /* names this case's output was checked against */

static void
alt_clear (gpointer p)
{
  g_free (((Alt *)p)->ref);
}

static void
row_free (gpointer p)
{
  Row *r = p;

  g_free (r->field);
  g_array_unref (r->alts);
  g_free (r);
}

static void
contract_free (gpointer p)
{
  Contract *c = p;

  g_free (c->name);
  g_free (c->extends);
  g_ptr_array_unref (c->rows);
  g_free (c);
}

/* @s without backticks and surrounding blanks (a new string). */
static char *
plain (const char *s)
{
  g_autoptr (GString) out = g_string_new (NULL);

  for (; *s != '\0'; s++)
    if (*s != '`')
      g_string_append_c (out, *s);
  return g_strstrip (g_string_free (g_steal_pointer (&out), FALSE));
}

static gboolean
parse_kind (const char *word, Alt *alt)
{
  static const struct
  {
    const char *word;
    Kind kind;
  } kinds[] = { { "string", T_STRING },   { "integer", T_INTEGER }, { "number", T_NUMBER },
                { "boolean", T_BOOLEAN }, { "null", T_NULL },       { "object", T_OBJECT },
                { "map", T_MAP } };

  for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
    if (g_str_equal (word, kinds[i].word))
      {
        alt->kind = kinds[i].kind;
        return TRUE;
      }
  /* Another object's NAME: checked to exist once the page is read. */
  if (!g_regex_match_simple ("^[a-z][a-z0-9-]*$", word, 0, 0))
    return FALSE;
  alt->kind = T_REF;
  alt->ref = g_strdup (word);
  return TRUE;
}

static GArray *
parse_type (const char *text, const char *where)
{
  GArray *alts = g_array_new (FALSE, TRUE, sizeof (Alt));
  g_auto (GStrv) words = g_strsplit (text, " or ", -1);

  g_array_set_clear_func (alts, alt_clear);
  for (char **w = words; *w != NULL; w++)
    {
      Alt alt = { 0 };
      const char *k = g_strstrip (*w);

      if (g_str_has_prefix (k, "array of "))
        {
          alt.array = TRUE;
          k += strlen ("array of ");
        }
      ck_assert_msg (parse_kind (k, &alt), "docs/cli.md %s: unknown type '%s'", where, text);
      g_array_append_val (alts, alt);
    }
  return alts;
}

/* The rows' parent prefix: "" for "a", "a." for "a.b", "a[]." for "a[].b". */
static char *
parent_prefix (const char *field)
{
  const char *dot = strrchr (field, '.');

  return dot != NULL ? g_strndup (field, dot - field + 1) : g_strdup ("");
}

static Row *
find_row (const Contract *c, const char *field)
{
  for (guint i = 0; i < c->rows->len; i++)
    if (g_str_equal (((Row *)c->rows->pdata[i])->field, field))
      return c->rows->pdata[i];
  if (c->extends != NULL)
    return find_row (g_hash_table_lookup (contracts, c->extends), field);
  return NULL;
}

static void
parse_row (Contract *c, const char *line, guint lineno)
{
  g_auto (GStrv) cells = g_strsplit (line, "|", -1);
  g_autofree char *where = g_strdup_printf ("line %u (object %s)", lineno, c->name);
  g_autofree char *type = NULL, *presence = NULL, *stability = NULL, *meaning = NULL;
  Row *row;

  /* "| a | b | c | d | e |" splits into "", five cells, "". */
  ck_assert_msg (g_strv_length (cells) == 7, "docs/cli.md %s: want 5 cells: %s", where, line);
  row = g_new0 (Row, 1);
  row->field = plain (cells[1]);
  type = plain (cells[2]);
  presence = plain (cells[3]);
  stability = plain (cells[4]);
  meaning = plain (cells[5]);
  ck_assert_msg (g_regex_match_simple ("^[A-Za-z][A-Za-z0-9]*((\\[\\])?\\.[A-Za-z][A-Za-z0-9]*)*$",
                                       row->field, 0, 0),
                 "docs/cli.md %s: bad field name '%s'", where, row->field);
  ck_assert_msg (find_row (c, row->field) == NULL, "docs/cli.md %s: '%s' twice", where, row->field);
  row->alts = parse_type (type, where);
  ck_assert_msg (g_str_equal (presence, "required") || g_str_equal (presence, "optional"),
                 "docs/cli.md %s: presence is required or optional, not '%s'", where, presence);
  row->required = g_str_equal (presence, "required");
  ck_assert_msg (g_str_equal (stability, "stable") || g_str_equal (stability, "unstable"),
                 "docs/cli.md %s: stability is stable or unstable, not '%s'", where, stability);
  row->stable = g_str_equal (stability, "stable");
  ck_assert_msg (*meaning != '\0', "docs/cli.md %s: '%s' says nothing", where, row->field);
  g_ptr_array_add (c->rows, row);
}

/* Whether a row @field's parent is a documented object (or array of objects) of @c. */
static gboolean
parent_is_object (const Contract *c, const char *field)
{
  g_autofree char *prefix = parent_prefix (field);
  gboolean in_array;
  Row *parent;

  if (*prefix == '\0')
    return TRUE;
  prefix[strlen (prefix) - 1] = '\0';
  in_array = g_str_has_suffix (prefix, "[]");
  if (in_array)
    prefix[strlen (prefix) - 2] = '\0';
  parent = find_row (c, prefix);
  if (parent == NULL)
    return FALSE;
  for (guint i = 0; i < parent->alts->len; i++)
    {
      Alt *a = &g_array_index (parent->alts, Alt, i);

      if (a->kind == T_OBJECT && a->array == in_array)
        return TRUE;
    }
  return FALSE;
}

static void
contract_load (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("NZ_SOURCE_DIR"), "docs", "cli.md", NULL);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  Contract *c = NULL;
  gboolean header = FALSE;

  ck_assert_msg (g_file_get_contents (path, &text, NULL, NULL), "cannot read %s", path);
  contracts = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, contract_free);
  order = g_ptr_array_new ();
  validated = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      const char *l = lines[i];

      if (g_str_has_prefix (l, "#"))
        {
          g_autofree char *name = NULL;

          c = NULL;
          header = FALSE;
          if (!g_str_has_prefix (l, "### Object "))
            continue;
          name = plain (l + strlen ("### Object "));
          ck_assert_msg (g_regex_match_simple ("^[a-z][a-z0-9-]*$", name, 0, 0),
                         "docs/cli.md line %u: object name '%s'", i + 1, name);
          ck_assert_msg (!g_hash_table_contains (contracts, name), "object %s twice", name);
          c = g_new0 (Contract, 1);
          c->name = g_steal_pointer (&name);
          c->rows = g_ptr_array_new_with_free_func (row_free);
          g_hash_table_insert (contracts, c->name, c);
          g_ptr_array_add (order, c->name);
        }
      else if (c != NULL && g_str_has_prefix (l, "Extends "))
        {
          c->extends = plain (l + strlen ("Extends "));
          ck_assert_msg (g_hash_table_contains (contracts, c->extends),
                         "docs/cli.md line %u: object %s extends '%s', which no earlier heading "
                         "defines",
                         i + 1, c->name, c->extends);
        }
      else if (c != NULL && g_str_has_prefix (l, "|"))
        {
          if (!header)
            {
              ck_assert_msg (g_str_equal (l, "| field | type | presence | stability | meaning |"),
                             "docs/cli.md line %u: object %s's table header: %s", i + 1, c->name,
                             l);
              ck_assert_msg (lines[i + 1] != NULL && g_str_has_prefix (lines[i + 1], "|---"),
                             "docs/cli.md line %u: no separator row", i + 2);
              header = TRUE;
              i++;
            }
          else
            parse_row (c, l, i + 1);
        }
    }
  /* What the rows refer to exists. */
  for (guint i = 0; i < order->len; i++)
    {
      c = g_hash_table_lookup (contracts, order->pdata[i]);
      ck_assert_msg (c->rows->len > 0 || c->extends != NULL, "object %s has no table", c->name);
      ck_assert_msg (c->extends == NULL || g_hash_table_contains (contracts, c->extends),
                     "object %s extends unknown %s", c->name, c->extends);
      for (guint j = 0; j < c->rows->len; j++)
        {
          Row *r = c->rows->pdata[j];

          ck_assert_msg (parent_is_object (c, r->field),
                         "object %s: %s's parent is not a documented object", c->name, r->field);
          for (guint k = 0; k < r->alts->len; k++)
            {
              Alt *a = &g_array_index (r->alts, Alt, k);

              ck_assert_msg (a->kind != T_REF || g_hash_table_contains (contracts, a->ref),
                             "object %s: %s is of unknown type %s", c->name, r->field, a->ref);
            }
        }
    }
}

/* ---- checking a printed object against it ----------------------------------------------- */

static void check_object (const Contract *c, const char *prefix, JsonObject *obj, GString *bad);

static gboolean
scalar_is (JsonNode *node, Kind kind)
{
  GType t;

  if (kind == T_NULL)
    return JSON_NODE_HOLDS_NULL (node);
  if (!JSON_NODE_HOLDS_VALUE (node))
    return FALSE;
  t = json_node_get_value_type (node);
  switch (kind)
    {
    case T_STRING:
      return t == G_TYPE_STRING;
    case T_INTEGER:
      return t == G_TYPE_INT64;
    case T_NUMBER:
      return t == G_TYPE_INT64 || t == G_TYPE_DOUBLE;
    case T_BOOLEAN:
      return t == G_TYPE_BOOLEAN;
    default:
      return FALSE;
    }
}

/* Whether @node is one @a (not looking inside objects). */
static gboolean
one_is (JsonNode *node, Kind kind)
{
  if (kind == T_OBJECT || kind == T_MAP || kind == T_REF)
    return JSON_NODE_HOLDS_OBJECT (node);
  return scalar_is (node, kind);
}

static void
check_one (const Contract *c, const Alt *a, const char *field, JsonNode *node, GString *bad)
{
  g_autofree char *below = g_strconcat (field, a->array ? "[]." : ".", NULL);

  if (a->kind == T_OBJECT)
    check_object (c, below, json_node_get_object (node), bad);
  else if (a->kind == T_REF)
    check_object (g_hash_table_lookup (contracts, a->ref), "", json_node_get_object (node), bad);
}

static void
check_value (const Contract *c, const Row *r, JsonNode *node, GString *bad)
{
  for (guint i = 0; i < r->alts->len; i++)
    {
      const Alt *a = &g_array_index (r->alts, Alt, i);
      JsonArray *arr;
      gboolean all = TRUE;

      if (!a->array)
        {
          if (!one_is (node, a->kind))
            continue;
          check_one (c, a, r->field, node, bad);
          return;
        }
      if (!JSON_NODE_HOLDS_ARRAY (node))
        continue;
      arr = json_node_get_array (node);
      for (guint j = 0; j < json_array_get_length (arr); j++)
        all = all && one_is (json_array_get_element (arr, j), a->kind);
      if (!all)
        continue;
      for (guint j = 0; j < json_array_get_length (arr); j++)
        check_one (c, a, r->field, json_array_get_element (arr, j), bad);
      return;
    }
  g_string_append_printf (bad, "; %s: field '%s' has the wrong type", c->name, r->field);
}

/* The rows of @c (and of what it extends) directly below @prefix. */
static void
rows_below (const Contract *c, const char *prefix, GPtrArray *into)
{
  for (guint i = 0; i < c->rows->len; i++)
    {
      Row *r = c->rows->pdata[i];
      g_autofree char *p = parent_prefix (r->field);

      if (g_str_equal (p, prefix))
        g_ptr_array_add (into, r);
    }
  if (c->extends != NULL)
    rows_below (g_hash_table_lookup (contracts, c->extends), prefix, into);
}

static void
check_object (const Contract *c, const char *prefix, JsonObject *obj, GString *bad)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new ();
  g_autoptr (GList) members = json_object_get_members (obj);

  if (*prefix == '\0')
    g_hash_table_add (validated, g_strdup (c->name));
  for (GList *m = members; m != NULL; m = m->next)
    {
      g_autofree char *field = g_strconcat (prefix, (const char *)m->data, NULL);
      Row *r = find_row (c, field);

      if (r == NULL)
        g_string_append_printf (bad, "; %s: field '%s' is not in docs/cli.md", c->name, field);
      else
        check_value (c, r, json_object_get_member (obj, m->data), bad);
    }
  rows_below (c, prefix, rows);
  for (guint i = 0; i < rows->len; i++)
    {
      Row *r = rows->pdata[i];
      const char *member = r->field + strlen (prefix);

      if (r->required && !json_object_has_member (obj, member))
        g_string_append_printf (bad, "; %s: required field '%s' is missing", c->name, r->field);
    }
}

/* Checks @node against object @name; asserts it holds. */
static void
expect_object (const char *name, JsonNode *node, const char *text)
{
  const Contract *c = g_hash_table_lookup (contracts, name);
  g_autoptr (GString) bad = g_string_new (NULL);

  ck_assert_msg (c != NULL, "docs/cli.md has no object %s", name);
  ck_assert_msg (JSON_NODE_HOLDS_OBJECT (node), "%s: not a JSON object: %s", name, text);
  check_object (c, "", json_node_get_object (node), bad);
  ck_assert_msg (bad->len == 0, "%s printed %s%s", name, text, bad->str);
}

typedef const char *(*Classify) (JsonObject *line);

/* @out is JSON Lines, each line a whole document ending in a newline: checks each line against
 * object @name, or the one @classify names for it. Returns how many lines there were. */
static guint
expect_lines_by (const char *name, Classify classify, const char *out)
{
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  guint n = 0;

  ck_assert_msg (*out == '\0' || g_str_has_suffix (out, "\n"), "stdout does not end a line: %s",
                 out);
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++, n++)
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_autoptr (GError) error = NULL;
      JsonNode *root;

      ck_assert_msg (json_parser_load_from_data (parser, lines[i], -1, &error),
                     "stdout line %u is not JSON (%s): %s", i + 1, error->message, lines[i]);
      root = json_parser_get_root (parser);
      ck_assert_msg (root != NULL && JSON_NODE_HOLDS_OBJECT (root), "line %u: %s", i + 1, lines[i]);
      expect_object (classify != NULL ? classify (json_node_get_object (root)) : name, root,
                     lines[i]);
    }
  return n;
}

static guint
expect_lines (const char *name, const char *out)
{
  return expect_lines_by (name, NULL, out);
}

/* namzu-exec --json's events, told apart by "type". */
static const char *
exec_event (JsonObject *line)
{
  const char *type = nz_json_get_string (line, "type");

  if (g_strcmp0 (type, "result") == 0)
    return "exec-result-event";
  if (g_strcmp0 (type, "error") == 0)
    return "exec-error-event";
  ck_assert_msg (g_strcmp0 (type, "stdout") == 0 || g_strcmp0 (type, "stderr") == 0,
                 "namzu-exec --json event of type %s", type ? type : "(none)");
  return "exec-output-event";
}

/* Runs @tool with @args, asserts exit status @want_rc and that stdout is one object @name,
 * which it returns. */
static JsonObject *
tool_objectv (int want_rc, const char *name, const char *tool, const char *const *args)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_toolv (NULL, &out, &err, tool, args);

  ck_assert_msg (rc == want_rc, "%s %s: exit %d, not %d: %s%s", tool, args[0], rc, want_rc, out,
                 err);
  ck_assert_msg (expect_lines (name, out) == 1, "%s %s: want one line: %s", tool, args[0], out);
  return nz_json_parse_object (out, -1, NULL);
}

#define tool_object(rc, name, tool, ...)                                                           \
  tool_objectv (rc, name, tool, (const char *const[]){ __VA_ARGS__, NULL })

/* Runs namzu-exec or namzu-run --json with @args, asserts exit status @want_rc, checks every
 * event line, and that the stream ends in its one result or error line. */
static void
tool_events (int want_rc, const char *tool, const char *const *args)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_toolv (NULL, &out, &err, tool, args);
  g_auto (GStrv) lines = NULL;
  guint n;

  ck_assert_msg (rc == want_rc, "%s: exit %d, not %d: %s%s", tool, rc, want_rc, out, err);
  n = expect_lines_by (NULL, exec_event, out);
  ck_assert (n >= 1);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (JsonObject) ev = nz_json_parse_object (lines[i], -1, NULL);
      const char *kind = exec_event (ev);
      gboolean ends = !g_str_equal (kind, "exec-output-event");

      ck_assert_msg (ends == (i == n - 1), "%s: line %u of %u is an %s: %s", tool, i + 1, n, kind,
                     out);
    }
}

/* ---- the producers: each runs tools for real and checks what they print ------------------ */

#ifdef NZ_CONTRACT_DOCKER
static const char *
worker_image (void)
{
  const char *image = g_getenv ("NAMZU_WORKER_IMAGE");

  return image != NULL && *image != '\0' ? image : "namzu-worker:latest";
}
#endif

/* @args after the options that pick the backend this binary runs on (new strings). */
static GPtrArray *
backend_args (const char *const *args)
{
  GPtrArray *all = g_ptr_array_new_with_free_func (g_free);

#ifdef NZ_CONTRACT_DOCKER
  {
    /* Docker needs an outputs bind; the workload (uid namzu) writes there. */
    g_autofree char *outputs = g_build_filename (harness.tmp, "outputs-XXXXXX", NULL);

    ck_assert (g_mkdtemp (outputs) != NULL);
    ck_assert_int_eq (chmod (outputs, 0777), 0);
    g_ptr_array_add (all, g_strdup ("--backend"));
    g_ptr_array_add (all, g_strdup ("container:docker"));
    g_ptr_array_add (all, g_strdup ("--image"));
    g_ptr_array_add (all, g_strdup (worker_image ()));
    g_ptr_array_add (all, g_strdup ("--outputs"));
    g_ptr_array_add (all, g_strdup (outputs));
  }
#endif
  for (; args != NULL && *args != NULL; args++)
    g_ptr_array_add (all, g_strdup (*args));
  g_ptr_array_add (all, NULL);
  return all;
}

/* namzu-create on this binary's backend with @args: checks the handle, returns it. */
static JsonObject *
new_handle (const char *const *args)
{
  g_autoptr (GPtrArray) all = backend_args (args);
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_toolv (NULL, &out, &err, "namzu-create", (const char *const *)all->pdata);

  ck_assert_msg (rc == 0, "namzu-create: exit %d: %s", rc, err);
  ck_assert_msg (expect_lines ("handle", out) == 1, "namzu-create printed %s", out);
  return nz_json_parse_object (out, -1, NULL);
}

#define new_sandbox(...) new_sandbox_id (new_handle ((const char *const[]){ __VA_ARGS__, NULL }))

static char *
new_sandbox_id (JsonObject *h)
{
  char *id = g_strdup (nz_json_get_string (h, "id"));

  json_object_unref (h);
  return id;
}

static void
produce_create (void)
{
  g_autoptr (JsonObject) plain_h = new_handle (NULL);
  g_autoptr (JsonObject) full = new_handle (
      (const char *const[]){ "--ttl", "1h", "--idle-timeout", "10m", "--env", "A=1", "--memory-mb",
                             "256", "--max-processes", "64", "--cpus", "1.5", NULL });

  /* The optional fields these options add are really there, so their rows were checked. */
  ck_assert (json_object_has_member (full, "expiresAt")
             && json_object_has_member (full, "envNames"));
  ck_assert (json_object_has_member (nz_json_get_object (full, "limits"), "cpus"));
  /* Never the token. */
  ck_assert (!json_object_has_member (plain_h, "token") && !json_object_has_member (full, "token"));
}

static void
produce_ls (void)
{
  g_autofree char *a = new_sandbox (NULL);
  g_autofree char *b = new_sandbox ("--ttl", "1h");
  g_autofree char *out = NULL, *err = NULL;

  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-ls", NULL), 0);
  ck_assert_int_eq (expect_lines ("ls-entry", out), 2);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-ls", "--no-probe", NULL), 0);
  ck_assert_int_eq (expect_lines ("ls-entry", out), 2);
}

static void
produce_destroy (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autoptr (JsonObject) first
      = tool_object (0, "destroy-result", "namzu-destroy", "--sandbox", id);
  g_autoptr (JsonObject) again
      = tool_object (0, "destroy-result", "namzu-destroy", "--sandbox", id);
  g_autoptr (JsonObject) unknown
      = tool_object (1, "error", "namzu-destroy", "--sandbox", "nz-000000000000");

  ck_assert (!nz_json_get_bool (first, "alreadyGone", TRUE));
  ck_assert (nz_json_get_bool (again, "alreadyGone", FALSE));
}

static void
produce_exec (void)
{
  g_autofree char *id = new_sandbox (NULL);

  tool_events (3, "namzu-exec",
               (const char *const[]){ "--json", "--sandbox", id, "--", "sh", "-c",
                                      "echo out; echo err >&2; exit 3", NULL });
  /* A timeout: the result carries "signal". */
  tool_events (124, "namzu-exec",
               (const char *const[]){ "--json", "--sandbox", id, "--timeout", "100", "--", "sleep",
                                      "30", NULL });
  tool_events (127, "namzu-exec",
               (const char *const[]){ "--json", "--sandbox", id, "--", "no-such-command", NULL });
  /* namzu itself failed (no such sandbox): 125, still an event. */
  tool_events (
      125, "namzu-exec",
      (const char *const[]){ "--json", "--sandbox", "nz-000000000000", "--", "true", NULL });
}

/* An agent the workload took over (tests/fakes/hostile-agent, shape extra-members) adds
 * members to its result frame and mistypes documented ones: namzu-exec --json still prints
 * exactly the documented shape. */
static void
produce_exec_hostile (void)
{
  g_autofree char *fake
      = g_build_filename (g_getenv ("NZ_BUILD_DIR"), "tests", "hostile-agent", NULL);
  g_autofree char *sock = g_build_filename (harness.tmp, "hostile.sock", NULL);
  g_autofree char *endpoint = g_strconcat ("unix:", sock, NULL);
  const char *argv[] = { fake, endpoint, "extra-members", "execute", NULL };
  g_autofree char *out = NULL, *err = NULL;
  FILE *f;
  GPid pid = harness_spawn_listening (argv, NULL, &f);

  g_setenv ("NAMZU_TOKEN", "t", TRUE);
  tool_events (0, "namzu-exec",
               (const char *const[]){ "--json", "--endpoint", endpoint, "--", "true", NULL });
  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-exec", "--json", "--endpoint", endpoint,
                              "--", "true", NULL),
                    0);
  ck_assert_msg (strstr (out, "pwned") == NULL && strstr (out, "evil") == NULL, "%s", out);
  harness_stop (pid, f);
  g_unlink (sock);
  /* The same for the relayed replies: the session list and a quiesce. */
  {
    const char *const ops[][3] = { { "list-sessions", "session-list", "namzu-attach" },
                                   { "quiesce", "quiesce-result", "namzu-quiesce" } };

    for (guint i = 0; i < G_N_ELEMENTS (ops); i++)
      {
        const char *argv2[] = { fake, endpoint, "extra-members", ops[i][0], NULL };
        g_autoptr (JsonObject) o = NULL;
        g_autofree char *text = NULL;

        pid = harness_spawn_listening (argv2, NULL, &f);
        o = i == 0 ? tool_object (0, ops[i][1], ops[i][2], "--endpoint", endpoint, "--list")
                   : tool_object (0, ops[i][1], ops[i][2], "--endpoint", endpoint);
        text = nz_json_object_to_string (o, NULL);
        ck_assert_msg (strstr (text, "pwned") == NULL && strstr (text, "evil") == NULL, "%s", text);
        harness_stop (pid, f);
        g_unlink (sock);
      }
  }
}

static void
produce_exec_detach (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autoptr (JsonObject) o = tool_object (0, "exec-detached", "namzu-exec", "--detach", "--sandbox",
                                          id, "--", "sleep", "1");

  ck_assert_str_eq (nz_json_get_string (o, "sandbox"), id);
}

static void
produce_run (void)
{
  g_autoptr (GPtrArray) ok
      = backend_args ((const char *const[]){ "--json", "--", "echo", "hi", NULL });
  g_autoptr (GPtrArray) five
      = backend_args ((const char *const[]){ "--json", "--", "sh", "-c", "exit 5", NULL });

  tool_events (0, "namzu-run", (const char *const *)ok->pdata);
  tool_events (5, "namzu-run", (const char *const *)five->pdata);
}

static void
produce_cp (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autofree char *local = g_build_filename (harness.tmp, "local.txt", NULL);
  g_autofree char *back = g_build_filename (harness.tmp, "back.txt", NULL);
  g_autofree char *remote = g_strdup_printf ("%s:in/local.txt", id);
  g_autofree char *missing = g_strdup_printf ("%s:no-such-file", id);
  g_autoptr (JsonObject) up = NULL, down = NULL, fail = NULL;

  ck_assert (g_file_set_contents (local, "hello\n", -1, NULL));
  up = tool_object (0, "cp-result", "namzu-cp", local, remote);
  down = tool_object (0, "cp-result", "namzu-cp", remote, back);
  fail = tool_object (1, "error", "namzu-cp", missing, back);
  ck_assert_str_eq (nz_json_get_string (up, "direction"), "upload");
  ck_assert_str_eq (nz_json_get_string (down, "direction"), "download");
  /* The agent's refusals classed as namzu-fs classes them: a missing file, a jail escape. */
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (fail, "error"), "code"), "not_found");
  {
    g_autofree char *escape = g_strdup_printf ("%s:../x", id);
    g_autoptr (JsonObject) esc = tool_object (1, "error", "namzu-cp", local, escape);

    ck_assert_str_eq (nz_json_get_string (nz_json_get_object (esc, "error"), "code"),
                      "permission_denied");
  }
}

static void
produce_cp_tree (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autofree char *tree = g_build_filename (harness.tmp, "tree", NULL);
  g_autofree char *sub = g_build_filename (tree, "sub", NULL);
  g_autofree char *file = g_build_filename (sub, "f.txt", NULL);
  g_autofree char *back = g_build_filename (harness.tmp, "tree-back", NULL);
  g_autofree char *remote = g_strdup_printf ("%s:in/tree", id);
  g_autoptr (JsonObject) up = NULL, down = NULL;

  ck_assert_int_eq (g_mkdir_with_parents (sub, 0755), 0);
  ck_assert (g_file_set_contents (file, "hello\n", -1, NULL));
  up = tool_object (0, "cp-tree-result", "namzu-cp", "-r", tree, remote);
  down = tool_object (0, "cp-tree-result", "namzu-cp", "-r", remote, back);
  ck_assert_int_eq (json_object_get_int_member (up, "files"), 1);
  ck_assert_int_eq (json_object_get_int_member (down, "directories"), 2);
}

static void
produce_fs (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autofree char *out = NULL;
  g_autoptr (JsonObject) a = NULL, b = NULL, c = NULL, d = NULL, e = NULL, f = NULL, g = NULL;
  g_autoptr (JsonObject) h = NULL, i = NULL;

  ck_assert_int_eq (sh_in_sandbox (id, "mkdir d && echo x > d/f && ln -s /etc/passwd lnk", &out),
                    0);
  a = tool_object (0, "fs-listing", "namzu-fs", "--sandbox", id, "ls");
  b = tool_object (0, "fs-listing", "namzu-fs", "--sandbox", id, "walk");
  c = tool_object (0, "fs-listing", "namzu-fs", "--sandbox", id, "ls", "--max-entries", "1");
  d = tool_object (0, "fs-entry", "namzu-fs", "--sandbox", id, "stat", "d/f");
  e = tool_object (0, "fs-entry", "namzu-fs", "--sandbox", id, "stat", "lnk");
  f = tool_object (0, "fs-mv-result", "namzu-fs", "--sandbox", id, "mv", "d/f", "d/g");
  g = tool_object (0, "fs-rm-result", "namzu-fs", "--sandbox", id, "rm", "d/g");
  h = tool_object (0, "fs-rm-result", "namzu-fs", "--sandbox", id, "rm", "d/g");
  i = tool_object (1, "error", "namzu-fs", "--sandbox", id, "stat", "no-such-file");
  /* The optional "target" was there to check. */
  ck_assert_str_eq (nz_json_get_string (e, "target"), "/etc/passwd");
  ck_assert (nz_json_get_bool (c, "truncated", FALSE));
}

static void
produce_sessions (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autoptr (JsonObject) started = NULL, list = NULL, killed = NULL, unknown = NULL;

  started = tool_object (0, "session-summary", "namzu-attach", "--sandbox", id, "--start-detached",
                         "s1", "--", "sleep", "30");
  list = tool_object (0, "session-list", "namzu-attach", "--sandbox", id, "--list");
  killed = tool_object (0, "session-summary", "namzu-attach", "--sandbox", id, "--kill", "s1");
  unknown = tool_object (1, "error", "namzu-attach", "--sandbox", id, "--kill", "s9");
  ck_assert_str_eq (nz_json_get_string (killed, "state"), "exited");
}

static void
produce_quiesce (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) q = NULL, qf = NULL;
  int rc;

  /* Something to stop, so "stopped" has entries to check. */
  rc = run_tool (NULL, &out, &err, "namzu-exec", "--detach", "--sandbox", id, "--", "sleep", "30",
                 NULL);
  ck_assert_msg (rc == 0, "%s", err);
  q = tool_object (0, "quiesce-result", "namzu-quiesce", "--sandbox", id, "--grace", "200");
  ck_assert (json_array_get_length (nz_json_get_array (q, "stopped")) > 0);
  qf = tool_object (0, "quiesce-flush-result", "namzu-quiesce", "--sandbox", id, "--flush");
}

static void
produce_seed (void)
{
  g_autofree char *up = g_build_filename (harness.tmp, "up", NULL);
  g_autofree char *seed = g_build_filename (harness.tmp, "seed.json", NULL);
  g_autofree char *bad = g_build_filename (harness.tmp, "bad.json", NULL);
  g_autofree char *head = NULL, *id = NULL, *out = NULL;
  g_autoptr (JsonObject) cloned = NULL, present = NULL, failed = NULL;

  g_setenv ("GIT_CONFIG_NOSYSTEM", "1", TRUE);
  g_setenv ("GIT_CONFIG_GLOBAL", "/dev/null", TRUE);
  head = host_sh ("set -e; git init -q -b main w; echo a > w/f; git -C w add f\n"
                  "git -C w -c user.name=t -c user.email=t@example.invalid commit -q -m c\n"
                  "mkdir up; git clone -q --bare w up/r.git; git -C w rev-parse HEAD",
                  NULL);
  id = new_sandbox ("--uploads", up);
  ck_assert_int_eq (
      sh_in_sandbox (id,
                     "git config --global "
                     "url.file:///mnt/user-data/uploads/.insteadOf https://seed.test/",
                     &out),
      0);
  ck_assert (g_file_set_contents (
      seed,
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"https://seed.test/r.git\"}]}",
      -1, NULL));
  ck_assert (g_file_set_contents (
      bad,
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"https://seed.test/r.git\"},"
      "{\"name\":\"gone\",\"url\":\"https://seed.test/gone.git\"}]}",
      -1, NULL));
  cloned = tool_object (0, "seed-report", "namzu-seed", "--sandbox", id, "--root",
                        "/home/namzu/seeds", seed);
  present = tool_object (0, "seed-report", "namzu-seed", "--sandbox", id, "--root",
                         "/home/namzu/seeds", seed);
  /* A clone that fails after the check: the report carries the error. */
  failed = tool_object (1, "seed-report", "namzu-seed", "--sandbox", id, "--root",
                        "/home/namzu/seeds", bad);
  ck_assert (nz_json_get_object (failed, "error") != NULL);
}

static void
produce_port_forward (void)
{
  g_autofree char *id = new_sandbox (NULL);
  g_autofree char *tool = nz_test_tool ("namzu-port-forward");
  const char *argv[] = { tool, "--sandbox", id, "0:8080", NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  struct pollfd pfd;
  int fd, status;
  GPid pid;
  char ch;

  ck_assert_msg (g_spawn_async_with_pipes (NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                           NULL, NULL, &pid, NULL, &fd, NULL, &error),
                 "%s", error ? error->message : "");
  pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
  /* Bounded so a silent tool fails the case rather than hanging it. */
  while (poll (&pfd, 1, 30000) == 1 && read (fd, &ch, 1) == 1)
    {
      g_string_append_c (out, ch);
      if (ch == '\n')
        break;
    }
  ck_assert_int_eq (kill (pid, SIGTERM), 0);
  ck_assert (waitpid (pid, &status, 0) == pid);
  g_spawn_close_pid (pid);
  /* Nothing more on stdout after the listening line. */
  while (read (fd, &ch, 1) == 1)
    g_string_append_c (out, ch);
  close (fd);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d", status);
  ck_assert_int_eq (expect_lines ("port-forward-listening", out->str), 1);
}

static void
produce_egress_offline (void)
{
  g_autofree char *ports = g_build_filename (harness.tmp, "ports.json", NULL);
  g_autofree char *none = g_build_filename (harness.tmp, "none.json", NULL);
  g_autofree char *broken = g_build_filename (harness.tmp, "broken.json", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) a = NULL, b = NULL, c = NULL, d = NULL, e = NULL, f = NULL;

  ck_assert (g_file_set_contents (ports,
                                  "{\"name\":\"ci\",\"hosts\":[{\"host\":\"github.com\"},"
                                  "{\"host\":\".npmjs.org\",\"ports\":[8443,443]}]}",
                                  -1, NULL));
  ck_assert (g_file_set_contents (none, "{\"name\":\"none\",\"hosts\":[]}", -1, NULL));
  ck_assert (
      g_file_set_contents (broken, "{\"name\":\"x\",\"hosts\":[{\"host\":\"a b\"}]}", -1, NULL));
  a = tool_object (0, "egress-profile", "namzu-egress", "profile", "validate", ports);
  b = tool_object (0, "egress-translate-docker", "namzu-egress", "profile", "translate", "--to",
                   "docker", ports);
  c = tool_object (0, "egress-translate-docker", "namzu-egress", "profile", "translate", "--to",
                   "docker", none);
  d = tool_object (0, "egress-translate-kubernetes", "namzu-egress", "profile", "translate", "--to",
                   "k8s", none);
  e = tool_object (0, "egress-translate-kubernetes", "namzu-egress", "profile", "translate", "--to",
                   "cilium", ports);
  f = tool_object (1, "error", "namzu-egress", "profile", "validate", broken);
  /* Allowed, denied by the allowlist, and an IP literal (with "addressScreen"). */
  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-egress", "check", ports, "github.com",
                              "https://x.npmjs.org:8443/a", "10.0.0.1:443", NULL),
                    1);
  ck_assert_int_eq (expect_lines ("egress-check", out), 3);
}

static void
produce_egress_set (void)
{
  g_autofree char *plain_id = new_sandbox (NULL);
  g_autofree char *id = new_sandbox ("--egress", "example.com");
  g_autoptr (JsonObject) set = NULL, refused = NULL;

  set = tool_object (0, "egress-set-result", "namzu-egress", "set", "--sandbox", id, "example.org");
  refused = tool_object (1, "error", "namzu-egress", "set", "--sandbox", plain_id, "example.org");
}

/* In a user and network namespace of its own: what it drops is that namespace's routes. */
static void
produce_egress_isolate (void)
{
  g_autofree char *tool = nz_test_tool ("namzu-egress");
  const char *argv[] = { "unshare", "--user", "--map-root-user", "--net", tool, "isolate", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GError) error = NULL;
  int status;

  ck_assert (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                           &status, &error));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "isolate: %s", err);
  ck_assert_int_eq (expect_lines ("egress-isolate-result", out), 1);
}

/* A refused value is exit 2 with the error object: a flag out of range, a config, a seed. */
static void
produce_refusals (void)
{
  g_autofree char *seed = g_build_filename (harness.tmp, "seed.json", NULL);
  g_autoptr (JsonObject) a = NULL, b = NULL, c = NULL;

  ck_assert (
      g_file_set_contents (seed, "{\"name\":\"Not A Label\",\"repositories\":[]}", -1, NULL));
  a = tool_object (2, "error", "namzu-create", "--cpus", "0");
  b = tool_object (2, "error", "namzu-create", "--config", seed);
  c = tool_object (2, "error", "namzu-seed", "--root", "/home/namzu/seeds", "--sandbox",
                   "nz-000000000000", seed);
}

/* A usage mistake the option parser catches prints nothing on stdout (exit 2). */
static void
produce_usage (void)
{
  static const char *const cases[][4] = {
    { "namzu-destroy", "extra", NULL },
    { "namzu-fs", "no-such-command", NULL },
    { "namzu-cp", "only-one", NULL },
    { "namzu-exec", "--json", NULL },
    { "namzu-egress", "no-such-command", NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int rc = run_toolv (NULL, &out, &err, cases[i][0], cases[i] + 1);

      ck_assert_msg (rc == 2, "%s %s: exit %d: %s", cases[i][0], cases[i][1], rc, err);
      ck_assert_msg (*out == '\0', "%s %s: a usage error printed on stdout: %s", cases[i][0],
                     cases[i][1], out);
    }
}

/* Each case: what it runs, the objects it must have checked (space-separated), and whether
 * test-cli-contract-docker runs it on container:docker too (the others need what only bwrap
 * has here: --uploads for the seed's repositories, an egress proxy without its image, or no
 * sandbox at all). */
static const struct
{
  const char *name;
  void (*produce) (void);
  const char *objects;
  gboolean docker;
} cases[] = {
  { "create", produce_create, "handle", TRUE },
  { "ls", produce_ls, "ls-entry", TRUE },
  { "destroy", produce_destroy, "destroy-result error", TRUE },
  { "exec", produce_exec, "exec-output-event exec-result-event exec-error-event", TRUE },
  { "hostile", produce_exec_hostile,
    "exec-output-event exec-result-event session-list session-summary quiesce-result", FALSE },
  { "exec-detach", produce_exec_detach, "exec-detached", TRUE },
  { "run", produce_run, "exec-output-event exec-result-event", TRUE },
  { "cp", produce_cp, "cp-result error", TRUE },
  { "cp-tree", produce_cp_tree, "cp-tree-result", TRUE },
  { "fs", produce_fs, "fs-listing fs-entry fs-rm-result fs-mv-result error", TRUE },
  { "sessions", produce_sessions, "session-summary session-list error", TRUE },
  { "quiesce", produce_quiesce, "quiesce-result flush-result quiesce-flush-result", TRUE },
  { "seed", produce_seed, "seed-report", FALSE },
  { "port-forward", produce_port_forward, "port-forward-listening", TRUE },
  { "egress-offline", produce_egress_offline,
    "egress-profile egress-translate-docker egress-translate-kubernetes egress-check error",
    FALSE },
  { "egress-set", produce_egress_set, "egress-set-result error", FALSE },
  { "egress-isolate", produce_egress_isolate, "egress-isolate-result", FALSE },
  { "refusals", produce_refusals, "error", FALSE },
  { "usage", produce_usage, "", FALSE },
};

/* The indexes of the cases this binary runs. */
static guint run_cases[G_N_ELEMENTS (cases)];

/* Documented objects no case here prints (docker-only ones would go here, with why). */
/* Checked elsewhere: the microvm:kubernetes bulk verbs need the fake API server
 * (tests/kube/test-kube-release-e2e.py checks them against this page). */
static const char *const not_run_here[] = { "kube-release-result", "kube-capacity", NULL };

static void
setup (void)
{
  harness_begin ("/tmp/nz-cli-contract-XXXXXX");
  harness_start_reaper (0);
  contract_load ();
}

static void
teardown (void)
{
  harness_end ();
}

START_TEST (test_tool_output)
{
  guint i = run_cases[_i];
  g_auto (GStrv) want = g_strsplit (cases[i].objects, " ", -1);

  cases[i].produce ();
  for (char **w = want; *w != NULL; w++)
    if (**w != '\0')
      ck_assert_msg (g_hash_table_contains (validated, *w), "case %s checked no %s object",
                     cases[i].name, *w);
}
END_TEST

/* The page parses (contract_load() asserts its shape), and every object on it is one some case
 * checks, or listed as not run here: an object documented without a test fails. */
START_TEST (test_every_object_run)
{
  g_autoptr (GHashTable) run = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  contract_load ();
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto (GStrv) names = g_strsplit (cases[i].objects, " ", -1);

      for (char **n = names; *n != NULL; n++)
        if (**n != '\0')
          {
            ck_assert_msg (g_hash_table_contains (contracts, *n),
                           "case %s names %s, which docs/cli.md does not document", cases[i].name,
                           *n);
            g_hash_table_add (run, g_strdup (*n));
          }
    }
  for (const char *const *n = not_run_here; *n != NULL; n++)
    g_hash_table_add (run, g_strdup (*n));
  for (guint i = 0; i < order->len; i++)
    ck_assert_msg (g_hash_table_contains (run, order->pdata[i]),
                   "docs/cli.md documents object %s, which no case of test-cli-contract checks",
                   (const char *)order->pdata[i]);
  ck_assert (order->len >= 20);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("cli-contract");
  TCase *doc = tcase_create ("doc");
  TCase *tools = tcase_create ("tools");
  guint n = 0;

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) is not installed");
  /* The handle's limits come from a sandbox created with --memory-mb and friends. */
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
#ifdef NZ_CONTRACT_DOCKER
  {
    g_autofree char *inspect
        = g_strdup_printf ("docker image inspect --format '{{.Id}}' '%s'", worker_image ());
    g_autofree char *docker = g_find_program_in_path ("docker");
    g_autofree char *img = NULL, *img_err = NULL;
    int rc = 1;

    nz_test_require (
        docker != NULL && g_spawn_command_line_sync (inspect, &img, &img_err, &rc, NULL) && rc == 0,
        "a running docker daemon and the worker image");
  }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (cases[i].docker)
      run_cases[n++] = i;
#else
  nz_test_require_program ("git", "git is not installed");
  nz_test_require_program ("unshare", "unshare (util-linux) is not installed");
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    run_cases[n++] = i;
#endif
  tcase_add_test (doc, test_every_object_run);
  suite_add_tcase (s, doc);
  tcase_add_checked_fixture (tools, setup, teardown);
  tcase_set_timeout (tools, 180);
  tcase_add_loop_test (tools, test_tool_output, 0, n);
  suite_add_tcase (s, tools);
  return nz_test_run (s);
}
