#!/usr/bin/env python3
"""The C++ sources are formatted as .clang-format says.

    check_format.py ROOT        every tracked *.cpp/*.h under ROOT, checked in place
    check_format.py --self-test the checker on a tree with one badly formatted file

Exits 0 when every file is formatted, 1 naming each file that is not (with the command that
fixes it), and 77 when clang-format is absent or not the major version the tree is formatted
with: formatting differs between majors, and a check that cannot be trusted must not pass or
fail silently.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The tree is formatted with Debian bookworm's clang-format.
EXPECTED_MAJOR = 14
SUFFIXES = ('.cpp', '.h', '.hpp', '.cc')
SKIP_DIRS = {'.git', 'build', 'subprojects'}


def clang_format():
    exe = shutil.which('clang-format')
    if exe is None:
        print('SKIP: clang-format is not installed (./dev installs it: apt-get install clang-format)')
        sys.exit(77)
    out = subprocess.run([exe, '--version'], capture_output=True, text=True).stdout
    m = re.search(r'version (\d+)\.', out)
    if not m or int(m.group(1)) != EXPECTED_MAJOR:
        print(f'SKIP: the tree is formatted with clang-format {EXPECTED_MAJOR}; '
              f'found "{out.strip()}", whose output differs')
        sys.exit(77)
    return exe


def sources(root):
    """Tracked files when ROOT is a git checkout, else every source outside build trees."""
    if os.path.isdir(os.path.join(root, '.git')) or os.path.isfile(os.path.join(root, '.git')):
        r = subprocess.run(['git', '-C', root, 'ls-files', '-z'], capture_output=True)
        if r.returncode == 0:
            names = [n for n in r.stdout.decode().split('\0') if n.endswith(SUFFIXES)]
            return sorted(os.path.join(root, n) for n in names
                          if os.path.exists(os.path.join(root, n)))
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith('build')]
        found += [os.path.join(d, f) for f in files if f.endswith(SUFFIXES)]
    return sorted(found)


def unformatted(exe, files):
    bad = []
    for i in range(0, len(files), 64):
        batch = files[i:i + 64]
        r = subprocess.run([exe, '--dry-run', '--Werror', *batch], capture_output=True, text=True)
        if r.returncode != 0:
            # Re-check one by one only in a failing batch, to name the files exactly.
            for f in batch:
                if subprocess.run([exe, '--dry-run', '--Werror', f],
                                  capture_output=True).returncode != 0:
                    bad.append(f)
    return bad


def check(root):
    exe = clang_format()
    files = sources(root)
    if not files:
        print(f'FAIL: no C++ sources found under {root}')
        return 1
    bad = unformatted(exe, files)
    for f in bad:
        print(f'not formatted: {os.path.relpath(f, root)}')
    if bad:
        print(f'{len(bad)} of {len(files)} files differ from .clang-format; fix with: '
              f'clang-format -i {" ".join(os.path.relpath(f, root) for f in bad[:5])}'
              f'{" ..." if len(bad) > 5 else ""}')
        return 1
    print(f'{len(files)} files formatted as .clang-format says')
    return 0


def self_test():
    exe = clang_format()
    here = os.path.dirname(os.path.abspath(__file__))
    style = os.path.join(here, '..', '..', '.clang-format')
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(style, os.path.join(tmp, '.clang-format'))
        good = os.path.join(tmp, 'good.cpp')
        with open(good, 'w') as f:
            f.write('int add(int a, int b) {\n  return a + b;\n}\n')
        if unformatted(exe, [good]):
            print('FAIL: a formatted file was reported')
            return 1
        bad = os.path.join(tmp, 'bad.cpp')
        with open(bad, 'w') as f:
            f.write('int   add(int a,int b){\nreturn a+b;}\n')
        if unformatted(exe, [good, bad]) != [bad]:
            print('FAIL: the badly formatted file was not the one reported')
            return 1
        if check(tmp) != 1:
            print('FAIL: a tree with a badly formatted file passed')
            return 1
    print('self-test: the checker finds a badly formatted file and passes a formatted one')
    return 0


if __name__ == '__main__':
    if sys.argv[1:] == ['--self-test']:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(check(sys.argv[1]))
