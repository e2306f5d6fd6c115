#include "nz-quiesce.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-exec.h"
#include "nz-privsep.h"

/* Poll interval for "is the pid gone?" (spec B.2 "quiesce pid-gone 25 ms"). */
#define PID_POLL_MS 25

typedef enum
{
  PHASE_GRACE,  /* SIGTERM sent; waiting up to the grace */
  PHASE_KILL,   /* SIGKILL sent; waiting up to the deadline */
  PHASE_SETTLE, /* nothing left; waiting for the registries to record closes */
} Phase;

typedef struct
{
  NzGuest *guest;
  const char *scope;
  gint64 grace_ms;
  gint64 deadline_ms;
  char *source;
  gint64 deadline_us;
  gint64 phase_end_us;
  guint rounds;
  Phase phase;
  GPtrArray *stopped;   /* NzQuiesceStopped * */
  GHashTable *by_pid;   /* pid -> NzQuiesceStopped * (borrowed) */
  GArray *round_pids;   /* pids signalled this round */
  guint timer;
  NzQuiesceFunc func;
  gpointer user_data;
} Quiesce;

static void
stopped_free (NzQuiesceStopped *s)
{
  g_free (s->command);
  g_free (s);
}

/* The kernel's initial pid namespace has this fixed inode (PROC_PID_INIT_INO). */
#define NZ_PID_NS_INIT_INO 0xEFFFFFFCu

/* TRUE when we are in the host's own pid namespace (or cannot tell). */
static gboolean
in_initial_pid_namespace (void)
{
  struct stat st;

  return stat ("/proc/self/ns/pid", &st) != 0 || st.st_ino == NZ_PID_NS_INIT_INO;
}

const char *
nz_quiesce_scope (NzGuest *guest)
{
  if (guest->quiesce_owned_only)
    return "owned-sessions";
  /* The reference widens to every same-uid process when it is (a child of) pid 1. In the host's
   * own pid namespace that would be every process of this user on the machine — an agent
   * orphaned to init on a host would stop its owner's shell — so the widening needs a pid
   * namespace of the sandbox's own. */
  if ((getpid () == 1 || getppid () == 1) && !in_initial_pid_namespace ())
    return "pid-namespace";
  return "owned-sessions";
}

/* Parses /proc/<pid>/stat: comm, state and session id. */
static gboolean
read_stat (gint pid, char **out_comm, char *out_state, gint *out_sid)
{
  char path[64];
  g_autofree char *text = NULL;
  const char *open_paren, *close_paren;
  char state;
  int ppid, pgrp, sid;

  g_snprintf (path, sizeof path, "/proc/%d/stat", pid);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  open_paren = strchr (text, '(');
  close_paren = strrchr (text, ')');
  if (open_paren == NULL || close_paren == NULL || close_paren < open_paren)
    return FALSE;
  if (sscanf (close_paren + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4)
    return FALSE;
  if (out_comm != NULL)
    *out_comm = g_strndup (open_paren + 1, close_paren - open_paren - 1);
  *out_state = state;
  *out_sid = sid;
  return TRUE;
}

/* Gone: /proc/<pid> missing, or a zombie (it can do nothing more). */
static gboolean
pid_gone (gint pid)
{
  char state = 0;
  gint sid = 0;

  return !read_stat (pid, NULL, &state, &sid) || state == 'Z';
}

typedef struct
{
  gint pid;
  char *command;
} Candidate;

static void
candidate_clear (gpointer p)
{
  g_free (((Candidate *)p)->command);
}

/* quiesceCandidates(scope). */
static GArray *
candidates (Quiesce *q, GError **error)
{
  g_autoptr (GArray) out = g_array_new (FALSE, TRUE, sizeof (Candidate));
  g_autoptr (GArray) owned = NULL;
  DIR *dir;
  struct dirent *de;
  pid_t self = getpid ();
  pid_t own_sid = getsid (0);
  uid_t uid = nz_privsep_workload_uid ();
  gboolean narrowed = g_str_equal (q->scope, "owned-sessions");

  g_array_set_clear_func (out, candidate_clear);
  if (narrowed)
    owned = nz_guest_collect_owned_sessions (q->guest);
  dir = opendir ("/proc");
  if (dir == NULL)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "quiesce could not read /proc: %s", g_strerror (errno));
      return NULL;
    }
  while ((de = readdir (dir)) != NULL)
    {
      char *end = NULL;
      gint64 pid = g_ascii_strtoll (de->d_name, &end, 10);
      g_autofree char *comm = NULL;
      char state = 0;
      gint sid = 0;
      char path[64];
      struct stat st;
      gboolean owned_match = !narrowed;

      if (end == de->d_name || *end != '\0' || pid <= 1 || pid == self)
        continue;
      if (!read_stat ((gint)pid, &comm, &state, &sid) || state == 'Z' || sid == own_sid)
        continue;
      for (guint i = 0; narrowed && i < owned->len; i++)
        if (g_array_index (owned, gint, i) == sid && sid > 1)
          owned_match = TRUE;
      if (!owned_match)
        continue;
      /* Only the workload's uid (ours without privsep): never signal what another user runs
       * beside us. */
      g_snprintf (path, sizeof path, "/proc/%d", (gint)pid);
      if (stat (path, &st) != 0 || st.st_uid != uid)
        continue;
      {
        Candidate c = { (gint)pid, g_steal_pointer (&comm) };

        g_array_append_val (out, c);
      }
    }
  closedir (dir);
  return g_steal_pointer (&out);
}

static void
quiesce_finish (Quiesce *q, const char *error_message)
{
  NzQuiesceResult result = { q->scope, q->grace_ms, q->rounds, q->stopped };

  g_clear_handle_id (&q->timer, g_source_remove);
  q->func (error_message == NULL ? &result : NULL, error_message, q->user_data);
  g_ptr_array_unref (q->stopped);
  g_hash_table_unref (q->by_pid);
  g_array_unref (q->round_pids);
  g_free (q->source);
  g_free (q);
}

static void quiesce_round (Quiesce *q);

/* First pid of this round still live, or 0. */
static gint
first_live (Quiesce *q)
{
  for (guint i = 0; i < q->round_pids->len; i++)
    {
      gint pid = g_array_index (q->round_pids, gint, i);

      if (!pid_gone (pid))
        return pid;
    }
  return 0;
}

static const char *
command_of (Quiesce *q, gint pid)
{
  NzQuiesceStopped *s = g_hash_table_lookup (q->by_pid, GINT_TO_POINTER (pid));

  return s != NULL ? s->command : "?";
}

static gboolean
quiesce_tick (gpointer user_data)
{
  Quiesce *q = user_data;
  gint64 now = g_get_monotonic_time ();
  gint live;

  q->timer = 0;
  if (q->phase == PHASE_SETTLE)
    {
      /* Running out of the settle window does not fail the call. */
      if (!nz_guest_is_unsettled (q->guest) || now >= q->phase_end_us)
        {
          quiesce_finish (q, NULL);
          return G_SOURCE_REMOVE;
        }
    }
  else if ((live = first_live (q)) == 0)
    {
      quiesce_round (q);
      return G_SOURCE_REMOVE;
    }
  else if (now >= q->phase_end_us && q->phase == PHASE_GRACE)
    {
      /* Grace over: SIGKILL what is left, then wait up to the deadline. */
      for (guint i = 0; i < q->round_pids->len; i++)
        {
          gint pid = g_array_index (q->round_pids, gint, i);
          NzQuiesceStopped *s = g_hash_table_lookup (q->by_pid, GINT_TO_POINTER (pid));

          if (pid_gone (pid))
            continue;
          kill (pid, SIGKILL);
          s->signal = "SIGKILL";
        }
      q->phase = PHASE_KILL;
      q->phase_end_us = q->deadline_us;
    }
  else if (now >= q->phase_end_us)
    {
      g_autofree char *msg = NULL;

      if (now >= q->deadline_us)
        msg = g_strdup_printf ("quiesce ran out of its %" G_GINT64_FORMAT "ms deadline (%s) with "
                               "pid %d (%s) still live after SIGKILL",
                               q->deadline_ms, q->source, live, command_of (q, live));
      else
        msg = g_strdup_printf ("quiesce could not stop pid %d (%s); it is still live after "
                               "SIGKILL",
                               live, command_of (q, live));
      quiesce_finish (q, msg);
      return G_SOURCE_REMOVE;
    }
  q->timer = g_timeout_add (
      (guint)CLAMP ((q->phase_end_us - now) / 1000, 1, PID_POLL_MS), quiesce_tick, q);
  return G_SOURCE_REMOVE;
}

/* One pass of the loop: scan, check the bounds, mark, SIGTERM, then wait (quiesce_tick). */
static void
quiesce_round (Quiesce *q)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) cands = candidates (q, &error);
  gint64 now = g_get_monotonic_time ();

  if (cands == NULL)
    {
      quiesce_finish (q, error->message);
      return;
    }
  if (cands->len == 0)
    {
      /* Everything is gone: give the registries a bounded moment to record the closes. */
      q->phase = PHASE_SETTLE;
      q->phase_end_us
          = now + MIN (q->guest->limits.quiesce_settle_ms * 1000, MAX (0, q->deadline_us - now));
      quiesce_tick (q);
      return;
    }
  {
    Candidate *first = &g_array_index (cands, Candidate, 0);

    if (now >= q->deadline_us)
      {
        g_autofree char *msg = g_strdup_printf (
            "quiesce did not settle within %" G_GINT64_FORMAT "ms (%s); pid %d (%s) was still "
            "running",
            q->deadline_ms, q->source, first->pid, first->command);

        quiesce_finish (q, msg);
        return;
      }
    if (++q->rounds > (guint)q->guest->limits.quiesce_max_rounds)
      {
        g_autofree char *msg = g_strdup_printf (
            "quiesce did not settle in %" G_GINT64_FORMAT " rounds; pid %d (%s) was still "
            "starting processes",
            q->guest->limits.quiesce_max_rounds, first->pid, first->command);

        q->rounds--;
        quiesce_finish (q, msg);
        return;
      }
  }
  /* After the scan and before any signal, so their close handlers wait instead of fencing. */
  nz_guest_mark_quiesced (q->guest);
  g_array_set_size (q->round_pids, 0);
  for (guint i = 0; i < cands->len; i++)
    {
      Candidate *c = &g_array_index (cands, Candidate, i);
      NzQuiesceStopped *s = g_hash_table_lookup (q->by_pid, GINT_TO_POINTER (c->pid));

      if (s == NULL)
        {
          s = g_new0 (NzQuiesceStopped, 1);
          s->pid = c->pid;
          g_ptr_array_add (q->stopped, s);
          g_hash_table_insert (q->by_pid, GINT_TO_POINTER (c->pid), s);
        }
      g_free (s->command);
      s->command = g_strdup (c->command);
      s->signal = "SIGTERM";
      kill (c->pid, SIGTERM);
      g_array_append_val (q->round_pids, c->pid);
    }
  q->phase = PHASE_GRACE;
  q->phase_end_us = MIN (q->deadline_us, now + q->grace_ms * 1000);
  q->timer = g_timeout_add (PID_POLL_MS, quiesce_tick, q);
}

void
nz_quiesce_run (NzGuest *guest, gint64 grace_ms, gint64 deadline_ms, const char *deadline_source,
                NzQuiesceFunc func, gpointer user_data)
{
  Quiesce *q;

  g_return_if_fail (guest != NULL && func != NULL);
  q = g_new0 (Quiesce, 1);
  q->guest = guest;
  q->scope = nz_quiesce_scope (guest);
  q->grace_ms = grace_ms;
  q->deadline_ms = deadline_ms;
  q->source = g_strdup (deadline_source);
  q->deadline_us = g_get_monotonic_time () + deadline_ms * 1000;
  q->stopped = g_ptr_array_new_with_free_func ((GDestroyNotify)stopped_free);
  q->by_pid = g_hash_table_new (g_direct_hash, g_direct_equal);
  q->round_pids = g_array_new (FALSE, FALSE, sizeof (gint));
  q->func = func;
  q->user_data = user_data;
  quiesce_round (q);
}
