#include "nz-kube-probe.h"

#include <string.h>

const char *
nz_kube_probe_reason (NzKubeProbeVerdict v)
{
  switch (v)
    {
    case NZ_KUBE_PROBE_FAILED:
      return "probe-failed";
    case NZ_KUBE_PROBE_UNREADABLE:
      return "unreadable-output";
    case NZ_KUBE_PROBE_PRIVILEGED:
      return "privileged";
    case NZ_KUBE_PROBE_OK:
    default:
      return "ok";
    }
}

/* The value of "<key>:\t<value>" in @text, once: NULL when absent or repeated (a workload
 * that could write the probe's output twice must not pick the line we read). */
static char *
field (const char *text, const char *key)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  char *found = NULL;
  gsize klen = strlen (key);

  for (guint i = 0; lines[i] != NULL; i++)
    if (strncmp (lines[i], key, klen) == 0 && lines[i][klen] == ':')
      {
        if (found != NULL)
          {
            g_free (found);
            return NULL;
          }
        found = g_strstrip (g_strdup (lines[i] + klen + 1));
      }
  return found;
}

static gboolean
bare_hex (const char *v, gboolean *zero)
{
  if (v == NULL || *v == '\0')
    return FALSE;
  *zero = TRUE;
  for (const char *p = v; *p != '\0'; p++)
    {
      if (!g_ascii_isxdigit (*p))
        return FALSE;
      if (*p != '0')
        *zero = FALSE;
    }
  return TRUE;
}

NzKubeProbeVerdict
nz_kube_probe_judge (const char *status_text, char **what)
{
  static const char *const sets[] = { "CapInh", "CapPrm", "CapEff", "CapBnd" };
  g_autofree char *nnp = NULL;

  if (what != NULL)
    *what = NULL;
  for (gsize i = 0; i < G_N_ELEMENTS (sets); i++)
    {
      g_autofree char *v = field (status_text, sets[i]);
      gboolean zero;

      if (!bare_hex (v, &zero))
        {
          if (what != NULL)
            *what = g_strdup_printf ("%s is missing, repeated or not bare hex", sets[i]);
          return NZ_KUBE_PROBE_UNREADABLE;
        }
      if (!zero)
        {
          if (what != NULL)
            *what = g_strdup_printf ("%s is %s, not 0", sets[i], v);
          return NZ_KUBE_PROBE_PRIVILEGED;
        }
    }
  nnp = field (status_text, "NoNewPrivs");
  if (nnp == NULL || (strcmp (nnp, "0") != 0 && strcmp (nnp, "1") != 0))
    {
      if (what != NULL)
        *what = g_strdup ("NoNewPrivs is missing, repeated or not 0/1");
      return NZ_KUBE_PROBE_UNREADABLE;
    }
  if (strcmp (nnp, "1") != 0)
    {
      if (what != NULL)
        *what = g_strdup ("NoNewPrivs is 0, not 1");
      return NZ_KUBE_PROBE_PRIVILEGED;
    }
  return NZ_KUBE_PROBE_OK;
}
