/* privsep-attack SERVER: run by the workload inside a sandbox (copied in by the test), it tries
 * every way the workload could reach its agent/worker (SERVER is the process name: namzu-agent
 * or namzu-worker) and prints "refused ATTACK" for each one the kernel refused and
 * "BREACH ATTACK DETAIL" for each one that worked. test-bwrap-e2e and test-docker assert that
 * there is no BREACH; against main's tools nearly every line is one. Static, so it runs in any
 * image. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void
report (const char *name, int refused, const char *detail)
{
  if (refused)
    printf ("refused %s\n", name);
  else
    printf ("BREACH %s %s\n", name, detail);
  fflush (stdout);
}

static int
denied (int e)
{
  return e == EACCES || e == EPERM;
}

static pid_t
find_server (const char *name)
{
  DIR *d = opendir ("/proc");
  struct dirent *e;
  pid_t found = 0;

  while (d != NULL && found == 0 && (e = readdir (d)) != NULL)
    {
      char path[300], comm[64] = "";
      FILE *f;

      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      snprintf (path, sizeof path, "/proc/%s/comm", e->d_name);
      if ((f = fopen (path, "r")) == NULL)
        continue;
      if (fgets (comm, sizeof comm, f) != NULL)
        comm[strcspn (comm, "\n")] = '\0';
      fclose (f);
      if (strcmp (comm, name) == 0)
        found = atoi (e->d_name);
    }
  if (d != NULL)
    closedir (d);
  return found;
}

static void
try_open (pid_t pid, const char *file, int mode, const char *name)
{
  char path[64], buf[80] = "";
  int fd;

  snprintf (path, sizeof path, "/proc/%d/%s", (int)pid, file);
  fd = open (path, mode);
  if (fd < 0)
    {
      report (name, denied (errno), strerror (errno));
      return;
    }
  if (read (fd, buf, sizeof buf - 1) < 0)
    snprintf (buf, sizeof buf, "opened");
  for (size_t i = 0; i < sizeof buf - 1; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  report (name, 0, buf);
  close (fd);
}

/* Whatever the kernel lets us open of the environment (gVisor lets any uid open it), not one
 * byte of it may be readable: the server hides its environment once configured. */
static void
environ_content (pid_t pid)
{
  char path[64], buf[65536];
  ssize_t n = -1;
  int fd, seen = 0;

  snprintf (path, sizeof path, "/proc/%d/environ", (int)pid);
  if ((fd = open (path, O_RDONLY)) >= 0)
    {
      n = read (fd, buf, sizeof buf);
      close (fd);
    }
  for (ssize_t i = 0; i < n && !seen; i++)
    seen = buf[i] != '\0';
  report ("environ-content", !seen, "the server's environment is readable");
}

/* Is there an agent.sock anywhere the workload can see? */
static int
find_socket (const char *dir, int depth)
{
  DIR *d = depth > 0 ? opendir (dir) : NULL;
  struct dirent *e;
  int found = 0;

  while (d != NULL && !found && (e = readdir (d)) != NULL)
    {
      char path[4096];

      if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
        continue;
      snprintf (path, sizeof path, "%s/%s", dir, e->d_name);
      if (strcmp (e->d_name, "agent.sock") == 0)
        found = 1;
      else if (e->d_type == DT_DIR)
        found = find_socket (path, depth - 1);
    }
  if (d != NULL)
    closedir (d);
  return found;
}

int
main (int argc, char **argv)
{
  static const char *const roots[] = { "/run", "/tmp", "/var/tmp", "/workspace", "/home", "/mnt",
                                       "/opt" };
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  char detail[1024];
  pid_t pid;
  int pidfd, fd, found = 0, taken = 0;

  if (argc != 2)
    return 2;
  pid = find_server (argv[1]);
  if (pid == 0)
    {
      printf ("BREACH find no %s process in view\n", argv[1]);
      return 0;
    }
  printf ("found %s\n", argv[1]);

  try_open (pid, "environ", O_RDONLY, "proc-environ");
  environ_content (pid);
  try_open (pid, "mem", O_RDWR, "proc-mem");
  try_open (pid, "mem", O_RDONLY, "proc-mem-read");
  try_open (pid, "fd", O_RDONLY | O_DIRECTORY, "proc-fd-list");
  /* Opening a descriptor through its magic link reaches the open file itself (a pipe to a
   * command, a file being written for the host), wherever the list is readable or not. */
  detail[0] = '\0';
  for (int n = 0; n < 64; n++)
    {
      char link[64], target[256] = "";

      snprintf (link, sizeof link, "/proc/%d/fd/%d", (int)pid, n);
      /* /dev/null (docker's stdin) is anybody's: opening it reaches nothing of the server. */
      if (readlink (link, target, sizeof target - 1) > 0 && strcmp (target, "/dev/null") == 0)
        continue;
      for (int m = 0; m < 2; m++)
        if ((fd = open (link, m == 0 ? O_RDONLY | O_NONBLOCK : O_WRONLY | O_NONBLOCK)) >= 0)
          {
            taken++;
            snprintf (detail + strlen (detail), sizeof detail - strlen (detail), "%d%s(%s) ", n,
                      m == 0 ? "r" : "w", target);
            close (fd);
          }
    }
  report ("proc-fd-open", taken == 0, detail);
  taken = 0;

  pidfd = (int)syscall (SYS_pidfd_open, pid, 0);
  /* gVisor has no pidfd_open: there is nothing to take fds with. */
  if (pidfd < 0 && errno == ENOSYS)
    report ("pidfd_getfd", 1, "");
  else if (pidfd < 0)
    report ("pidfd_getfd", 0, "pidfd_open refused: the attack was not tried");
  else
    {
      detail[0] = '\0';
      for (int n = 0; n < 64; n++)
        if ((fd = (int)syscall (SYS_pidfd_getfd, pidfd, n, 0)) >= 0)
          {
            taken++;
            snprintf (detail + strlen (detail), sizeof detail - strlen (detail), "%d ", n);
            close (fd);
          }
      report ("pidfd_getfd", taken == 0, detail);
    }

  /* Signal 0 is the kernel's permission check alone; a stopped server is resumed at once. */
  report ("kill-0", kill (pid, 0) != 0 && errno == EPERM, "delivered");
  if (kill (pid, SIGSTOP) == 0)
    {
      kill (pid, SIGCONT);
      report ("kill-SIGSTOP", 0, "delivered");
    }
  else
    report ("kill-SIGSTOP", 1, "");
  if (ptrace (PTRACE_ATTACH, pid, NULL, NULL) == 0)
    {
      waitpid (pid, NULL, __WALL);
      ptrace (PTRACE_DETACH, pid, NULL, NULL);
      kill (pid, SIGCONT);
      report ("ptrace-attach", 0, "attached");
    }
  else
    report ("ptrace-attach", 1, "");

  /* The control socket: not in the view at all, and nowhere to put an impostor. */
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++)
    found = found || find_socket (roots[i], 6);
  report ("socket-in-view", !found, "an agent.sock is in view");
  mkdir ("/run/namzu", 0755);
  unlink ("/run/namzu/agent.sock");
  snprintf (addr.sun_path, sizeof addr.sun_path, "/run/namzu/agent.sock");
  fd = socket (AF_UNIX, SOCK_STREAM, 0);
  if (fd >= 0 && bind (fd, (struct sockaddr *)&addr, sizeof addr) == 0 && listen (fd, 8) == 0)
    {
      report ("socket-replace", 0, "bound /run/namzu/agent.sock");
      /* An impostor that stays, out of the execution's group and stdio: it hangs up on every
       * connection, so the host would hear nothing true from here on. */
      if (fork () == 0)
        {
          int null = open ("/dev/null", O_RDWR);

          setsid ();
          dup2 (null, 0);
          dup2 (null, 1);
          dup2 (null, 2);
          for (;;)
            {
              int c = accept (fd, NULL, NULL);

              if (c >= 0)
                close (c);
            }
        }
    }
  else
    report ("socket-replace", 1, "");
  fd = open ("/run/namzu/host-disk", O_WRONLY | O_CREAT, 0644);
  report ("host-disk-write", fd < 0, "/run/namzu/host-disk");
  /* The worker's TCP port (2024 in the container): an impostor would have to bind it, on any
   * address, with any reuse option; the worker holds it, under another uid. */
  if (strcmp (argv[1], "namzu-worker") == 0)
    {
      static const char *const addrs[] = { "0.0.0.0", "127.0.0.1", "127.0.0.2" };
      int bound = 0;

      detail[0] = '\0';
      for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++)
        {
          struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons (2024) };
          int one = 1, s4 = socket (AF_INET, SOCK_STREAM, 0);

          inet_pton (AF_INET, addrs[i], &in.sin_addr);
          setsockopt (s4, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
          setsockopt (s4, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
          if (s4 >= 0 && bind (s4, (struct sockaddr *)&in, sizeof in) == 0 && listen (s4, 8) == 0)
            {
              bound++;
              snprintf (detail + strlen (detail), sizeof detail - strlen (detail), "%s ",
                        addrs[i]);
            }
          if (s4 >= 0)
            close (s4);
        }
      report ("port-takeover", bound == 0, detail);
    }
  return 0;
}
