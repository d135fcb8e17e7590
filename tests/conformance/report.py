#!/usr/bin/env python3
"""Judge and summarise conformance results (the checks.json files the suite writes).

  report.py check RESULTS EXPECTED REQUIREMENTS
      Fails (exit 1) on a failure EXPECTED does not list, on an EXPECTED entry that now passes,
      on an entry without a reason, and on a scenario REQUIREMENTS names that left no results.
      Unlike the harness's own --expected-failures, this covers the unscored scenarios too.
  report.py selftest
      Proves `check` fails on each of those cases and passes on an exact list (CI runs it).
  report.py readme [--write README.md] RESULTS_2026 RESULTS_2025
      Prints (or writes between the README's conformance markers) the Conformance table.

RESULTS is what `run.sh REVISION` fills: RESULTS/<scenario>-<time>/checks.json, and
RESULTS/requirements.yaml, the requirement set of the run. EXPECTED is
the harness's expected-failures format: a `client:` list of '<scenario>' (the whole scenario
fails) or '<scenario>:<check-id>', each with a comment naming what removes it: 'issue N' or
'bug:'. A check fails when its status is FAILURE or WARNING, as the harness counts it.
Python 3 standard library only.
"""

import json
import os
import re
import sys

# The reference TypeScript SDK v2 client (everythingClient.ts, @modelcontextprotocol/client
# 2.4.0) on the same suite and machine kind: checks passed / failed per requirement set, all
# failures in unscored extensions (shared conformance README, "Reference").
REFERENCE = {"2026-07-28": (425, 9), "2025-11-25": (281, 9)}
REVISIONS = ("2026-07-28", "2025-11-25")
BAD = ("FAILURE", "WARNING")
STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
BEGIN, END = "<!-- conformance:begin -->", "<!-- conformance:end -->"


def load_results(results):
    """{scenario: [check, ...]} from every checks.json under RESULTS."""
    out = {}
    for root, _, files in os.walk(results):
        if "checks.json" not in files:
            continue
        name = STAMP.sub("", os.path.relpath(root, results).replace(os.sep, "/"))
        with open(os.path.join(root, "checks.json"), encoding="utf-8") as f:
            out[name] = json.load(f)
    return out


def load_expected(path):
    """[(entry, reason)] from the `client:` list of an expected-failures file."""
    entries, section = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            text, _, comment = line.partition("#")
            if not text.strip():
                continue
            top = re.match(r"^(\w+):\s*(\[\])?\s*$", text)
            if top:
                section = top.group(1)
                continue
            item = re.match(r"^\s+-\s+['\"]?([^'\"\s]+)['\"]?\s*$", text)
            if not item or section not in ("client", "server"):
                sys.exit(f"{path}:{n}: not a list entry under client: or server:")
            if section == "client":
                entries.append((item.group(1), comment.strip(), n))
    return entries


def required_scenarios(path):
    """Client scenarios a requirements YAML runs: `client:` plus not_scored with leg client."""
    scored, unscored, section, pending = [], [], None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].rstrip()
            if re.match(r"^\w", line):
                section = line.rstrip(":")
                continue
            m = re.match(r"^\s+-\s+(?:scenario:\s*)?(\S+)$", line)
            if m and section == "client":
                scored.append(m.group(1))
            elif m and section == "not_scored":
                pending = m.group(1)
            elif section == "not_scored" and re.match(r"^\s+leg:\s*client$", line) and pending:
                unscored.append(pending)
    return scored, unscored


def counts(checks):
    ok = sum(c["status"] == "SUCCESS" for c in checks)
    failed = sum(c["status"] == "FAILURE" for c in checks)
    warned = sum(c["status"] == "WARNING" for c in checks)
    return ok, failed, warned


def failing_ids(checks):
    return {c["id"] for c in checks if c["status"] in BAD}


def check(results_dir, expected_path, requirements_path):
    results = load_results(results_dir)
    expected = load_expected(expected_path)
    scored, unscored = required_scenarios(requirements_path)
    problems = []

    whole = {e for e, _, _ in expected if ":" not in e}
    per_check = {}
    for entry, reason, line in expected:
        if not re.search(r"\bissue \d+|^bug:|^extension", reason):
            problems.append(f"{expected_path}:{line}: '{entry}' names no 'issue N', 'bug:' "
                            "or 'extension'")
        if ":" in entry:
            scenario, check_id = entry.split(":", 1)
            per_check.setdefault(scenario, set()).add(check_id)
            if scenario in whole:
                problems.append(f"'{entry}' is redundant: the whole scenario is listed")
        if entry.split(":", 1)[0] not in results:
            problems.append(f"'{entry}': the scenario did not run (no checks.json)")

    if not scored:
        problems.append(f"{requirements_path}: no client scenarios found (format changed?)")
    for name in scored + unscored:
        if name not in results:
            problems.append(f"{name}: required by the run but left no checks.json")

    print(f"{'scenario':<44} {'scored':<6} {'pass':>4} {'fail':>4} {'warn':>4}  verdict")
    for name in sorted(results, key=lambda s: (s.startswith("auth/"), s)):
        checks = results[name]
        ok, failed, warned = counts(checks)
        bad = failing_ids(checks)
        if name in whole:
            verdict = "expected failure" if bad else "STALE: passes now, remove the entry"
            if not bad:
                problems.append(f"{name}: listed as failing but passes; remove its entry")
        else:
            listed = per_check.get(name, set())
            new = sorted(bad - listed)
            stale = sorted(listed - bad)
            problems += [f"{name}:{c}: new failure" for c in new]
            problems += [f"{name}:{c}: listed as failing but passes; remove it" for c in stale]
            verdict = "; ".join(
                ([f"NEW FAILURE {', '.join(new)}"] if new else [])
                + ([f"STALE {', '.join(stale)}"] if stale else [])
                + (["expected failure"] if bad and not new else [])
            ) or "pass"
        tag = "yes" if name in scored else "no"
        print(f"{name:<44} {tag:<6} {ok:>4} {failed:>4} {warned:>4}  {verdict}")

    totals = [sum(x) for x in zip(*(counts(c) for c in results.values()))] or [0, 0, 0]
    print(f"total: {totals[0]} checks passed, {totals[1]} failed, {totals[2]} warnings "
          f"in {len(results)} scenarios")
    if problems:
        print("\nconformance check FAILED:", *problems, sep="\n  ")
        return 1
    print("conformance check passed: the failures are exactly the expected ones")
    return 0


def cell(checks):
    if checks is None:
        return "–"
    ok, failed, warned = counts(checks)
    mark = "pass" if failed + warned == 0 else "**fail**"
    extra = f", {warned} warn" if warned else ""
    return f"{mark} ({ok} / {failed}{extra})"


def group_cell(runs):
    if not runs:
        return "–"
    passed = sum(1 for c in runs if not failing_ids(c))
    ok, failed, warned = (sum(x) for x in zip(*(counts(c) for c in runs)))
    extra = f", {warned} warn" if warned else ""
    return f"{passed} of {len(runs)} pass ({ok} / {failed}{extra})"


def readme(runs):
    """runs: {revision: (results, scored scenario names)}."""
    names = sorted({n for r, _ in runs.values() for n in r if not n.startswith("auth/")})
    unscored = {n for n in names if all(n not in s for r, s in runs.values() if n in r)}
    ext = {"auth/client-credentials-jwt", "auth/client-credentials-basic",
           "auth/enterprise-managed-authorization", "auth/dpop", "auth/dpop-nonce",
           "auth/wif-jwt-bearer"}
    lines = [
        BEGIN,
        "Made by `tests/conformance/report.py readme` from the last run of each requirement set.",
        "Cells: scenario verdict (checks passed / failed). A scenario passes when none of its",
        "checks fails or warns.",
        "",
        "| scenario | " + " | ".join(REVISIONS) + " |",
        "| --- | " + " | ".join("---" for _ in REVISIONS) + " |",
    ]
    for n in names:
        label = f"`{n}`" + (" (unscored)" if n in unscored else "")
        lines.append(f"| {label} | " + " | ".join(cell(runs[r][0].get(n)) for r in REVISIONS)
                     + " |")
    for label, pick in (("`auth/*` (OAuth)", lambda n: n not in ext),
                        ("`auth/*` extensions (unscored)", lambda n: n in ext)):
        row = [group_cell([c for n, c in runs[r][0].items()
                           if n.startswith("auth/") and pick(n)]) for r in REVISIONS]
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    scored, total = [], []
    for r in REVISIONS:
        results, required = runs[r]
        passed = sum(1 for n in required if n in results and not failing_ids(results[n]))
        scored.append(f"{passed} of {len(required)}")
        ok, failed, warned = (sum(x) for x in zip(*(counts(c) for c in results.values())))
        total.append(f"{ok} / {failed}" + (f" + {warned} warn" if warned else ""))
    lines.append("| **scored scenarios passed, mcpoll** | " + " | ".join(scored) + " |")
    lines.append("| **checks passed / failed, mcpoll** | " + " | ".join(total) + " |")
    lines.append("| scored scenarios passed, TypeScript SDK client | "
                 + " | ".join(f"all {len(runs[r][1])}" for r in REVISIONS) + " |")
    lines.append("| checks passed / failed, TypeScript SDK client | "
                 + " | ".join(f"{REFERENCE[r][0]} / {REFERENCE[r][1]}" for r in REVISIONS) + " |")
    lines.append(END)
    return "\n".join(lines)


def selftest():
    """`check` on synthetic results: each broken expected-failures list must fail."""
    import contextlib
    import io
    import tempfile

    def status(ok):
        return {"id": "x", "name": "x", "status": "SUCCESS" if ok else "FAILURE"}

    with tempfile.TemporaryDirectory() as tmp:
        results = {"good": [status(True)], "bad": [status(False)],
                   "auth/half": [status(True), dict(status(False), id="y")]}
        for name, checks in results.items():
            os.makedirs(os.path.join(tmp, "r", name + "-2026-01-01T00-00-00-000Z"))
            with open(os.path.join(tmp, "r", name + "-2026-01-01T00-00-00-000Z",
                                   "checks.json"), "w", encoding="utf-8") as f:
                json.dump(checks, f)
        req = os.path.join(tmp, "req.yaml")
        with open(req, "w", encoding="utf-8") as f:
            f.write("server:\n  - s\nclient:\n  - good\n  - bad\n  - auth/half\n"
                    "not_scored:\n  - scenario: other\n    leg: server\n    reason: pending\n")
        exact = "client:\n  - bad  # issue 1\n  - auth/half:y  # bug: why\n"
        cases = {
            "exact": (exact, 0),
            "new failure": ("client:\n  - bad  # issue 1\n", 1),
            "stale scenario": (exact + "  - good  # issue 2\n", 1),
            "stale check": (exact + "  - auth/half:x  # issue 2\n", 1),
            "no reason": ("client:\n  - bad  # later\n  - auth/half:y  # bug: why\n", 1),
            "did not run": (exact + "  - gone  # issue 3\n", 1),
        }
        wrong = []
        for label, (text, want) in cases.items():
            path = os.path.join(tmp, "expected.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            with contextlib.redirect_stdout(io.StringIO()):
                got = check(os.path.join(tmp, "r"), path, req)
            if got != want:
                wrong.append(f"{label}: exit {got}, want {want}")
        # A scenario the requirement set names must have run.
        with open(req, "a", encoding="utf-8") as f:
            f.write("  - scenario: missing\n    leg: client\n    reason: extension\n")
        with open(os.path.join(tmp, "expected.yaml"), "w", encoding="utf-8") as f:
            f.write(exact)
        with contextlib.redirect_stdout(io.StringIO()):
            if check(os.path.join(tmp, "r"), os.path.join(tmp, "expected.yaml"), req) != 1:
                wrong.append("missing unscored scenario: passed")
    if wrong:
        print("report.py selftest FAILED:", *wrong, sep="\n  ")
        return 1
    print(f"report.py selftest: {len(cases) + 1} cases ok")
    return 0


def main(argv):
    if argv == ["selftest"]:
        return selftest()
    if len(argv) == 4 and argv[0] == "check":
        return check(*argv[1:])
    if argv and argv[0] == "readme":
        args = argv[1:]
        target = None
        if args[:1] == ["--write"]:
            target, args = args[1], args[2:]
        if len(args) != 2:
            sys.exit(__doc__)
        runs = {}
        for r, d in zip(REVISIONS, args):
            # run.sh keeps the requirement set beside the results it judged.
            runs[r] = (load_results(d), required_scenarios(os.path.join(d, "requirements.yaml"))[0])
        section = readme(runs)
        if target is None:
            print(section)
            return 0
        with open(target, encoding="utf-8") as f:
            text = f.read()
        if BEGIN not in text or END not in text:
            sys.exit(f"{target}: no {BEGIN} ... {END} markers")
        head, rest = text.split(BEGIN, 1)
        with open(target, "w", encoding="utf-8") as f:
            f.write(head + section + rest.split(END, 1)[1])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
