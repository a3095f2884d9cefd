#!/usr/bin/env python3
"""Runs one benchmark program in its short form and checks that it printed its figures.

A benchmark is not a timed test: this checks that the program runs to the end on this machine
and prints the rows the manual quotes (docs/performance.md), never what the numbers are.

    run_bench.py [--expect REGEX]... [--forbid REGEX]... [--timeout S] -- PROGRAM [ARG]...
    run_bench.py --self-test

The self-test runs the checker on small programs whose verdicts are known, so that a checker
that passes everything cannot go unnoticed.

Exit status: 0 when the program exited 0 and every --expect matched a line of its output and no
--forbid did; 77 when the program exited 77 (this machine cannot run it; its reason is printed);
1 otherwise, with the program's output and what was missing.
"""

import argparse
import re
import subprocess
import sys


def check(args: argparse.Namespace, command: list) -> int:
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as run:
        try:
            output = run.communicate(timeout=args.timeout)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            # SIGTERM first: the benchmarks remove their cgroups and files when they get it.
            run.terminate()
            try:
                output = run.communicate(timeout=30)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                run.kill()
                output = run.communicate()[0].decode(errors="replace")
            sys.stdout.write(output)
            print(f"run_bench: {command[0]} did not end within {args.timeout:.0f} s")
            return 1
    sys.stdout.write(output)
    if run.returncode == 77:
        print(f"run_bench: {command[0]} cannot run on this machine (exit 77); skipped")
        return 77
    problems = []
    if run.returncode != 0:
        problems.append(f"exited with status {run.returncode}")
    problems += [f"no line matches {p!r}" for p in args.expect
                 if not re.search(p, output, re.MULTILINE)]
    problems += [f"a line matches {p!r}: {m.group(0)!r}" for p in args.forbid
                 for m in [re.search(p, output, re.MULTILINE)] if m]
    for problem in problems:
        print(f"run_bench: {' '.join(command)}: {problem}")
    return 1 if problems else 0


def self_test() -> int:
    def program(text: str, status: int = 0) -> list:
        return [sys.executable, "-c", f"print({text!r}); raise SystemExit({status})"]
    cases = [  # (expect, forbid, program, the verdict it must get)
        (["^  row 1 +3 ms$"], [], program("head\n  row 1   3 ms"), 0),
        (["^  row 1 "], [], program("head\n  row 2   3 ms"), 1),
        ([], ["not measured"], program("  row 1: not measured (why)"), 1),
        (["^  row 1"], [], program("  row 1   3 ms", status=1), 1),
        (["^  row 1"], [], program("needs root", status=77), 77),
        (["^  row 1"], [], [sys.executable, "-c", "import time; print('  row 1'); time.sleep(60)"],
         1),
    ]
    failed = 0
    for expect, forbid, command, verdict in cases:
        sleeper = "time.sleep" in command[-1]  # killed at its timeout; the others end at once
        timeout = 2 if sleeper else 30
        got = check(argparse.Namespace(expect=expect, forbid=forbid, timeout=timeout), command)
        if got != verdict:
            print(f"run_bench self-test: {command[-1]!r} with expect={expect} forbid={forbid}: "
                  f"{got}, wanted {verdict}")
            failed += 1
    print(f"run_bench self-test: {len(cases) - failed} of {len(cases)} verdicts right")
    return 1 if failed else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", action="append", default=[], metavar="REGEX",
                        help="a line of the output must match this")
    parser.add_argument("--forbid", action="append", default=[], metavar="REGEX",
                        help="no line of the output may match this")
    parser.add_argument("--timeout", type=float, default=600, metavar="S",
                        help="seconds before the program is killed (default 600)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARG]...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program given after --")
    return check(args, command)


if __name__ == "__main__":
    sys.exit(main())
