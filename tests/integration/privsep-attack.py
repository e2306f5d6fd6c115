# Run by the workload, inside a sandbox, as `python3 - SERVER`: tries every way the workload
# could reach its agent/worker (SERVER is the process name, namzu-agent or namzu-worker) and
# prints "refused ATTACK" for each one the kernel refused and "BREACH ATTACK DETAIL" for each
# one that worked. tests/integration/test-bwrap.c and test-docker.c assert no BREACH.
import ctypes
import errno
import os
import signal
import socket
import sys

server = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_open, SYS_pidfd_getfd = 434, 438


def report(name, ok, detail=""):
    print(("refused " if ok else "BREACH ") + name + ("" if ok else " " + detail), flush=True)


pids = []
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and open(f"/proc/{p}/comm").read().strip() == server:
            pids.append(int(p))
    except OSError:
        pass
if not pids:
    print("BREACH find no " + server + " process in view", flush=True)
    sys.exit(0)
pid = pids[0]
print("found " + server, flush=True)

for what, mode in (("environ", os.O_RDONLY), ("mem", os.O_RDWR), ("mem-read", os.O_RDONLY)):
    try:
        fd = os.open(f"/proc/{pid}/{what.split('-')[0]}", mode)
        data = os.read(fd, 4096) if what == "environ" else b"opened"
        os.close(fd)
        report("proc-" + what, False, repr(data[:80]))
    except OSError as e:
        report("proc-" + what, e.errno in (errno.EACCES, errno.EPERM), str(e))

try:
    os.listdir(f"/proc/{pid}/fd")
    report("proc-fd-list", False, "listed")
except OSError as e:
    report("proc-fd-list", e.errno in (errno.EACCES, errno.EPERM), str(e))

pidfd = libc.syscall(SYS_pidfd_open, pid, 0)
if pidfd < 0:
    report("pidfd_open", False, "pidfd_open failed: " + os.strerror(ctypes.get_errno()))
else:
    taken = [n for n in range(0, 64) if libc.syscall(SYS_pidfd_getfd, pidfd, n, 0) >= 0]
    report("pidfd_getfd", not taken, "took fds %r" % taken)

# Signal 0 is the kernel's permission check alone; a stopped server is resumed at once.
for name, sig in (("kill-0", 0), ("kill-SIGSTOP", signal.SIGSTOP)):
    try:
        os.kill(pid, sig)
        report(name, False, "delivered")
        if sig == signal.SIGSTOP:
            os.kill(pid, signal.SIGCONT)
    except PermissionError as e:
        report(name, True)

try:
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    r = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
    report("ptrace-attach", r != 0, "attached")
    if r == 0:
        os.waitpid(pid, 0x40000000)  # __WALL
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
        os.kill(pid, signal.SIGCONT)
except Exception as e:  # noqa: BLE001 - a missing ptrace is a refusal too
    report("ptrace-attach", True)

# The control socket: not in the view at all, and nowhere to put an impostor.
found = []
for root in ("/run", "/tmp", "/var/tmp", "/workspace", "/home", "/mnt", "/opt"):
    for d, _, files in os.walk(root):
        found += [os.path.join(d, f) for f in files if f == "agent.sock"]
report("socket-in-view", not found, repr(found))
try:
    os.makedirs("/run/namzu", exist_ok=True)
    s = socket.socket(socket.AF_UNIX)
    try:
        os.unlink("/run/namzu/agent.sock")
    except OSError:
        pass
    s.bind("/run/namzu/agent.sock")
    s.listen(8)
    report("socket-replace", False, "bound /run/namzu/agent.sock")
    # An impostor that stays: accept and hang up on every host connection.
    if os.fork() == 0:
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(null, n)
        while True:
            c, _ = s.accept()
            c.close()
except OSError as e:
    report("socket-replace", True)
try:
    with open("/run/namzu/host-disk", "w") as f:
        f.write("x")
    report("host-disk-write", False, "/run/namzu/host-disk")
except OSError:
    report("host-disk-write", True)
