"""The processes a traced script starts: none outlives `trace`, `check --trace`, `verify
SCRIPT` or `fix --verify` (a forked child, a daemon in a session of its own, a double fork's
grandchild), whether the script trains, graphfix is stopped (Ctrl-C, SIGTERM, SIGHUP: exit
130, 143, 129) or killed; no `graphfix-trace-*` folder is left; a script that ends its own
process (`os._exit`, a fatal signal) is said in one line, where it was. graphfix runs as a
real process with a temporary folder of its own; every process of a test's tree carries a
mark in its environment, by which a survivor is found in /proc (and killed after the test).
Each graphfix run costs a TF import in the traced child: the runs of a test go together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import REPO, error_lines

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the tree is read from /proc")

MARK = "GRAPHFIX_TEST_TREE"
RUN_TIMEOUT = 240  # seconds a graphfix run may take here (a TF import on a busy machine)

# Starts a forked child, a daemon in a new session and a double fork's grandchild (each
# sleeps, as long as the test would wait), writing their pids to $PIDS, then builds a
# small graph (an int32 variable on a GPU: something check finds and fix moves) and runs
# its train op.
STARTS_PROCESSES = '''\
import os
import subprocess
import sys
import time

import tensorflow as tf


def note(pid):
    with open(os.environ["PIDS"], "a") as f:
        f.write(f"{pid}\\n")


forked = os.fork()
if forked == 0:
    time.sleep(600)
    os._exit(0)
note(forked)
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          start_new_session=True)
note(daemon.pid)
first = os.fork()
if first == 0:
    os.setsid()
    second = os.fork()
    if second == 0:
        time.sleep(600)
        os._exit(0)
    note(second)
    os._exit(0)
os.waitpid(first, 0)

with tf.device("/gpu:0"):
    steps = tf.Variable(0, name="steps")
w = tf.Variable(1.0, name="w")
train = tf.train.GradientDescentOptimizer(0.1).minimize(w * w)
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    session.run([train, steps])
'''

# Never imports TF: starts a daemon, writes its own pid and the daemon's, loops.
LOOPS = '''\
import os
import subprocess
import sys
import time

daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          start_new_session=True)
with open(os.environ["PIDS"], "w") as f:
    f.write(f"{os.getpid()}\\n{daemon.pid}\\n")
while True:
    time.sleep(0.1)
'''

RUNS_THEN = '''\
import ctypes
import os
import signal

import tensorflow as tf

x = tf.constant(1)
with tf.Session() as session:
    session.run(x)
{end}
'''
ENDS = {"os_exit": "os._exit(0)",
        "sigsegv": "ctypes.string_at(0)",
        "sigkill": "os.kill(os.getpid(), signal.SIGKILL)"}


class Tree:
    """A test's graphfix run: its folder (the script, its pid file, a TMPDIR of its own)
    and the mark every process it starts inherits."""

    def __init__(self, folder: Path, name: str, code: str):
        self.folder, self.mark = folder, uuid.uuid4().hex
        self.script = folder / name
        self.script.write_text(code)
        self.pids, self.tmp = folder / "pids.txt", folder / "tmp"
        self.tmp.mkdir()

    def start(self, *args) -> subprocess.Popen:
        env = {**os.environ, "TMPDIR": str(self.tmp), "PIDS": str(self.pids),
               MARK: self.mark, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
        return subprocess.Popen([sys.executable, "-m", "graphfix", *map(str, args)],
                                cwd=self.folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def noted(self) -> list[int]:
        """The pids the script wrote."""
        try:
            return [int(p) for p in self.pids.read_text().split()]
        except (OSError, ValueError):
            return []

    def alive(self) -> list[int]:
        """Every running process (not a zombie) that carries this tree's mark."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if f"{MARK}={self.mark}".encode() in environ.split(b"\0") and state != b"Z":
                found.append(int(entry))
        return found

    def left(self) -> list[str]:
        return sorted(p.name for p in self.tmp.iterdir())

    def kill_survivors(self) -> None:
        for pid in self.alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Tree(name, code) in a folder of its own; what is left of each is killed at the end."""
    made = []

    def make(name: str, code: str) -> Tree:
        made.append(Tree(tmp_path_factory.mktemp("tree"), name, code))
        return made[-1]

    yield make
    for tree in made:  # (a failing run must not leave sleepers on the machine)
        tree.kill_survivors()


def finished(tree: Tree, *args) -> subprocess.CompletedProcess:
    process = tree.start(*args)
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_nothing_the_script_starts_outlives_trace_check_verify_or_fix_verify(trees):
    """A forked child, a daemon and a double fork's grandchild, on a run that succeeds: all
    three are gone when each command ends (today's main left them sleeping)."""
    commands = {"trace": ("trace", "{script}", "-o", "traced"),
                "check --trace": ("check", "--trace", "{script}"),
                "verify": ("verify", "{script}"),
                "fix --verify": ("fix", "--verify", "{script}", "--target-devices", "/gpu:0")}
    exits = {"trace": 0, "check --trace": 1, "verify": 1, "fix --verify": 1}
    runs = {name: trees("starts_processes.py", STARTS_PROCESSES) for name in commands}

    def run(name):
        tree = runs[name]
        return finished(tree, *[a.format(script=tree.script) for a in commands[name]])

    with ThreadPoolExecutor(len(commands)) as pool:
        results = dict(zip(commands, pool.map(run, commands)))
    for name, result in results.items():
        tree = runs[name]
        assert result.returncode == exits[name], (name, result.stdout, result.stderr[-3000:])
        assert len(tree.noted()) == 3, (name, tree.noted())  # (fix: its fixed copy's)
        assert tree.alive() == [], name
        assert tree.left() == [], name
    assert "stopped: the first run of a train op" in results["trace"].stdout
    fixed = runs["fix --verify"].script.read_text()
    assert 'with tf.device("/cpu:0"):\n        steps = tf.Variable(0, name="steps")' in fixed


STOPS = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129, "SIGKILL": -signal.SIGKILL}


@pytest.fixture(scope="module")
def stopped(trees):
    """signal name -> (the Tree, graphfix's exit code, its stderr, whether every process the
    script noted was running before the signal) of a looping script's trace, graphfix sent
    the signal once the script has started; the runs go together."""
    runs = {name: trees("loops.py", LOOPS) for name in STOPS}
    processes = {name: tree.start("trace", tree.script, "-o", "traced")
                 for name, tree in runs.items()}
    running, results = {}, {}
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        waiting = dict(processes)
        while waiting and time.monotonic() < deadline:
            for name, process in list(waiting.items()):
                tree = runs[name]
                if len(tree.noted()) == 2 or process.poll() is not None:
                    running[name] = set(tree.noted()) <= set(tree.alive())
                    process.send_signal(getattr(signal, name))
                    del waiting[name]
            time.sleep(0.1)
        for name, process in processes.items():
            _, err = process.communicate(timeout=60)
            results[name] = (runs[name], process.returncode, err, running.get(name, False))
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    return results


@pytest.mark.parametrize("name", STOPS)
def test_stopping_graphfix_ends_the_script_and_all_it_started_and_removes_the_folder(
        stopped, name):
    """graphfix stopped while it traces a script that loops (and started a daemon): the
    script and the daemon end, the trace's folder goes, graphfix exits 128 + the signal;
    killed (SIGKILL, no handler runs), the supervisor still ends the tree and removes the
    folder. Today's main: SIGTERM and SIGHUP killed graphfix alone, the script looping on,
    the folder left; Ctrl-C left the daemon."""
    tree, code, err, running = stopped[name]
    assert running and len(tree.noted()) == 2, err[-3000:]  # (the tree was there to stop)
    assert code == STOPS[name], err[-3000:]
    assert error_lines(err) == []
    deadline = time.monotonic() + 10  # (killed, graphfix cannot wait for the supervisor)
    while (tree.alive() or tree.left()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tree.alive() == [] and tree.left() == []
    assert not (tree.folder / "traced").exists()


@pytest.fixture(scope="module")
def ended(trees):
    """end -> (the Tree, the CompletedProcess) of tracing RUNS_THEN ending so; together."""
    runs = {end: trees("ends.py", RUNS_THEN.format(end=code)) for end, code in ENDS.items()}

    def run(end):
        return runs[end], finished(runs[end], "trace", runs[end].script, "-o", "traced")

    with ThreadPoolExecutor(len(runs)) as pool:
        return dict(zip(runs, pool.map(run, runs)))


@pytest.mark.parametrize("end,said", [
    ("os_exit", "the traced script called os._exit(0) at {script}:10 in <module>"),
    ("sigsegv", "the traced script was killed by SIGSEGV at {script}:10 in <module>"),
    ("sigkill", "the traced script was killed by SIGKILL after session run 1 at "
                "ends.py:9")], ids=list(ENDS))
def test_a_script_that_ends_its_own_process_is_said_in_one_line_where_it_was(
        ended, end, said):
    """Today's main: os._exit(0) gave a FileNotFoundError traceback (exit 1), a signal an
    exit code and TF's last log line."""
    tree, result = ended[end]
    assert result.returncode == 2, result.stderr[-3000:]
    assert error_lines(result.stderr) == [
        f"graphfix: error: {tree.script}: {said.format(script=tree.script)}, before the trace "
        "could write the graph; nothing written"]
    assert tree.alive() == [] and tree.left() == []
