"""The process between graphfix and a traced script: run as `python -m
graphfix.trace.supervisor PARENT_PID OUT COMMAND...`, it starts COMMAND (the traced child,
`graphfix.trace.child`), waits for it, and then ends every process the script started, so
that nothing a traced script starts outlives the trace: a forked child, a daemon
(`Popen(..., start_new_session=True)`), a double fork.

How it finds them, on Linux: it is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), so
every descendant whose parent ends is re-parented to it rather than to init, daemons that
left the session included; what is still running when the child ends is its descendants in
`/proc`, killed (SIGKILL) and reaped until it has no child left (or none has ended for
PATIENCE seconds: a process another user owns refuses SIGKILL and is left). Why not a
cgroup: a subreaper needs no privilege and no setup (Linux 3.4+), a cgroup does (a
delegated cgroup v2 subtree, or a writable v1 hierarchy), which an unprivileged user on a
CI machine seldom has. Where prctl or /proc is not there (not Linux), the child's process
group is killed: what the script started in it ends, and a process that left it (a new
session, a double fork's daemon) is not found.

It ends the tree early when told to stop (SIGTERM, SIGHUP, SIGINT: graphfix was stopped, or
the trace's --timeout ran out), and when graphfix itself dies, even by SIGKILL
(`PR_SET_PDEATHSIG`): then it removes OUT too, which no one else is left to remove. SIGUSR1
(where is the script?) is passed on to the child. What ended the child is written to
OUT/ENDED_FILE: `{"returncode": N}`, negative for a signal, as `subprocess` says it.

A process outside the tree escapes it: a service the script asks another process to start
(`systemd-run`, `at`, a D-Bus activation) is not the script's descendant.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time

ENDED_FILE = "ended.json"
PATIENCE = 10.0  # seconds without a killed process ending before the rest are left
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOPPING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class _Stopped(BaseException):
    """Raised in the wait when the supervisor is told to stop."""


def _prctl(option: int, value: int) -> bool:
    """Whether `prctl(option, value)` took effect (False where there is no prctl)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """The pids of every process beneath `root`, read from /proc (parents before their
    children); [] where there is no /proc."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # (it ended meanwhile)
        # (the command name, in parentheses, may hold spaces and parentheses itself)
        fields = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def end_tree(group: int | None) -> None:
    """Kill the child's process group and every descendant of this process, and reap them:
    returns when this process has no child left, or when for PATIENCE seconds none has
    ended (what is left refuses SIGKILL: another user's, a setuid program's, or stuck in the
    kernel)."""
    if group is not None:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    last_reaped = time.monotonic()
    while True:
        # (each turn kills what is there now: a process forked meanwhile is found next turn,
        # as a child of ours once its parent is killed)
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped:
            last_reaped = time.monotonic()
        elif time.monotonic() - last_reaped > PATIENCE:
            return
        else:
            time.sleep(0.01)


def main(argv: list[str]) -> None:
    parent, out, *command = argv
    subreaper = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    child, stopped = None, []

    def stop(signum, frame):
        if not stopped:  # (once: a second signal must not cut the clean-up short)
            stopped.append(signum)
            raise _Stopped(signum)

    def ask_child_where(signum, frame):
        if child is not None:
            try:
                os.kill(child, signal.SIGUSR1)
            except OSError:
                pass

    for signum in _STOPPING:
        signal.signal(signum, stop)
    signal.signal(signal.SIGUSR1, ask_child_where)
    returncode = None
    try:
        if os.getppid() != int(parent):  # (graphfix ended before the death signal was set)
            raise _Stopped(signal.SIGTERM)
        # (the child is known once started: no stop between the two; its signal mask is
        # cleared. A group of its own: what the script starts in it ends with it, prctl or not)
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
        child = os.posix_spawn(command[0], command, os.environ, setpgroup=0, setsigmask=())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
        while True:
            pid, status = os.wait()  # (orphans re-parented here are reaped as they end)
            if pid == child:
                returncode = os.waitstatus_to_exitcode(status)
                break
    except _Stopped:
        pass
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
        # (with a subreaper every descendant is found; the group is killed only without one,
        # its leader perhaps reaped already)
        end_tree(None if subreaper else child)
    if returncode is not None:
        with open(os.path.join(out, ENDED_FILE), "w") as f:
            json.dump({"returncode": returncode}, f)
    if os.getppid() != int(parent):  # graphfix is gone: nobody else removes its folder
        shutil.rmtree(out, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
