#!/usr/bin/env python3
"""tools/grade.py: grade the exercises of a student's copy, for the
student and for the places courses grade in.

  grade.py run TEST_BIN OUTDIR [NAME] [--log BUILD_LOG]
      `make grade [EXERCISE=NAME]`: run each exercise's tests (ex_NAME in
      tests/) in a process group of its own under a time limit, print the
      summary and write the reports (below) into OUTDIR, or OUTDIR/NAME
      for one exercise, so that grading one never overwrites another's.
  grade.py compile BUILD OUTDIR -- CC FLAGS...
      before the build of `make grade`: each exercise's file compiled on
      its own; an exercise whose body does not compile is graded as its
      blank (tools/stub.awk), from a copy of the file in OUTDIR/patched/
      compiled into BUILD/obj/ (the student's file is never changed), and
      its compiler errors go to OUTDIR/compile-errors.json, which the
      grade shows under that exercise.
  grade.py build-failed OUTDIR BUILD_LOG [NAME]
      the same reports when the build failed: every test scores 0.
  grade.py submission TEMPLATE SUBMISSION OUTDIR [--student NAME]
      grade a submission over a copy of the handout TEMPLATE (Gradescope's
      run_autograder, `make grade-class`): only the files that hold the
      exercises (HANDOUT) are taken from SUBMISSION.
  grade.py class TEMPLATE STUDENTS CSV
      `make grade-class`: every student's copy under STUDENTS, each in a
      scratch copy of TEMPLATE; one CSV row per student.
  grade.py gradescope TEMPLATE OUTDIR
      `make gradescope`: OUTDIR/gradescope.zip (setup.sh, run_autograder
      and the handout) and OUTDIR/autograder.py (Classroom 50's).

The reports: summary.txt (what the screen shows), results.json
(Gradescope), result.json (Classroom 50, schema classroom50/result/v1),
grade.tap (TAP 13) and grade.xml (JUnit), each holding the exercises'
tests only.

Points: an exercise is worth the lines of code of its reference body
(tools/body-lines.awk; a handout carries them in tests/exercise-weights),
rounded up to a multiple of its number of tests; each test earns an
equal share.

Environment: GRADE_TIMEOUT, the seconds each exercise's tests may take
together (default 10); GRADE_LEAKS=0 skips the leak check (valgrind, on
the exercises that pass, one at a time, GRADE_LEAK_SECONDS (40) in all;
what it found is kept per exercise until its file or the tests change); STUDENT, the name on the reports (default git's
user.name, then the GitHub account that pushed ($GITHUB_ACTOR, in a
workflow), then $USER); for result.json, Classroom 50's CLASSROOM,
ASSIGNMENT, SUBMISSION_TAG, COMMIT_URL, RELEASE_URL and REVIEW_URL.
"""
import argparse
import csv
import ctypes
import datetime
import glob
import hashlib
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile

RULE = ("points: an exercise is worth the lines of code of its reference "
        "body, rounded up to a multiple of its test count; each test earns "
        "an equal share")


def fail(message, status=2):
    print("grade: " + message, file=sys.stderr)
    sys.exit(status)


# --- what there is to grade -------------------------------------------

def exercises_here():
    """[(name, file, chapter)] in chapter order: HANDOUT in a handout,
    else the @exercise markers of src/*/*.c (the teacher's tree)."""
    if os.path.isfile("HANDOUT"):
        out = []
        with open("HANDOUT") as f:
            for line in f:
                w = line.split()
                if w and not w[0].startswith("#") and len(w) >= 3:
                    out.append((w[0], w[1], w[2]))
        return out
    out = []
    for path in sorted(glob.glob("src/*/*.c")):
        with open(path) as f:
            for line in f:
                m = re.search(r"@exercise (\w+) \(chapter (\d+)\)", line)
                if m:
                    out.append((m.group(1), path, m.group(2)))
    return sorted(out, key=lambda e: int(e[2]))


def tests_here():
    """{exercise: [test, ...]} from the Test(ex_NAME, test) lines of tests/."""
    tests = {}
    for path in sorted(glob.glob("tests/*.c")):
        with open(path) as f:
            for m in re.finditer(r"^Test\(\s*ex_(\w+)\s*,\s*(\w+)", f.read(), re.M):
                tests.setdefault(m.group(1), []).append(m.group(2))
    return tests


def body_lines():
    """{exercise: lines of its reference body}: tests/exercise-weights in a
    handout, counted from src/ in the teacher's tree."""
    if os.path.isfile("HANDOUT"):
        if not os.path.isfile("tests/exercise-weights"):
            return {}
        text = open("tests/exercise-weights").read()
    else:
        awk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "body-lines.awk")
        text = subprocess.run(["awk", "-f", awk] + sorted(glob.glob("src/*/*.c")),
                              capture_output=True, text=True, check=True).stdout
    lines = {}
    for line in text.splitlines():
        w = line.split()
        if len(w) == 2 and not w[0].startswith("#") and w[1].isdigit():
            lines[w[0]] = int(w[1])
    return lines


def student_name():
    """(name, where it came from)."""
    if os.environ.get("STUDENT"):
        return os.environ["STUDENT"], "STUDENT"
    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    if name:
        return name, "git user.name"
    if os.environ.get("GITHUB_ACTOR"):
        return os.environ["GITHUB_ACTOR"], "the GitHub account that pushed"
    if os.environ.get("USER"):
        return os.environ["USER"], "$USER"
    return "unknown", "no git user.name, no $USER"


# --- running one exercise's tests ---------------------------------------

def stop_on_signals():
    """SIGTERM and SIGHUP (a cancelled CI job, a closed terminal) end the
    grade as ^C does, through the code that kills the tests it started:
    they run in a session of their own, which the terminal's ^C and a
    signal to make's group do not reach."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _: sys.exit(128 + s))


def become_subreaper():
    """Orphans of our children (Criterion's workers, each in a session of
    its own) become our children, so none can outlive the grade unseen."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def children_of(pids):
    """Every process whose parent is in pids, and theirs, from /proc."""
    parent = {}
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), list(pids)
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p and c not in found:
                found.add(c)
                todo.append(c)
    return found


def kill_tree(proc):
    """Stop the test program's group (so it forks no more), kill every
    process below it (Criterion puts each worker in a session of its
    own, out of the group's reach), then the group; reap them."""
    try:
        os.killpg(proc.pid, signal.SIGSTOP)
    except OSError:
        pass
    for _ in range(5):
        below = children_of([proc.pid, os.getpid()]) - {proc.pid}
        for p in below:
            for kill in (os.killpg, os.kill):
                try:
                    kill(p, signal.SIGKILL)
                except OSError:
                    pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if not below:
            break
        time.sleep(0.05)
    proc.wait()
    reap()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wait_at_most(proc, limit):
    """proc.wait(timeout=limit), returning the moment proc ends: Python's
    own wait with a time-out polls, asleep up to 50 ms between looks,
    which adds up over the exercises of a grade.  Where Linux gives a
    process descriptor (pidfd_open), select waits on it; elsewhere the
    polling wait.  Raises subprocess.TimeoutExpired as proc.wait does."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=limit)
    try:
        ready, _, _ = select.select([fd], [], [], limit)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, limit)
    return proc.wait()


def run_exercise(binary, name, tests, limit, scratch):
    """{test: {status, where, message}} for one exercise, and how its run
    ended: None, or ("timed out after N s" | "crashed: SIGNAME")."""
    log_path = os.path.join(scratch, name + ".log")
    env = dict(os.environ, MHA_GRADE_SIGNALS="1")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([binary, "--filter", "ex_%s/*" % name, "--jobs", "1",
                                 "--verbose"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            wait_at_most(proc, limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_tree(proc)
        except BaseException:  # ^C, or a SIGTERM (stop_on_signals)
            kill_tree(proc)
            raise
    results = {t: {"status": "not run", "where": "", "message": ""} for t in tests}
    current, in_message = None, False
    with open(log_path, errors="replace") as log:
        for line in log:
            line = line.rstrip("\n")
            m = re.match(r"\[RUN \] ex_(\w+)::(\w+)", line)
            if m:
                current = results.setdefault(m.group(2), {"status": "not run", "where": "",
                                                         "message": ""})
                current["status"], in_message = "running", False
                continue
            m = re.match(r"grade: signal (SIG\w+)$", line)
            if m and current is not None:
                current["signal"] = m.group(1)
                continue
            m = re.match(r"\[----\] (\S+:\d+): (.*)$", line)
            if m and current is not None:
                in_message = m.group(2) == "Assertion Failed"
                if not current["where"]:
                    current["where"] = m.group(1)
                    current["message"] = "" if in_message else m.group(2)
                continue
            m = re.match(r"\[----\]   ?(.*)$", line)
            if m and current is not None and in_message:
                text = m.group(1).strip()
                if text and current["where"] and not current.get("done"):
                    current["message"] += ("\n" if current["message"] else "") + text
                continue
            m = re.match(r"\[(PASS|FAIL)\] ex_(\w+)::(\w+)(?:: (.*))?$", line)
            if m:
                r = results.setdefault(m.group(3), {"status": "", "where": "", "message": ""})
                if m.group(1) == "PASS":
                    r["status"] = "passed"
                elif "CRASH" in (m.group(4) or ""):
                    r["status"] = "crashed"
                else:
                    r["status"] = "failed"
                r["done"] = True
                current, in_message = None, False
    ended = None
    if timed_out:
        ended = "timed out after %s s" % fmt_seconds(limit)
        for r in results.values():
            if r["status"] == "running":
                r["status"] = "timed out"
                r["message"] = ("timed out after %s s while this test ran: look for a "
                                "loop in the exercise that does not end" % fmt_seconds(limit))
            elif r["status"] == "not run":
                r["status"] = "timed out"
                r["message"] = "not run: the exercise's %s s ran out before it" % fmt_seconds(limit)
    else:
        crashed = [r for r in results.values() if r["status"] == "crashed"]
        if crashed:
            sig = next((r["signal"] for r in crashed if r.get("signal")), None)
            ended = "crashed: " + sig if sig else "crashed"
        for r in crashed:
            r["message"] = ("crashed: %s" % r["signal"] if r.get("signal") else "crashed") + \
                (" after this line" if r["where"] else "")
        for r in results.values():
            if r["status"] in ("running", "not run"):
                r["status"] = "failed"
                r["message"] = r["message"] or \
                    "the test did not report (the test program exited with status %s)" % proc.returncode
    return results, ended


def fmt_seconds(s):
    return ("%g" % s)


def check_leaks(binary, names, limit, scratch, root, cache_path, files):
    """{exercise: "N bytes in M blocks"} for the passing exercises whose
    tests leak under valgrind, and a line saying how leaks were checked.
    valgrind is slow (about a second a test), so what it found is kept
    in cache_path per exercise, with the contents of the exercise's file
    and of its tests: an exercise is checked again when either changed."""
    if not names:
        return {}, "leaks: checked with valgrind for the exercises that pass (none pass yet)"
    if os.environ.get("GRADE_LEAKS", "1") == "0":
        return {}, "leaks: not checked (GRADE_LEAKS=0)"
    if not shutil.which("valgrind"):
        return {}, "leaks: not checked (valgrind is not installed)"
    try:
        cache = json.load(open(cache_path))
    except (OSError, ValueError):
        cache = {}
    keys = {n: content_key([files[n]] + sorted(glob.glob("tests/*.c"))) for n in names}
    known = {n: cache[n]["leak"] for n in names if n in cache and cache[n].get("key") == keys[n]}
    todo = [n for n in names if n not in known]
    leaks = {n: v for n, v in known.items() if v}
    # one exercise at a time, each under its own limit, all within
    # GRADE_LEAK_SECONDS (default 40): what was checked is kept, so a
    # grade stopped by the budget checks the rest the next time
    try:
        budget = float(os.environ.get("GRADE_LEAK_SECONDS", "40"))
    except ValueError:
        fail("GRADE_LEAK_SECONDS '%s' must be a number of seconds"
             % os.environ["GRADE_LEAK_SECONDS"])
    began, found, unchecked = time.monotonic(), {}, []
    for n in todo:
        left = budget - (time.monotonic() - began)
        if left < 1:
            unchecked.append(n)
            continue
        leak, stopped = run_leak_check(binary, n, min(limit * 10 + 30, left), scratch, root)
        if stopped:
            unchecked.append(n)
            continue
        if leak:
            found[n] = leak
        cache[n] = {"key": keys[n], "leak": leak}
    try:
        write(cache_path, json.dumps(cache, indent=1) + "\n")
    except OSError:
        pass
    leaks.update(found)
    if unchecked and os.environ.get("GRADE_ONCE") == "1":
        return leaks, ("leaks: %s not checked (valgrind ran out of its %g s, "
                       "GRADE_LEAK_SECONDS)" % (", ".join(unchecked), budget))
    if unchecked:
        return leaks, ("leaks: %s not checked yet (valgrind ran out of its %g s; a later "
                       "grade in this copy checks them, or GRADE_LEAK_SECONDS=S gives it "
                       "more)" % (", ".join(unchecked), budget))
    if not leaks:
        return leaks, "leaks: none (checked with valgrind on the exercises that pass)"
    return leaks, ("leaks: found by valgrind on the exercises that pass; a warning, no "
                   "points taken")


def content_key(paths):
    h = hashlib.sha256()
    for p in paths:
        try:
            h.update(open(p, "rb").read())
        except OSError:
            h.update(b"missing " + p.encode())
    return h.hexdigest()


def run_leak_check(binary, name, limit, scratch, root):
    """valgrind on the tests of exercise name alone, for limit seconds at
    most: ("N bytes in M blocks" it leaks, or "", whether it ran out of
    time).  Every leak of its tests is its own, whatever valgrind's stack
    shows of it."""
    logs = os.path.join(scratch, "valgrind", name)  # this run's logs alone
    os.makedirs(logs, exist_ok=True)
    supp = os.path.join(root, "tools", "valgrind.supp")
    cmd = ["valgrind", "--quiet", "--leak-check=full",
           "--show-leak-kinds=definite,indirect", "--trace-children=yes",
           "--log-file=" + os.path.join(logs, "vg.%p")]
    if os.path.isfile(supp):
        cmd.append("--suppressions=" + supp)
    with open(os.path.join(scratch, "valgrind.out"), "w") as out:
        proc = subprocess.Popen(cmd + [binary, "--filter", "ex_%s/*" % name, "--jobs", "1"],
                                stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_at_most(proc, limit)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return "", True
        except BaseException:
            kill_tree(proc)
            raise
    n_bytes = n_blocks = 0
    for path in glob.glob(os.path.join(logs, "vg.*")):
        text = open(path, errors="replace").read()
        for m in re.finditer(r"([\d,]+) bytes in ([\d,]+) blocks are (?:definitely|indirectly) "
                             r"lost", text):
            n_bytes += int(m.group(1).replace(",", ""))
            n_blocks += int(m.group(2).replace(",", ""))
    return ("%d bytes in %d blocks" % (n_bytes, n_blocks) if n_bytes or n_blocks else ""), False


# --- the grade ----------------------------------------------------------

def grade(exercises, tests, lines, outcome, leaks, leak_line, student, where, only,
          build_note, warnings, elapsed, broken=None):
    """The grade as data (one dict per test, per exercise) and its summary
    text, one screen."""
    rows, summary = [], []
    broken = broken or {}  # {exercise: its compiler errors} (cmd_compile)
    summary.append("grade for %s (%s), %s" % (student, where, now()))
    # warnings inside an exercise's function are the student's to fix;
    # the others come from code handed out as it is (a caller of a blank)
    mine = [w for w in warnings if in_exercise(w, exercises)]
    theirs = [w for w in warnings if w not in mine]
    if mine:
        summary.append("your files have %d warning%s (not errors here, but worth fixing):"
                       % (len(mine), "" if len(mine) == 1 else "s"))
        summary += ["    " + w for w in mine[:5]]
        if len(mine) > 5:
            summary.append("    ... and %d more in the build log" % (len(mine) - 5))
    if theirs:
        summary.append("the handout's own code has %d warning%s (not yours to fix; see "
                       "the build log)" % (len(theirs), "" if len(theirs) == 1 else "s"))
    body = []
    passed = failed = 0
    total = total_max = 0
    width = max([26] + [len(name) for name, _, _ in exercises])
    for name, file, chapter in exercises:
        names = tests.get(name, [])
        results, ended = outcome.get(name, ({}, None))
        n = max(len(names), 1)
        each = math.ceil(lines.get(name, n) / n) if name in lines else 1
        ok = sum(1 for t in names if results.get(t, {}).get("status") == "passed")
        score = each * ok
        total += score
        total_max += each * len(names)
        for t in names:
            r = results.get(t, {"status": "failed", "where": "", "message": build_note})
            if name in broken and r["status"] != "passed":
                r = dict(r, message="%s does not compile: %s" % (name, broken[name][0]))
            rows.append({"exercise": name, "test": t, "chapter": chapter, "file": file,
                         "passed": r["status"] == "passed", "status": r["status"],
                         "score": each if r["status"] == "passed" else 0,
                         "max": each, "where": r.get("where", ""),
                         "message": r.get("message", "")})
        done = ok == len(names) and names
        passed += 1 if done else 0
        failed += 0 if done else 1
        tag = ""
        if not done:
            tag = "  <- " + (build_note and "the build failed"
                             or name in broken and "does not compile (graded as its blank)"
                             or ended
                             or still_blank(file, name) and "not done yet"
                             or "some tests fail")
        body.append("%-*s %d/%d tests pass  %3d/%d points%s"
                    % (width, name, ok, len(names), score, each * len(names), tag))
        if name in broken:
            body += ["    " + e for e in broken[name][:3]]
            if len(broken[name]) > 3:
                body.append("    ... and %d more errors" % (len(broken[name]) - 3))
        elif not done and not build_note:
            first = first_failure(names, results)
            if first:
                body += ["    " + l for l in first.splitlines()]
        if name in leaks:
            body.append("    warning: %s leaks %s (valgrind); free what it allocates"
                        % (name, leaks[name]))
    summary += body
    summary.append("grade: %d passed, %d failed; %d/%d points" % (passed, failed, total, total_max))
    if not only:
        summary.append(RULE)
    summary.append(leak_line)
    return rows, summary, (passed, failed, total, total_max)


def still_blank(path, name):
    """Whether the body of exercise name in path is still the handout's
    blank (tools/stub.awk's "EXERCISE: write NAME" is in it)."""
    try:
        return ("EXERCISE: write %s " % name) in open(path, errors="replace").read()
    except OSError:
        return False


def in_exercise(warning, exercises):
    """Whether a compiler's line "FILE:LINE:COL: ..." falls inside the
    function of one of exercises."""
    m = re.match(r"([^:]+):(\d+):", warning)
    names = [n for n, f, _ in exercises if m and f == m.group(1)]
    if not names:
        return False
    try:
        ranges = body_ranges(open(m.group(1), errors="replace").readlines(), names)
    except OSError:
        return False
    return any(a <= int(m.group(2)) <= b for a, b in ranges.values())


def first_failure(names, results):
    """The failure to show: the lowest line of the tests that failed (the
    first check a student meets), as "file:line: message"."""
    best = None
    for t in names:
        r = results.get(t)
        if not r or r["status"] == "passed":
            continue
        line = int(r["where"].rsplit(":", 1)[1]) if r["where"] else 1 << 30
        text = (r["where"] + ": " if r["where"] else "") + r["message"]
        if r["status"] == "timed out":
            text = "%s: %s" % (t, r["message"])
            line = (1 << 31) + (0 if r["message"].startswith("timed out") else 1)
        if best is None or line < best[0]:
            best = (line, text)
    return best and best[1]


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def write_reports(outdir, rows, summary, totals, student, elapsed, build_failed=False,
                  seconds=None):
    os.makedirs(outdir, exist_ok=True)
    passed, failed, total, total_max = totals
    text = "\n".join(summary) + "\n"
    write(os.path.join(outdir, "summary.txt"), text)

    # Gradescope: https://gradescope-autograders.readthedocs.io/en/latest/specs/
    gradescope = {
        "score": total,
        "execution_time": round(elapsed, 2),
        "output": text,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"student": student, "build": "failed" if build_failed else "ok",
                       "seconds": seconds or {}},
        "tests": [{
            "name": "%s: %s" % (r["exercise"], r["test"]),
            "number": "%s.%d" % (r["chapter"], i + 1),
            "score": r["score"],
            "max_score": r["max"],
            "status": "passed" if r["passed"] else "failed",
            "output": "" if r["passed"] else
                      (r["where"] + ": " if r["where"] else "") + r["message"],
            "visibility": "visible",
        } for i, r in enumerate(rows)],
    }
    write(os.path.join(outdir, "results.json"), json.dumps(gradescope, indent=2) + "\n")

    # Classroom 50: schema classroom50/result/v1; the identity fields come
    # from its runner's environment, when set.
    result = {"schema": "classroom50/result/v1"}
    for field, var in (("classroom", "CLASSROOM"), ("assignment", "ASSIGNMENT"),
                       ("submission", "SUBMISSION_TAG"), ("commit", "COMMIT_URL"),
                       ("release", "RELEASE_URL"), ("review", "REVIEW_URL")):
        value = os.environ.get(var) or (os.environ.get("COMMIT_URL") if var == "REVIEW_URL" else "")
        if value:
            result[field] = value
    result["datetime"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result["score"] = total
    result["max-score"] = total_max
    result["tests"] = [{"test-name": "%s: %s" % (r["exercise"], r["test"]),
                        "passed": r["passed"], "score": r["score"], "max-score": r["max"]}
                       for r in rows]
    write(os.path.join(outdir, "result.json"), json.dumps(result, indent=2) + "\n")

    # TAP 13, the exercises' tests only
    tap = ["TAP version 13", "1..%d" % len(rows), "# grade for %s" % student]
    for i, r in enumerate(rows, 1):
        tap.append("%s %d - ex_%s::%s" % ("ok" if r["passed"] else "not ok", i,
                                          r["exercise"], r["test"]))
        if not r["passed"]:
            tap.append("  ---")
            tap.append("  status: %s" % r["status"])
            if r["where"]:
                tap.append("  at: %s" % r["where"])
            tap.append("  message: |")
            tap += ["    " + l for l in (r["message"] or r["status"]).splitlines()]
            tap.append("  ...")
    write(os.path.join(outdir, "grade.tap"), "\n".join(tap) + "\n")

    # JUnit
    suites = ET.Element("testsuites", name="grade", tests=str(len(rows)),
                        failures=str(sum(1 for r in rows if junit_tag(r) == "failure")),
                        errors=str(sum(1 for r in rows if junit_tag(r) == "error")))
    by_suite = {}
    for r in rows:
        by_suite.setdefault(r["exercise"], []).append(r)
    for name, rs in by_suite.items():
        s = ET.SubElement(suites, "testsuite", name="ex_" + name, tests=str(len(rs)),
                          failures=str(sum(1 for r in rs if junit_tag(r) == "failure")),
                          errors=str(sum(1 for r in rs if junit_tag(r) == "error")))
        for r in rs:
            c = ET.SubElement(s, "testcase", classname="ex_" + name, name=r["test"])
            if r["passed"]:
                continue
            tag = junit_tag(r)
            e = ET.SubElement(c, tag, type=r["status"],
                              message=(r["message"] or r["status"]).splitlines()[0])
            e.text = (r["where"] + ": " if r["where"] else "") + r["message"]
    ET.indent(suites) if hasattr(ET, "indent") else None
    write(os.path.join(outdir, "grade.xml"),
          '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n")


def junit_tag(r):
    """JUnit's word for a test that did not pass: a failure when the code
    under test is at fault (a wrong value, a time-out: a loop that does not
    end), an error when the test itself could not run (a crash, not run)."""
    if r["passed"]:
        return None
    return "failure" if r["status"] in ("failed", "timed out") else "error"


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def pick(exercises, only):
    if not only:
        return exercises
    chosen = [e for e in exercises if e[0] == only]
    given = given_whole("HANDOUT").split(",")
    if not chosen and only in given:
        print("grade: %s is given whole in this copy, not one of its exercises "
              "(your teacher left it out); the exercises: %s"
              % (only, " ".join(e[0] for e in exercises)), file=sys.stderr)
        sys.exit(1)
    if not chosen:
        print("grade: no exercise is called %s; the exercises: %s"
              % (only, " ".join(e[0] for e in exercises)), file=sys.stderr)
        sys.exit(1)
    return chosen


def limit_seconds():
    value = os.environ.get("GRADE_TIMEOUT", "10")
    try:
        limit = float(value)
    except ValueError:
        limit = -1
    if not 0 < limit <= 3600:
        fail("GRADE_TIMEOUT '%s' must be a number of seconds, more than 0 and at most 3600"
             % value)
    return limit


def cmd_run(args):
    start = time.monotonic()
    only = args.name or ""
    if only and not re.fullmatch(r"\w+", only):
        fail("'%s' is not an exercise name" % only, 1)
    limit = limit_seconds()
    exercises = pick(exercises_here(), only)
    tests, lines = tests_here(), body_lines()
    student, where = student_name()
    stop_on_signals()
    become_subreaper()
    outcome, seconds = {}, {}
    passing = []
    warnings = build_warnings(args.log)
    with tempfile.TemporaryDirectory(prefix="mha-grade-") as scratch:
        for name, _, _ in exercises:
            began = time.monotonic()
            outcome[name] = run_exercise(args.binary, name, tests.get(name, []), limit, scratch)
            seconds[name] = round(time.monotonic() - began, 2)
            if all(outcome[name][0].get(t, {}).get("status") == "passed"
                   for t in tests.get(name, [])) and tests.get(name):
                passing.append(name)
        leaks, leak_line = check_leaks(args.binary, passing, limit, scratch,
                                       os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                       os.path.join(args.outdir, "leaks.json"),
                                       {e[0]: e[1] for e in exercises})
    try:
        broken = json.load(open(os.path.join(args.outdir, "compile-errors.json")))
    except (OSError, ValueError):
        broken = {}
    rows, summary, totals = grade(exercises, tests, lines, outcome, leaks, leak_line,
                                  student, where, only, "", warnings,
                                  time.monotonic() - start, broken)
    outdir = os.path.join(args.outdir, only) if only else args.outdir
    write_reports(outdir, rows, summary, totals, student, time.monotonic() - start,
                  seconds=seconds)
    summary.append("reports: %s/ (summary.txt, results.json for Gradescope, result.json for "
                   "Classroom 50, grade.tap, grade.xml)" % outdir.rstrip("/"))
    print("\n".join(summary))
    return 0 if totals[1] == 0 else 1


def build_warnings(log):
    if not log or not os.path.isfile(log):
        return []
    return [l.rstrip("\n") for l in open(log, errors="replace") if "warning:" in l]


def cmd_build_failed(args):
    only = args.name or ""
    exercises = pick(exercises_here(), only)
    tests, lines = tests_here(), body_lines()
    student, where = student_name()
    errors = [l.rstrip("\n") for l in open(args.log, errors="replace") if "error:" in l] \
        if os.path.isfile(args.log) else []
    note = "the build failed: " + (errors[0] if errors else "see " + args.log)
    rows, summary, totals = grade(exercises, tests, lines, {}, {}, "leaks: not checked "
                                  "(the build failed)", student, where, only, note, [], 0)
    outdir = os.path.join(args.outdir, only) if only else args.outdir
    write_reports(outdir, rows, summary, totals, student, 0, build_failed=True)
    print("\n".join(summary))  # every test 0, as summary.txt has it
    print("grade: the build failed:")
    print("\n".join(errors[:20]))
    print("grade: the whole build log is %s" % args.log)
    return 1


# --- one exercise's compile error costs that exercise only --------------

def body_ranges(lines, names):
    """{name: (first, last)}: the 1-based lines of each exercise's
    function, its signature to the "}" that ends it (as tools/stub.awk
    finds it)."""
    ranges, pending, start, state = {}, None, 0, 0
    for i, line in enumerate(lines, 1):
        m = re.search(r"@exercise (\w+)", line)
        if state == 0 and m and m.group(1) in names:
            pending = m.group(1)
        elif state == 0 and pending and re.match(r"[A-Za-z]", line) and pending + "(" in line:
            state, start = 1, i
        elif state == 1 and line.rstrip("\n") == "}":
            ranges[pending] = (start, i)
            pending, state = None, 0
    return ranges


def compile_errors(cc, path, shown):
    """The compiler's error lines for path (-fsyntax-only), each naming
    `shown` as the file.  An error gcc places in a header, inside a macro
    the file uses (a `;` missing before a STEP line is reported in
    base/error.h, where STEP's `do` is), is placed where the file expands
    the macro, as its "in expansion of macro" note says, so that it
    belongs to the exercise whose body holds that line."""
    r = subprocess.run(cc + ["-fsyntax-only", path], capture_output=True, text=True)
    if r.returncode == 0:
        return []
    lines = r.stderr.splitlines()
    here = re.compile(re.escape(path) + r":(\d+):(\d+): note: in expansion of macro (.*)$")
    found = []
    for i, l in enumerate(lines):
        if ": error:" not in l:
            continue
        if not l.startswith(path + ":"):
            for note in lines[i + 1:]:
                if ": error:" in note or ": warning:" in note:
                    break
                m = here.match(note)
                if m:
                    where, _, msg = l.partition(": error: ")
                    l = "%s:%s:%s: error: %s (in the expansion of macro %s, at %s)" % (
                        path, m.group(1), m.group(2), msg, m.group(3).strip("'‘’`"), where)
                    break
        found.append(l.replace(path, shown, 1))
    return found


def cmd_compile(args):
    cc = args.cc[1:] if args.cc and args.cc[0] == "--" else args.cc
    patched_dir = os.path.join(args.outdir, "patched")
    errors = {}
    by_file = {}
    for name, file, _ in exercises_here():
        by_file.setdefault(file, []).append(name)
    for file, names in sorted(by_file.items()):
        obj = os.path.join(args.build, "obj", os.path.splitext(file[len("src/"):])[0] + ".o")
        patched = os.path.join(patched_dir, file)
        found = compile_errors(cc, file, file)
        if not found:
            if os.path.exists(patched):  # the object was built from a patched copy
                os.remove(patched)
                if os.path.exists(obj):
                    os.remove(obj)
            continue
        blanked, text = set(), open(file, errors="replace").read()
        os.makedirs(os.path.dirname(patched), exist_ok=True)
        while found:
            ranges = body_ranges(text.splitlines(True), names)
            at = set()
            for e in found:
                m = re.match(re.escape(file) + r":(\d+):", e)
                who = m and next((n for n, (a, b) in ranges.items()
                                  if a <= int(m.group(1)) <= b), None)
                if who:
                    at.add(who)
                    if who not in blanked:
                        errors.setdefault(who, []).append(e)
            at -= blanked
            if not at:
                break  # an error outside every exercise: the build says so
            blanked |= at
            keep = " ".join(n for n in names if n not in blanked)
            awk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub.awk")
            with open(patched, "w") as out:
                out.write(text)
            text = subprocess.run(["awk", "-v", "keep=" + keep, "-f", awk, patched],
                                  capture_output=True, text=True, check=True).stdout
            text = text.replace('"%s"' % patched, '"%s"' % file)  # the blank names its file
            with open(patched, "w") as out:
                out.write(text)
            found = compile_errors(cc + ["-iquote", os.path.dirname(file)], patched, file)
        if found:
            continue
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        r = subprocess.run(cc + ["-iquote", os.path.dirname(file), "-c", patched, "-o", obj],
                           capture_output=True, text=True)
        if r.returncode:
            continue
        print("grade: %s does not compile; %s graded as %s blank%s" % (
            file, " and ".join(sorted(blanked)), "its" if len(blanked) == 1 else "their",
            "" if len(blanked) == 1 else "s"))
    write(os.path.join(args.outdir, "compile-errors.json"), json.dumps(errors, indent=1) + "\n")
    return 0


# --- a submission over the handout -----------------------------------------

def copy_tree(src, dst):
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def cmd_submission(args):
    return grade_submission(args.template, args.submission, args.outdir, args.student,
                            args.metadata)[0]


def grade_submission(template, submission, outdir, student=None, metadata=None):
    """Grade SUBMISSION's exercise files over a scratch copy of TEMPLATE;
    copy the reports into OUTDIR.  (exit status, results.json as data,
    notes)."""
    template = os.path.abspath(template)
    if not os.path.isfile(os.path.join(template, "HANDOUT")):
        fail("%s is not a handout (it has no HANDOUT file)" % template)
    if metadata and os.path.isfile(metadata) and not student:
        try:
            users = json.load(open(metadata)).get("users") or []
            student = ", ".join(u.get("name") or u.get("email") or "" for u in users) or None
        except (OSError, ValueError):
            student = None
    notes = []
    with tempfile.TemporaryDirectory(prefix="mha-submission-") as scratch:
        work = os.path.join(scratch, "copy")
        copy_tree(template, work)
        shutil.rmtree(os.path.join(work, "build", "grade"), ignore_errors=True)
        files = sorted({w[1] for w in (l.split() for l in open(os.path.join(work, "HANDOUT")))
                        if len(w) >= 3 and not w[0].startswith("#")})
        for f in files:
            for cand in (os.path.join(submission, f), os.path.join(submission, os.path.basename(f))):
                if os.path.isfile(cand) and not os.path.islink(cand):
                    shutil.copyfile(cand, os.path.join(work, f))
                    os.utime(os.path.join(work, f))  # newer than the template's objects
                    break
            else:
                notes.append("%s is not in the submission: graded as the blank" % f)
        # a submission is graded once, in a scratch copy: no later grade
        # checks what the leak check's time left out
        env = dict(os.environ, STUDENT=student or os.path.basename(os.path.abspath(submission)),
                   GRADE_ONCE="1")
        for v in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "BUILD", "EXERCISE"):
            env.pop(v, None)
        for n in notes:
            print("grade: " + n)
        sys.stdout.flush()
        status = subprocess.run(["make", "--no-print-directory", "-j2", "grade"], cwd=work,
                                env=env).returncode
        os.makedirs(outdir, exist_ok=True)
        graded = os.path.join(work, "build", "grade")
        for name in os.listdir(graded) if os.path.isdir(graded) else []:
            if os.path.isfile(os.path.join(graded, name)):
                shutil.copyfile(os.path.join(graded, name), os.path.join(outdir, name))
        results = None
        if os.path.isfile(os.path.join(outdir, "results.json")):
            results = json.load(open(os.path.join(outdir, "results.json")))
            if notes:
                results["output"] = "\n".join(notes) + "\n" + results.get("output", "")
                write(os.path.join(outdir, "results.json"), json.dumps(results, indent=2) + "\n")
        built = bool(results) and results.get("extra_data", {}).get("build") == "ok"
        return status, results, notes, built


def csv_cell(value):
    """A CSV cell a spreadsheet will not run (OWASP's rule for CSV
    injection): text starting with =, +, -, @, a tab or a carriage return
    behind a single quote; csv.writer quotes what needs it."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


GIVEN = "# given whole, not exercises of this handout (make handout FROM= or WITHOUT=):"


def given_whole(handout_file):
    """The exercises a handout gives whole (its HANDOUT's line of them),
    as make handout's WITHOUT= value: "name,name", or "" when none."""
    try:
        with open(handout_file) as f:
            for line in f:
                if line.startswith(GIVEN):
                    return ",".join(line[len(GIVEN):].split())
    except OSError:
        pass
    return ""


def cmd_class_chapter(args):
    """Print the handout make grade-class grades the students' copies
    over: the chapter they are cut at (their last chapters/NN_*.c) and,
    when their HANDOUT says so, the exercises given whole (make handout
    WITHOUT=), "NN" or "NN name,name"; exit 2 when the copies disagree or
    hold no chapter."""
    if not os.path.isdir(args.students):
        fail("STUDENTS '%s' is not a folder" % args.students)
    cuts = {}
    for d in sorted(os.listdir(args.students)):
        found = sorted(glob.glob(os.path.join(args.students, d, "chapters", "[0-9][0-9]_*.c")))
        if found:
            cut = os.path.basename(found[-1])[:2]
            given = given_whole(os.path.join(args.students, d, "HANDOUT"))
            cuts.setdefault(cut + (" WITHOUT=" + given if given else ""), []).append(d)
    if not cuts:
        fail("no student copy under %s holds chapters/NN_*.c; name the handout "
             "with TEMPLATE=DIR or CH=NN" % args.students)
    if len(cuts) > 1:
        fail("the students' copies are cut at different chapters or give different "
             "exercises whole (%s); name the handout with TEMPLATE=DIR or CH=NN"
             % ", ".join("%s: %s" % (c, " ".join(ds[:3]) + (" ..." if len(ds) > 3 else ""))
                         for c, ds in sorted(cuts.items())))
    print(next(iter(cuts)).replace(" WITHOUT=", " "))
    return 0


def cmd_class(args):
    template = os.path.abspath(args.template)
    students = os.path.abspath(args.students)
    csv_path = os.path.abspath(args.csv)
    if not os.path.isdir(students):
        fail("STUDENTS '%s' is not a folder" % args.students)
    dirs = sorted(d for d in os.listdir(students)
                  if os.path.isdir(os.path.join(students, d)) and not d.startswith("."))
    if not dirs:
        fail("%s holds no student folder" % args.students)
    # a class's leak check is a warning, not points, and valgrind takes
    # about 15 s an exercise: off unless GRADE_LEAKS=1 asks for it (then
    # GRADE_LEAK_SECONDS a student, default 40)
    os.environ.setdefault("GRADE_LEAKS", "0")
    # the template built once (its blanks graded), so each student's copy
    # compiles only the files that hold the exercises
    print("grade-class: building the handout once ...")
    sys.stdout.flush()
    subprocess.run(["make", "--no-print-directory", "-j2", "grade"], cwd=template,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, GRADE_LEAKS="0", STUDENT="the blank handout"))
    os.chdir(template)
    exercises = [e[0] for e in exercises_here()]
    out = os.path.dirname(csv_path)
    rows, maximum = [], None
    for d in dirs:
        print("grade-class: %s" % d)
        sys.stdout.flush()
        report = os.path.join(out, d)
        shutil.rmtree(report, ignore_errors=True)
        # the student's grade and build output into the log beside the CSV
        with open(os.path.join(out, d + ".log"), "w") as log:
            saved = os.dup(1), os.dup(2)
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                _, results, notes, built = grade_submission(template, os.path.join(students, d),
                                                            report, student=d)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
        points = {e: 0 for e in exercises}
        worth = {e: 0 for e in exercises}
        problems = list(notes)
        if results and not built:
            problems.append("the build failed (its log: %s.log)" % d)
        if results:
            for t in results["tests"]:
                e = t["name"].split(":")[0]
                points[e] += t["score"]
                worth[e] += t.get("max_score", 0)
                maximum = maximum or worth
                if "does not compile" in (t.get("output") or "") and \
                        "%s does not compile" % e not in problems:
                    problems.append("%s does not compile" % e)
            for line in results.get("output", "").splitlines():
                m = re.match(r"(\w+) .*<- (timed out after .*|crashed.*)$", line)
                if m:
                    problems.append("%s %s" % (m.group(1), m.group(2)))
                m = re.match(r"    warning: (\w+) leaks (.*) \(valgrind\)", line)
                if m:
                    problems.append("%s leaks %s" % (m.group(1), m.group(2)))
                m = re.match(r"leaks: (.+?) not checked (?:yet )?\(valgrind ran out of its "
                             r"(\S+) s", line)
                if m:
                    problems.append("leaks of %s not checked (valgrind's %s s ran out; "
                                    "GRADE_LEAK_SECONDS=S gives it more)" % m.groups())
        total = sum(points.values())
        rows.append([d] + [points[e] for e in exercises] +
                    [total, "ok" if built else "failed", "; ".join(problems)])
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student"] + exercises + ["total", "build", "notes"])
        # the points each exercise is worth, above the students (a name
        # in parentheses no folder of a student's can be mistaken for)
        maximum = maximum or {}
        w.writerow(["(maximum)"] + [maximum.get(e, 0) for e in exercises] +
                   [sum(maximum.get(e, 0) for e in exercises), "",
                    "leaks checked (GRADE_LEAKS=1)" if os.environ.get("GRADE_LEAKS") == "1"
                    else "leaks not checked (GRADE_LEAKS=1 checks them, about 15 s an exercise)"])
        w.writerows([csv_cell(v) for v in r] for r in rows)
    print("grade-class: %d students graded; the grades: %s (each one's reports and log beside it)"
          % (len(rows), args.csv))
    return 0


# --- the autograders --------------------------------------------------------

SETUP_SH = """#!/bin/sh
# Gradescope runs this once, as root, when it builds the autograder: the
# packages the handout needs, then the handout built once, so that each
# submission compiles only the files that hold the exercises.
set -eu
root=${AUTOGRADER_ROOT:-/autograder}
cd "$root/source/handout"
MHA_NO_INSTALL=0 tools/deps.sh
make --no-print-directory -j"$(nproc)" build > "$root/source/build.log" 2>&1
"""

RUN_AUTOGRADER = """#!/bin/sh
# Gradescope runs this for each submission: the exercise files of
# /autograder/submission over a copy of the handout in
# /autograder/source/handout, graded; /autograder/results/results.json
# is the grade.  AUTOGRADER_ROOT stands for /autograder (to try it).
root=${AUTOGRADER_ROOT:-/autograder}
mkdir -p "$root/results"
python3 "$root/source/handout/tools/grade.py" submission \\
    --metadata "$root/submission_metadata.json" \\
    "$root/source/handout" "$root/submission" "$root/results" && exit 0
status=$?
# a submission that fails tests is graded, not an error: the grade is
# results.json; only a run that could not write it fails
[ -s "$root/results/results.json" ] && exit 0
exit "$status"
"""


def cmd_gradescope(args):
    template = os.path.abspath(args.template)
    if not os.path.isfile(os.path.join(template, "HANDOUT")):
        fail("%s is not a handout (it has no HANDOUT file)" % args.template)
    os.makedirs(args.outdir, exist_ok=True)
    zpath = os.path.join(args.outdir, "gradescope.zip")
    tmp = zpath + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        for root, dirs, files in os.walk(template):
            dirs[:] = sorted(d for d in dirs if d not in (".git", "build"))
            for f in sorted(files):
                full = os.path.join(root, f)
                rel = os.path.relpath(full, template)
                z.write(full, os.path.join("handout", rel))
    os.replace(tmp, zpath)
    here = os.path.dirname(os.path.abspath(__file__))
    shutil.copyfile(os.path.join(here, "classroom50-autograder.py"),
                    os.path.join(args.outdir, "autograder.py"))
    os.chmod(os.path.join(args.outdir, "autograder.py"), 0o755)
    print("gradescope: wrote %s (upload it as the assignment's autograder) and %s "
          "(Classroom 50's)" % (zpath, os.path.join(args.outdir, "autograder.py")))
    return 0


def main():
    p = argparse.ArgumentParser(prog="grade.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("binary")
    r.add_argument("outdir")
    r.add_argument("name", nargs="?")
    r.add_argument("--log")
    k = sub.add_parser("compile")
    k.add_argument("build")
    k.add_argument("outdir")
    k.add_argument("cc", nargs=argparse.REMAINDER)
    b = sub.add_parser("build-failed")
    b.add_argument("outdir")
    b.add_argument("log")
    b.add_argument("name", nargs="?")
    s = sub.add_parser("submission")
    s.add_argument("template")
    s.add_argument("submission")
    s.add_argument("outdir")
    s.add_argument("--student")
    s.add_argument("--metadata")
    c = sub.add_parser("class")
    c.add_argument("template")
    c.add_argument("students")
    c.add_argument("csv")
    g = sub.add_parser("gradescope")
    g.add_argument("template")
    g.add_argument("outdir")
    h = sub.add_parser("class-chapter")
    h.add_argument("students")
    args = p.parse_args()
    return {"run": cmd_run, "compile": cmd_compile, "build-failed": cmd_build_failed, "submission": cmd_submission,
            "class": cmd_class, "gradescope": cmd_gradescope,
            "class-chapter": cmd_class_chapter}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
