#!/usr/bin/env python3
"""Mutation check: does the test suite fail when a guarantee breaks?

Applies each mutant of Scripts/mutants.txt (a small edit that breaks one rule of the Guarantees
article or one delivery option) to a scratch copy of the tree, one at a time, rebuilds
incrementally and runs the tests. Prints one line per mutant (killed, and by which test; or
SURVIVED; or equivalent, with the list's reason) and last:

  mutants: N, killed: K, equivalent: E, survived: S

Run it before and after any change to the engine or to a guarantee: `--all` runs both lists,
this one and the relay's, side by side (about 14 minutes on 2 idle cores with the scratch copies
built; the first run builds them, a few minutes more).

Usage (Scripts/mutation-check.sh is a wrapper that runs this program with the same arguments):
  Scripts/mutation-check.py --all
      Both lists at once: this one and --relay's, each in its scratch copy, the relay's output
      after this one's; exits non-zero when either list has a survivor or fails.
  Scripts/mutation-check.py [--full] [ID ...]
      Every mutant (or the given ones). A mutant's `hint` test runs first; when it does not
      fail, the whole suite runs. --full always runs the whole suite (slower, names every
      killing test).
  Scripts/mutation-check.py --runs N --filter REGEX ID ...
      Runs only the tests matching REGEX, N times, against each given mutant (`base`: no
      mutant), and prints how many runs failed: how reliably a test kills its mutant.
  Scripts/mutation-check.py --check
      Only checks the lists (Scripts/mutants.txt and Relays/Redis/mutants.txt): every snippet
      occurs exactly once in its file. Needs no redis.
  Scripts/mutation-check.py --relay [--full | --runs N --filter REGEX] [ID ...]
      The same, for the Redis relay: the mutants of Relays/Redis/mutants.txt, built and tested in
      the relay's development package (Relays/Redis) of a scratch copy of its own
      (.build/mutation-relay), against a throwaway redis-server on a free 127.0.0.1 port that the
      tests find through RELAY_REDIS_PORT, killed on exit (started as Scripts/redis-server.sh
      starts it for Scripts/relay-check.sh; its redis_dependencies installs redis and the C
      libraries when missing).

Environment: MUTATION_SCRATCH (default .build/mutation, .build/mutation-relay with --relay: the
scratch copy, its builds, the logs), MUTATION_TIMEOUT (seconds per whole-suite run; default 3x
the unmutated run, at least 120), MUTATION_HINT_TIMEOUT (seconds per hint run, default the
mutant's `hint-timeout:`, else 45). A run that reaches its timeout counts as killed by the timeout
(the mutant made something hang): its processes get SIGQUIT, so that the log shows the hung
stacks, and the line names the tests that started and never ended. A mutant's `env:` field
(NAME=value words, see mutants.txt) is set for its test runs only:
`SUBSCRIPTIONS_PROCESS_FENCE=off` runs them in the symmetric fence mode, `=on` in the adaptive
default (every other mutant runs with `=asymmetric`, the form fixed).

How a run is read: the test bundle writes Swift Testing's JSON event stream (one JSON record a
line) to <log>.events.jsonl beside the console log <log>.log; a test failed when an issue was
recorded for it, and a test that started and never ended was running when the process crashed
or hung. Each run is a session of its own (start_new_session), so that a timeout or the end of
the run kills everything it started, also the processes that Foundation's Process put in process
groups of their own. Needs Linux (/proc), git and python3 (3.9 or later, standard library only).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import NoReturn

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
THIS = os.path.abspath(__file__)
LISTS = ("Scripts/mutants.txt", "Relays/Redis/mutants.txt")
DEFAULT_HINT_TIMEOUT = 45
# Seconds a process that got SIGQUIT on a timeout has to print its stacks before it is killed.
STACK_DUMP_SECONDS = 10


def fail(message: str, status: int = 1) -> NoReturn:
    """Prints message on stderr and exits."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(status)


def env_seconds(name: str, default: int) -> int:
    """An environment variable's number of seconds; default when it is unset or empty."""
    value = os.environ.get(name, "")
    return int(value) if value else default


def since(start: float) -> int:
    """Whole seconds since a time.monotonic() reading."""
    return int(time.monotonic() - start)


# ---------------------------------------------------------------------------------------------
# The list of mutants


@dataclass
class Mutant:
    """One block of a mutants file."""

    id: str
    name: str
    line: int  # of the `=== ` line, for messages
    fields: dict[str, str] = field(default_factory=dict)  # file, breaks, hint, equivalent, ...
    find: list[str] = field(default_factory=list)
    replace: list[str] = field(default_factory=list)

    @property
    def file(self) -> str:
        return self.fields.get("file", "")

    @property
    def breaks(self) -> str:
        return self.fields.get("breaks", "")

    @property
    def hint(self) -> str:
        return self.fields.get("hint", "")

    @property
    def equivalent(self) -> str:
        return self.fields.get("equivalent", "")

    @property
    def hint_timeout(self) -> int | None:
        value = self.fields.get("hint-timeout", "")
        return int(value) if value else None

    @property
    def env(self) -> list[str]:
        """The NAME=value words of the `env:` field."""
        return self.fields.get("env", "").split()


def parse_list(path: str) -> list[Mutant]:
    """The blocks of a mutants file, in order (the format is in the file's header)."""
    mutants: list[Mutant] = []
    block: Mutant | None = None
    body: str | None = None  # "find" or "replace" inside a body, else None
    with open(path, encoding="utf-8") as source:
        lines = source.read().split("\n")
    for line_no, line in enumerate(lines, 1):
        if body is not None:
            if line == "--- replace" and body == "find":
                body = "replace"
            elif line == "--- end":
                body = None
            else:
                getattr(block, body).append(line)
            continue
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("=== "):
            parts = line[4:].split(None, 1)
            block = Mutant(id=parts[0], name=parts[1] if len(parts) > 1 else "", line=line_no)
            mutants.append(block)
        elif line == "--- find" and block is not None:
            body = "find"
        elif ":" in line and block is not None:
            key, value = line.split(":", 1)
            block.fields[key.strip()] = value.strip()
        else:
            fail(f"{path}:{line_no}: cannot read this line: {line!r}")
    if body is not None:
        fail(f"{path}: the last block has no '--- end'")
    return mutants


def snippet(lines: list[str]) -> str:
    """The text of a find or replace body."""
    return "\n".join(lines) + "\n" if lines else ""


def problems_of(mutant: Mutant) -> list[str]:
    """What is wrong with one block, checked against the file it edits."""
    where = f"{mutant.id} (line {mutant.line})"
    problems = [f"{where}: no '{key}:'" for key in ("file", "breaks") if not mutant.fields.get(key)]
    if not mutant.find:
        return problems + [f"{where}: empty '--- find'"]
    target = os.path.join(ROOT, mutant.file)
    if not os.path.isfile(target):
        return problems + [f"{where}: no file {mutant.fields.get('file')}"]
    with open(target, encoding="utf-8") as source:
        found = source.read().count(snippet(mutant.find))
    if found != 1:
        problems.append(
            f"{where}: the find snippet occurs {found} times in {mutant.file}, not once")
    timeout = mutant.fields.get("hint-timeout")
    if timeout is not None and (not timeout.isdigit() or "hint" not in mutant.fields):
        problems.append(f"{where}: 'hint-timeout:' must be a number of seconds, with a 'hint:'")
    if mutant.find == mutant.replace:
        problems.append(f"{where}: the replacement changes nothing")
    return problems


def read_list(path: str) -> list[Mutant]:
    """The mutants of a list, after checking every block; exits when one is stale or malformed."""
    mutants = parse_list(path)
    problems: list[str] = []
    seen: set[str] = set()
    for mutant in mutants:
        if mutant.id in seen:
            problems.append(f"{mutant.id} (line {mutant.line}): the id is used twice")
        seen.add(mutant.id)
        problems += problems_of(mutant)
    if problems:
        fail(f"{os.path.relpath(path, ROOT)} is stale or malformed:\n  " + "\n  ".join(problems))
    return mutants


def check_lists() -> int:
    """--check: every block of both lists is well formed and its snippet occurs once."""
    for relative in LISTS:
        mutants = read_list(os.path.join(ROOT, relative))
        for mutant in mutants:
            where = "equivalent" if mutant.equivalent else mutant.file
            print(f"{mutant.id:<4} {mutant.name:<48} {where}")
        print(f"{relative}: {len(mutants)} mutants, every snippet found exactly once")
    return 0


# ---------------------------------------------------------------------------------------------
# The scratch copy


@dataclass
class Scratch:
    """Where one list is built and tested, and what every test run gets."""

    list_path: str
    directory: str  # MUTATION_SCRATCH: the tree, its builds and the logs
    package_dir: str  # the package built and tested, relative to the tree
    test_env: list[str]  # NAME=value words set for every test run
    bundle: str = ""  # the test bundle, found by the first build

    @property
    def tree(self) -> str:
        return os.path.join(self.directory, "tree")

    @property
    def logs(self) -> str:
        return os.path.join(self.directory, "logs")

    @property
    def package(self) -> str:
        return os.path.normpath(os.path.join(self.tree, self.package_dir))

    @property
    def pristine(self) -> str:
        """A copy of the unmutated build, put back after a mutant that rebuilt everything."""
        return os.path.join(self.directory, "pristine-build")

    def log(self, name: str) -> str:
        return os.path.join(self.logs, name)


def source_files() -> list[str]:
    """The tracked and untracked-but-not-ignored paths of the source tree."""
    out = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True).stdout.decode()
    return [path for path in out.split("\0") if path]


def copy_link(src: str, dst: str) -> None:
    """Makes dst the same symbolic link as src (Relays/Redis/Dependencies/Subscriptions ->
    ../../..: the relay's package finds the root package of the tree through it)."""
    if os.path.islink(dst) and os.readlink(dst) == os.readlink(src):
        return
    if os.path.lexists(dst):
        os.remove(dst)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.symlink(os.readlink(src), dst)


def write_if_changed(path: str, text: str) -> None:
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as current:
            if current.read() == text:
                return
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def sync_tree(dest: str, manifest: str, trailer: str) -> None:
    """Copies the source tree's files to dest, keeping the modification times of unchanged
    files (so that the build there stays incremental), and removes the files the source no
    longer has. The copy of manifest (a path relative to the tree) ends with trailer."""
    paths = source_files()
    files = set()
    for path in paths:
        src, dst = os.path.join(ROOT, path), os.path.join(dest, path)
        if os.path.islink(src):
            copy_link(src, dst)
        elif not os.path.isfile(src):
            continue  # deleted but still in the index
        elif path == manifest:
            files.add(path)
            with open(src, encoding="utf-8") as source:
                write_if_changed(dst, source.read() + trailer)
        else:
            files.add(path)
            if not os.path.isfile(dst) or not filecmp.cmp(src, dst, shallow=False):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
    for dirpath, dirnames, filenames in os.walk(dest):
        # Not into the builds (the relay's is in Relays/Redis).
        dirnames[:] = [d for d in dirnames if d != ".build"]
        for name in filenames:
            if os.path.relpath(os.path.join(dirpath, name), dest) not in files:
                os.remove(os.path.join(dirpath, name))


def prepare_tree(scratch: Scratch, relay: bool) -> None:
    """Brings the scratch copy up to date. Its manifest builds only the test bundle and what it
    runs, not the examples, benchmarks and checks that no verdict reads: fewer compiles and links
    per mutant."""
    if relay:
        unused = '$0.type == .executable && $0.name != "RelayPeer"'  # the tests start RelayPeer
    else:
        unused = '$0.type == .executable || $0.name == "FootprintSupport"'
    # (It names the wrapper: a change of this text would make SwiftPM reload the manifest.)
    trailer = ("\n// Added by Scripts/mutation-check.sh to its scratch copy: "
               "the tests need none of these.\n"
               f"package.targets.removeAll {{ {unused} }}\n")
    os.makedirs(scratch.tree, exist_ok=True)
    os.makedirs(scratch.logs, exist_ok=True)
    manifest = os.path.normpath(os.path.join(scratch.package_dir, "Package.swift"))
    sync_tree(scratch.tree, manifest, trailer)


def apply_mutant(scratch: Scratch, mutant: Mutant) -> None:
    """Writes the mutated file into the scratch tree (from the source tree's original)."""
    with open(os.path.join(ROOT, mutant.file), encoding="utf-8") as source:
        text = source.read()
    with open(os.path.join(scratch.tree, mutant.file), "w", encoding="utf-8") as out:
        out.write(text.replace(snippet(mutant.find), snippet(mutant.replace), 1))


def restore_file(scratch: Scratch, relative: str) -> None:
    """Puts the source tree's file back, with its modification time (cp -p)."""
    shutil.copy2(os.path.join(ROOT, relative), os.path.join(scratch.tree, relative))


def save_pristine_build(scratch: Scratch) -> None:
    """Keeps the unmutated build aside. A mutant that changes the module's interface (a default
    argument, a stored property) rebuilds every test file, and so does the next build, once the
    original is back: the copy replaces the scratch build after such a mutant instead. A copy is
    as good as the original for SwiftPM (it compares modification times), and copying takes a
    second or two where rebuilding takes half a minute."""
    shutil.rmtree(scratch.pristine, ignore_errors=True)
    build = os.path.join(scratch.package, ".build")
    subprocess.run(["cp", "-a", build, scratch.pristine], check=True)


def restore_pristine_build(scratch: Scratch) -> None:
    build = os.path.join(scratch.package, ".build")
    shutil.rmtree(build, ignore_errors=True)
    subprocess.run(["cp", "-a", scratch.pristine, build], check=True)


def rebuilt_everything(build_log: str) -> bool:
    """Whether a build compiled more than a file or two (more than 3 `Compiling` lines)."""
    with open(build_log, encoding="utf-8", errors="replace") as log:
        return sum("Compiling" in line for line in log) > 3


# ---------------------------------------------------------------------------------------------
# Building


def swift_build(scratch: Scratch, log_path: str, mode: str = "w") -> bool:
    with open(log_path, mode) as log:
        return subprocess.run(["swift", "build", "--build-tests"], cwd=scratch.package,
                              stdout=log, stderr=subprocess.STDOUT).returncode == 0


def find_bundle(scratch: Scratch) -> str:
    """The test bundle (*PackageTests.xctest) of the scratch build, or ""."""
    bin_path = subprocess.run(["swift", "build", "--show-bin-path"], cwd=scratch.package,
                              capture_output=True, text=True).stdout.strip()
    if not os.path.isdir(bin_path):
        return ""
    bundles = sorted(name for name in os.listdir(bin_path) if name.endswith("PackageTests.xctest"))
    return os.path.join(bin_path, bundles[0]) if bundles else ""


def build(scratch: Scratch, log_path: str) -> bool:
    """Builds the scratch package and its tests, logging to log_path; finds the test bundle the
    first time."""
    if not swift_build(scratch, log_path):
        # A scratch build made before a file of the tree was renamed or removed fails with
        # "missing inputs" (SwiftPM keeps the old file list): start it afresh, once.
        with open(log_path, encoding="utf-8", errors="replace") as log:
            if "because of missing inputs" not in log.read():
                return False
        with open(log_path, "a") as log:
            log.write("the scratch build named files that are gone; building it afresh\n")
        shutil.rmtree(os.path.join(scratch.package, ".build"), ignore_errors=True)
        if not swift_build(scratch, log_path, "a"):
            return False
    if not scratch.bundle:
        scratch.bundle = find_bundle(scratch)
        if not scratch.bundle:
            with open(log_path, "a") as log:
                log.write("no test bundle (*PackageTests.xctest) after the build\n")
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Running the tests


@dataclass
class Events:
    """What a run's JSON event stream says about its tests, by test id."""

    names: dict[str, str] = field(default_factory=dict)  # test id -> the name a verdict gives it
    functions: set[str] = field(default_factory=set)  # the ids of tests (not suites)
    started: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)  # an issue that counts was recorded for them

    def failed_names(self) -> list[str]:
        return sorted({self.names.get(test, test) for test in self.failed})

    def unfinished_names(self) -> list[str]:
        """The tests (not suites) that started and never ended: running when the process
        crashed or hung."""
        unfinished = (self.started - self.ended) & self.functions
        return sorted({self.names[test] for test in unfinished})


def test_name(payload: dict) -> str:
    """The name a verdict gives a test: a function's without its argument labels
    (`cancelWaits()` -> `cancelWaits`), a suite's type name."""
    return payload.get("name", payload["id"]).split("(")[0]


def counts_as_failure(issue: dict) -> bool:
    """An issue fails its test unless it is a known issue (withKnownIssue) or a warning."""
    return not issue.get("isKnown", False) and issue.get("severity", "error") != "warning"


def read_events(path: str) -> Events:
    """Reads the JSON Lines event stream of Swift Testing (ABI version 0): "test" records
    describe the tests (id, kind "suite" or "function", name); "event" records say what
    happened ("kind": "testStarted", "issueRecorded", "testEnded", ..., with the "testID")."""
    events = Events()
    if not os.path.isfile(path):
        return events  # the bundle did not start
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in stream:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a process killed while it wrote
            payload = record.get("payload", {})
            if record.get("kind") == "test":
                events.names[payload["id"]] = test_name(payload)
                if payload.get("kind") == "function":
                    events.functions.add(payload["id"])
            elif record.get("kind") == "event" and payload.get("testID"):
                note_event(events, payload)
    return events


def note_event(events: Events, payload: dict) -> None:
    kind, test = payload.get("kind"), payload["testID"]
    if kind == "testStarted":
        events.started.add(test)
    elif kind == "testEnded":
        events.ended.add(test)
    elif kind == "issueRecorded" and counts_as_failure(payload.get("issue", {})):
        events.failed.add(test)


def session_groups(session: int) -> set[int]:
    """The process groups of a session's processes. A run's processes all stay in its session:
    also those whose parent died, and those that Foundation's Process starts in a process group
    of their own (posix_spawn with POSIX_SPAWN_SETPGROUP: the relay's tests start RelayPeer and
    openssl so), which a kill of the bundle's group alone would miss."""
    groups = {session}  # the test bundle's, which leads the session
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == session:
                    groups.add(os.getpgid(int(entry)))
            except OSError:
                pass  # gone since the listing
    return groups


def signal_session(session: int, signum: int) -> None:
    """Sends signum to every process group of a session, once (os.killpg)."""
    for group in session_groups(session):
        try:
            os.killpg(group, signum)
        except OSError:
            pass  # empty by now


def end_session(session: int) -> None:
    """Kills every process of a run: nothing of a run outlives it (a test that left a process
    behind, an exit test's child, must not spin beside the next runs). Twice, in case a process
    started another between the listing and the kill."""
    signal_session(session, signal.SIGKILL)
    signal_session(session, signal.SIGKILL)


def crash_signal(console: str) -> str:
    """The crash that Swift's backtracer (`Program crashed: Bad pointer dereference at 0x...`)
    or the testing library (`unexpected signal code 6`) reported in the console log, or ""."""
    crashed = re.search(r"Program crashed: ([^*\n]*)", console)
    if crashed:
        return re.sub(r" at 0x.*", "", crashed.group(1))
    signalled = re.search(r"unexpected (signal code [0-9]+)", console)
    return signalled.group(1) if signalled else ""


def crashed_thread_tests(console: str) -> list[str]:
    """The tests on the stack of the thread that crashed, in a Swift backtrace of the console
    log (from `Thread 3 crashed:` to the next `Thread N`): frames `SomeTests.aTest(`."""
    names: set[str] = set()
    on_crashed_thread = False
    for line in console.splitlines():
        if re.match(r"Thread [0-9]+", line):
            on_crashed_thread = "crashed:" in line
        elif on_crashed_thread:
            names.update(re.findall(r"([A-Z][A-Za-z0-9_]*Tests\.[a-z][A-Za-z0-9_]*)\(", line))
    return sorted(names)


def exit_code(returncode: int) -> int:
    """A shell's view of a return code: 128 + N for a process ended by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def verdict_of(returncode: int, hung: bool, limit: int, log_path: str, events: Events) -> str:
    """"" when every test passed, else what killed the mutant."""
    if not hung and returncode == 0:
        return ""
    failed = ", ".join(events.failed_names())
    if hung:
        verdict = f"timeout after {limit} s (a hang) in: {', '.join(events.unfinished_names())}"
        return verdict + (f"; failed first: {failed}" if failed else "")
    if failed:
        return failed
    with open(log_path, encoding="utf-8", errors="replace") as log:
        console = log.read()
    cause = crash_signal(console) or f"exit {exit_code(returncode)}"
    tests = crashed_thread_tests(console) or events.unfinished_names()
    return f"crash ({cause}) in: {', '.join(tests)}"


def test_environment(scratch: Scratch, mutant_env: list[str]) -> dict[str, str]:
    """The environment of a test run: ours, NO_COLOR, the list's words, then the mutant's (which
    win)."""
    env = dict(os.environ, NO_COLOR="1")
    for word in scratch.test_env + mutant_env:
        name, _, value = word.partition("=")
        env[name] = value
    return env


def test_command(scratch: Scratch, events_path: str, regex: str) -> list[str]:
    """The test bundle itself, not `swift test --skip-build`: the same Swift Testing run without
    SwiftPM's planning and the empty XCTest pass (about a second per run); the package has no
    XCTest tests.

    The event stream: the bundle of Swift 6.3.1 accepts `--event-stream-output-path PATH` with
    `--event-stream-version 0` and the older spellings `--experimental-event-stream-output` and
    `--experimental-event-stream-version`: the same records either way (tried on 6.3.1;
    `swift test --help-hidden` lists the first two). Version 0 is the stable record format."""
    command = [scratch.bundle, "--testing-library", "swift-testing",
               "--event-stream-output-path", events_path, "--event-stream-version", "0"]
    if regex:
        command += ["--filter", regex]
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL"] + command  # keeps the console log complete up to a crash
    return command


def run_tests(scratch: Scratch, name: str, regex: str, limit: int, mutant_env: list[str]) -> str:
    """Runs the tests (all, or those matching regex), logging to <name>.log and
    <name>.events.jsonl in the logs. Returns "" when every test passed, else what killed the
    mutant. After limit seconds every process of the run gets SIGQUIT, so that Swift's
    backtracer prints where every thread hangs, and is then killed."""
    log_path = scratch.log(f"{name}.log")
    events_path = scratch.log(f"{name}.events.jsonl")
    if os.path.exists(events_path):
        os.remove(events_path)
    hung = False
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            test_command(scratch, events_path, regex), cwd=scratch.package,
            env=test_environment(scratch, mutant_env), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            hung = True
            signal_session(process.pid, signal.SIGQUIT)
            try:
                process.wait(timeout=STACK_DUMP_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        finally:
            # Also on an interruption of this program: the run's session has no terminal, so
            # nothing else would end it.
            end_session(process.pid)
            process.wait()
    return verdict_of(process.returncode, hung, limit, log_path, read_events(events_path))


# ---------------------------------------------------------------------------------------------
# The relay's redis-server


def install_redis_dependencies(log_path: str) -> None:
    """Runs redis_dependencies of Scripts/redis-server.sh (installs redis and the C libraries
    when missing)."""
    script = 'source "$1" && redis_dependencies'
    with open(log_path, "w") as log:
        command = ["bash", "-c", script, "bash", os.path.join(ROOT, "Scripts/redis-server.sh")]
        status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    if status != 0:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            fail(log.read().rstrip())


def answers_ping(port: int) -> bool:
    reply = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
    return "PONG" in reply.stdout


def start_redis(log_path: str) -> tuple[subprocess.Popen, int]:
    """A redis-server on a free 127.0.0.1 port (no persistence, not daemonized) that answers
    PING, as redis_server_start of Scripts/redis-server.sh starts it: the process and its port."""
    for _ in range(20):
        port = random.randint(20000, 59999)
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        for _ in range(50):
            if answers_ping(port):
                return server, port
            if server.poll() is not None:
                break  # the port was taken
            time.sleep(0.1)
        stop_redis(server)
    with open(log_path, encoding="utf-8", errors="replace") as log:
        fail("could not start redis-server:\n" + log.read().rstrip())


def stop_redis(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait()


# ---------------------------------------------------------------------------------------------
# The modes


def find_mutant(mutants: list[Mutant], ident: str) -> Mutant:
    return next(mutant for mutant in mutants if mutant.id == ident)


def label_of(mutant: Mutant) -> str:
    label = f"{mutant.id:<4} {mutant.name:<48}"
    return label + (f" [{' '.join(mutant.env)}]" if mutant.env else "")


def measure_runs(scratch: Scratch, mutants: list[Mutant], ids: list[str], runs: int,
                 regex: str) -> int:
    """--runs: how often the tests matching regex fail against each given mutant (or `base`)."""
    hint_timeout = env_seconds("MUTATION_HINT_TIMEOUT", DEFAULT_HINT_TIMEOUT)
    for ident in ids:
        mutant = None if ident == "base" else find_mutant(mutants, ident)
        mutant_env = mutant.env if mutant else []
        if mutant:
            apply_mutant(scratch, mutant)
        if not build(scratch, scratch.log(f"{ident}.build.log")):
            if mutant:
                restore_file(scratch, mutant.file)
            fail(f"{ident}: the build failed (see {scratch.log(f'{ident}.build.log')})")
        failures = 0
        for run in range(1, runs + 1):
            verdict = run_tests(scratch, f"{ident}.run{run}", regex, hint_timeout, mutant_env)
            if verdict:
                failures += 1
                print(f"  {ident} run {run}: failed: {verdict}")
            else:
                print(f"  {ident} run {run}: passed")
        if mutant:
            restore_file(scratch, mutant.file)
        print(f"{ident}: '{regex}' failed {failures} of {runs} runs")
    return 0


def run_base(scratch: Scratch) -> int:
    """Builds and runs the unmutated suite, which must pass, or every mutant would look killed;
    returns the timeout of a whole-suite run."""
    if not build(scratch, scratch.log("base.build.log")):
        fail(f"the unmutated tree does not build (see {scratch.log('base.build.log')})")
    save_pristine_build(scratch)
    start = time.monotonic()
    verdict = run_tests(scratch, "base", "", 1800, [])
    if verdict:
        fail(f"the unmutated suite fails ({verdict}); fix that first "
             f"(log: {scratch.log('base.log')})")
    elapsed = since(start)
    timeout = env_seconds("MUTATION_TIMEOUT", 120 if elapsed < 40 else 3 * elapsed)
    print(f"unmutated suite passed in {elapsed} s; timeout per mutant run: {timeout} s")
    return timeout


def check_mutant(scratch: Scratch, mutant: Mutant, full: bool,
                 suite_timeout: int) -> tuple[str, str]:
    """Applies, builds and tests one mutant, then puts the original back: (how, verdict), how
    being "hint" or "suite", verdict "" when it survived."""
    apply_mutant(scratch, mutant)
    build_log = scratch.log(f"{mutant.id}.build.log")
    if not build(scratch, build_log):
        restore_file(scratch, mutant.file)
        relative_list = os.path.relpath(scratch.list_path, ROOT)
        fail(f"{label_of(mutant)} the mutant does not build (see {build_log}): fix {relative_list}")
    how, verdict = "", ""
    if not full and mutant.hint:
        limit = env_seconds("MUTATION_HINT_TIMEOUT", mutant.hint_timeout or DEFAULT_HINT_TIMEOUT)
        how = "hint"
        verdict = run_tests(scratch, f"{mutant.id}.hint", mutant.hint, limit, mutant.env)
    if not verdict:
        how, verdict = "suite", run_tests(scratch, mutant.id, "", suite_timeout, mutant.env)
    restore_file(scratch, mutant.file)
    if rebuilt_everything(build_log):
        restore_pristine_build(scratch)
    return how, verdict


def check_mutants(scratch: Scratch, mutants: list[Mutant], ids: list[str], full: bool,
                  header: str) -> int:
    """The mutation check proper: every mutant (or the given ones), one line each, the totals."""
    start = time.monotonic()
    print(header)
    suite_timeout = run_base(scratch)
    n = killed = equivalent = survived = 0
    for mutant in mutants:
        if ids and mutant.id not in ids:
            continue
        n += 1
        label = label_of(mutant)
        if mutant.equivalent:
            equivalent += 1
            print(f"{label} equivalent: {mutant.equivalent}")
            continue
        mutant_start = time.monotonic()
        how, verdict = check_mutant(scratch, mutant, full, suite_timeout)
        if verdict:
            killed += 1
            print(f"{label} killed ({how}, {since(mutant_start)} s) by {verdict}")
        else:
            survived += 1
            print(f"{label} SURVIVED ({since(mutant_start)} s): {mutant.breaks}")
    print(f"done in {since(start)} s; logs in {scratch.logs}")
    print(f"mutants: {n}, killed: {killed}, equivalent: {equivalent}, survived: {survived}")
    return 0 if survived == 0 else 1


def run_both_lists() -> int:
    """--all: this list in the foreground, the relay's beside it (it builds another package in
    another scratch copy and spends much of its time on its server and its tests, so it overlaps
    well with this list's builds), its output printed after this one's."""
    with tempfile.TemporaryFile() as relay_log:
        relay = subprocess.Popen([sys.executable, THIS, "--relay"], stdout=relay_log,
                                 stderr=subprocess.STDOUT)
        try:
            status = subprocess.run([sys.executable, THIS]).returncode
            relay_status = relay.wait()
        finally:
            if relay.poll() is None:
                relay.terminate()
                relay.wait()
        print("== the relay's list (Relays/Redis/mutants.txt)", flush=True)
        relay_log.seek(0)
        sys.stdout.buffer.write(relay_log.read())
    return 0 if status == 0 and relay_status == 0 else 1


def scratch_for(relay: bool) -> Scratch:
    if relay:
        default = os.path.join(ROOT, ".build/mutation-relay")
        list_path, package_dir = os.path.join(ROOT, "Relays/Redis/mutants.txt"), "Relays/Redis"
        test_env: list[str] = []  # RELAY_REDIS_PORT, once the server runs
    else:
        default = os.path.join(ROOT, ".build/mutation")
        list_path, package_dir = os.path.join(ROOT, "Scripts/mutants.txt"), "."
        # The engine's mutants run with the fence form fixed at asymmetric: the adaptive default
        # moves between the forms with the suite's load, so a mutant of one form would be seen
        # only when the suite happens to run in it. Mutants of the adaptive switch and of the
        # symmetric form set the variable in their own `env:` (it comes later and wins).
        test_env = ["SUBSCRIPTIONS_PROCESS_FENCE=asymmetric"]
    directory = os.environ.get("MUTATION_SCRATCH") or default
    return Scratch(list_path=list_path, directory=directory, package_dir=package_dir,
                   test_env=test_env)


def parse_options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(add_help=False, usage="see --help")
    for flag in ("--full", "--all", "--check", "--relay", "-h", "--help"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--runs", type=int, default=0)
    parser.add_argument("--filter", default="")
    parser.add_argument("ids", nargs="*")
    options = parser.parse_intermixed_args(argv)
    if options.help:
        print(__doc__.strip())
        sys.exit(0)
    if options.all and (options.ids or options.relay or options.check or options.runs):
        fail("--all takes no other option and no mutant id", 2)
    if options.runs > 0 and (not options.filter or not options.ids):
        fail("--runs needs --filter REGEX and at least one mutant ID (or base)", 2)
    return options


def main(argv: list[str]) -> int:
    options = parse_options(argv)
    if options.all:
        return run_both_lists()
    if options.check:
        return check_lists()
    scratch = scratch_for(options.relay)
    mutants = read_list(scratch.list_path)
    for ident in options.ids:
        if ident != "base" and ident not in {mutant.id for mutant in mutants}:
            fail(f"no mutant {ident} in the list", 2)
    prepare_tree(scratch, options.relay)
    header = f"mutation check: {len(mutants)} mutants, scratch copy in {scratch.directory}"
    server = None
    try:
        if options.relay:
            install_redis_dependencies(scratch.log("dependencies.log"))
            server, port = start_redis(scratch.log("redis-server.log"))
            scratch.test_env = [f"RELAY_REDIS_PORT={port}"]
            header += f", redis-server on 127.0.0.1:{port}"
        if options.runs > 0:
            return measure_runs(scratch, mutants, options.ids, options.runs, options.filter)
        return check_mutants(scratch, mutants, options.ids, options.full, header)
    finally:
        if server:
            stop_redis(server)


def exit_on_signal(signum: int, frame: object) -> None:
    sys.exit(130)  # unwinds through the `finally`s: the run in progress and the server end


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # the lines appear as the mutants finish
    signal.signal(signal.SIGINT, exit_on_signal)
    signal.signal(signal.SIGTERM, exit_on_signal)
    # A program started in the background by a script starts with SIGQUIT ignored, and the test
    # bundle would inherit that: restore the default, so that the SIGQUIT sent on a timeout
    # prints the hung stacks.
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
