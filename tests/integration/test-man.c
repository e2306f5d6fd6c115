/* Every tool has a man page whose OPTIONS section names exactly the long options its --help
 * (and, for namzu-egress, its commands' --help) defines: a page cannot lag behind the tool,
 * nor document an option the tool lacks. */
#include <glib.h>
#include <string.h>

#include "../nz-test.h"

static char **tools;

/* The long options a text defines: in --help, the first --name of a line inside an
 * "...Options:" block; in a page's OPTIONS section, every --name of a term line (not
 * indented: the tab-indented lines are descriptions). */
static void
add_options (GHashTable *set, const char *line)
{
  for (const char *at = line; (at = strstr (at, "--")) != NULL;)
    {
      gsize n = 2;

      while (g_ascii_isalnum (at[n]) || at[n] == '-')
        n++;
      if (n > 2 && g_ascii_isalpha (at[2]))
        g_hash_table_add (set, g_strndup (at, n));
      at += n;
    }
}

static void
help_options (const char *help, GHashTable *set)
{
  g_auto (GStrv) lines = g_strsplit (help, "\n", -1);
  gboolean in = FALSE;

  for (char **l = lines; *l != NULL; l++)
    {
      if (g_str_has_suffix (*l, "Options:"))
        in = TRUE;
      else if (**l == '\0')
        in = FALSE;
      else if (in)
        {
          const char *p = *l + strspn (*l, " ");
          g_autofree char *first = NULL;

          if (p[0] == '-' && p[1] != '-')
            p += strcspn (p, " ") + 1; /* "-s, --sandbox" */
          first = g_strndup (p, strcspn (p, " ="));
          add_options (set, first);
        }
    }
}

static char *
tool_help (const char *tool, const char *command)
{
  g_autofree char *path = nz_test_tool (tool);
  const char *argv[] = { path, command != NULL ? command : "--help", "--help", NULL };
  char *out = NULL;

  if (command == NULL)
    argv[2] = NULL;
  ck_assert (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                           NULL, NULL, NULL));
  return out;
}

START_TEST (test_page_matches_help)
{
  const char *tool = tools[_i];
  const char *src = g_getenv ("NZ_SOURCE_DIR");
  const char *section
      = g_str_equal (tool, "namzu-agent") || g_str_equal (tool, "namzu-worker") ? "8" : "1";
  g_autoptr (GHashTable) page = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) help = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *name = g_strdup_printf ("%s.%s.scd", tool, section);
  g_autofree char *path = NULL, *text = NULL, *top = NULL;
  g_auto (GStrv) lines = NULL;
  gboolean in = FALSE;
  GHashTableIter it;
  gpointer opt;

  if (g_str_equal (tool, "namzu-exec-full")) /* internal, in libexec: no page */
    return;
  ck_assert_msg (src != NULL, "NZ_SOURCE_DIR is not set");
  path = g_build_filename (src, "man", name, NULL);
  ck_assert_msg (g_file_get_contents (path, &text, NULL, NULL), "%s has no man page man/%s", tool,
                 name);
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      if (g_str_has_prefix (*l, "# "))
        in = g_str_equal (*l, "# OPTIONS");
      else if (in && **l == '*')
        add_options (page, *l);
    }

  top = tool_help (tool, NULL);
  help_options (top, help);
  /* namzu-egress: each command of its "Commands:" list has its own --help. */
  if (strstr (top, "Commands:\n") != NULL)
    {
      g_auto (GStrv) cl = g_strsplit (strstr (top, "Commands:\n"), "\n", -1);

      for (char **l = cl; *l != NULL; l++)
        if (g_str_has_prefix (*l, "  ") && g_ascii_isalpha ((*l)[2]))
          {
            g_autofree char *cmd = g_strndup (*l + 2, strcspn (*l + 2, " "));
            g_autofree char *out = tool_help (tool, cmd);

            help_options (out, help);
          }
    }

  g_hash_table_iter_init (&it, help);
  while (g_hash_table_iter_next (&it, &opt, NULL))
    ck_assert_msg (g_hash_table_contains (page, opt), "man/%s does not document %s --help's %s",
                   name, tool, (char *)opt);
  g_hash_table_iter_init (&it, page);
  while (g_hash_table_iter_next (&it, &opt, NULL))
    ck_assert_msg (g_hash_table_contains (help, opt),
                   "man/%s documents %s, which %s --help does not define", name, (char *)opt, tool);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("man");
  TCase *tc = tcase_create ("man");
  const char *list = g_getenv ("NZ_TOOLS");

  nz_test_require (list != NULL && *list != '\0', "NZ_TOOLS lists no tools");
  tools = g_strsplit (list, " ", -1);
  tcase_add_loop_test (tc, test_page_matches_help, 0, (int)g_strv_length (tools));
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
