#!/usr/bin/env python3
"""Checks the links of the repository's Markdown documents.

    check_links.py SOURCE_ROOT [FILE...]
    check_links.py --self-test

Every relative link and image (`[text](path)`, `![alt](path)`, `[label]: path`, HTML `href`
and `src`) must name a file or folder that exists inside SOURCE_ROOT, and every `#anchor` must
match a heading of the Markdown file it points into (GitHub's slugs: lower case, punctuation
dropped, spaces as hyphens, `-1`, `-2` … for repeated headings) or an HTML `id`/`name`. A
document must not point outside the repository: no absolute paths, no `file:` URLs, no
relative path that climbs out of SOURCE_ROOT. Links on the web (`https:`, `mailto:`) are not
fetched. Code (fenced blocks and `inline spans`) is skipped.

No file of the repository — code comments, scripts, manifests and documents alike — names a
document that is not in it: no mention of the design folder the project was written from
(`../shared`, `shared/design`, its `CONTRACT §N`); a document named bare (`ARCHITECTURE.md`)
is at the repository's root or beside the file naming it; one named by its path from the root
(`docs/reference.md`, whose first folder is one of the root's) exists.

Without FILE, every `*.md` below SOURCE_ROOT is checked, and every text file for mentions,
except in `.git` and in meson build directories (any folder holding `meson-private`). Prints
one line per problem, `FILE:LINE: TARGET: what is wrong`, and exits 1 if there is any, else 0.
"""

import os
import re
import sys
import tempfile
import urllib.parse

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:\s+(.*?))?\s*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)\s*$")
INLINE_LINK = re.compile(r"\]\(\s*(?:<([^>]*)>|([^)\s]+))")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(?:<([^>]*)>|(\S+))")
HTML_ATTRIBUTE = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"""<a\b[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# The design folder the project was written from, outside the repository.
OUTSIDE_MENTIONS = ("../shared", "/work/shared", "shared/design", "shared/reference",
                    "CONTRACT §", "CONTRACT.md")
# A document named bare (STYLE.md, ARCHITECTURE.md), or by a path (docs/reference.md).
BARE_DOCUMENT = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_-]*\.md)\b")
DOCUMENT_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.md)\b")
# Files the mention check reads: text up to this size (a larger or binary file is skipped).
MENTION_FILE_LIMIT = 2 << 20
# This checker names what it forbids.
SELF = os.path.realpath(__file__)


def strip_code_spans(line):
    """The line with every `code span` blanked out (any number of backticks)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            j = i
            while j < len(line) and line[j] == "`":
                j += 1
            ticks = line[i:j]
            end = line.find(ticks, j)
            if end < 0:  # an unmatched run is literal text
                out.append(ticks)
                i = j
                continue
            out.append(" " * (end + len(ticks) - i))
            i = end + len(ticks)
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def prose_lines(text):
    """(line number, line) for every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                and line.strip() == match.group(1):
            fence = None


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags go
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text):
    """The anchors a document defines: its headings' slugs and its HTML ids."""
    found, seen = set(), {}
    previous = ""
    for _, line in prose_lines(text):
        names = [m.group(1) for m in HTML_ANCHOR.finditer(line)]
        heading = None
        match = ATX_HEADING.match(line)
        if match:
            heading = re.sub(r"\s+#+\s*$", "", match.group(2) or "")
        elif SETEXT_UNDERLINE.match(line) and previous.strip() \
                and not re.match(r"^\s*([|>*+-]|\d+\.)", previous):
            heading = previous.strip()
        if heading is not None:
            base = slug(heading)
            count = seen.get(base, 0)
            seen[base] = count + 1
            names.append(base if count == 0 else f"{base}-{count}")
        found.update(names)
        previous = line
    return found


def targets(text):
    """(line number, target) for every link, image, reference definition and HTML href/src."""
    for number, line in prose_lines(text):
        prose = strip_code_spans(line)
        for match in INLINE_LINK.finditer(prose):
            yield number, match.group(1) if match.group(1) is not None else match.group(2)
        match = REFERENCE_DEFINITION.match(prose)
        if match:
            yield number, match.group(1) if match.group(1) is not None else match.group(2)
        for match in HTML_ATTRIBUTE.finditer(prose):
            yield number, match.group(1)


class Checker:
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.anchor_cache = {}
        self.problems = []
        self.links = 0
        self.mention_files = 0
        self.folders = None

    def anchors_of(self, path):
        if path not in self.anchor_cache:
            with open(path, encoding="utf-8") as f:
                self.anchor_cache[path] = anchors(f.read())
        return self.anchor_cache[path]

    def report(self, path, number, target, what):
        self.problems.append((os.path.relpath(path, self.root), number, target, what))

    def check_file(self, path):
        path = os.path.realpath(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        first = len(self.problems)
        self.check_mentions(path, text, markdown=True)
        for number, target in targets(text):
            self.links += 1
            self.check_target(path, number, target)
        # In the order of the file's lines.
        self.problems[first:] = sorted(self.problems[first:], key=lambda p: p[1])

    def check_mentions(self, path, text, markdown=False):
        """The documents a file names in its text (comments, prose) are in the repository.
        In Markdown, link targets are left to check_target."""
        if path == SELF:
            return
        self.mention_files += 1
        top_folders = self.top_folders()
        for number, line in enumerate(text.splitlines(), 1):
            for mention in OUTSIDE_MENTIONS:
                if mention in line:
                    self.report(path, number, mention, "points outside the repository")
            if markdown:
                if REFERENCE_DEFINITION.match(line):
                    continue
                line = HTML_ATTRIBUTE.sub("", INLINE_LINK.sub("](", line))
            for match in BARE_DOCUMENT.finditer(line):
                name = match.group(1)
                if not os.path.isfile(os.path.join(self.root, name)) and \
                        not os.path.isfile(os.path.join(os.path.dirname(path), name)):
                    self.report(path, number, name,
                                "names a document that is not in the repository")
            for match in DOCUMENT_PATH.finditer(line):
                name = match.group(1)
                if name.split("/")[0] in top_folders and \
                        not os.path.isfile(os.path.join(self.root, name)):
                    self.report(path, number, name,
                                "names a document that is not in the repository")

    def top_folders(self):
        if self.folders is None:
            self.folders = {d for d in os.listdir(self.root)
                            if os.path.isdir(os.path.join(self.root, d)) and d != ".git"}
        return self.folders

    def check_text_file(self, path):
        """The mention check alone, for a file that is not Markdown."""
        path = os.path.realpath(path)
        try:
            if os.path.getsize(path) > MENTION_FILE_LIMIT:
                return
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return
        if b"\0" in data:
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return
        first = len(self.problems)
        self.check_mentions(path, text)
        self.problems[first:] = sorted(self.problems[first:], key=lambda p: p[1])

    def check_target(self, path, number, target):
        if not target:
            self.report(path, number, "(empty)", "empty link")
            return
        if SCHEME.match(target):
            if target.lower().startswith(("http:", "https:", "mailto:")):
                return  # on the web: not fetched
            self.report(path, number, target, "points outside the repository")
            return
        location, _, anchor = target.partition("#")
        location = urllib.parse.unquote(location)
        if location.startswith("/") or location.startswith("~"):
            self.report(path, number, target,
                        "an absolute path: link relative to this file instead")
            return
        resolved = os.path.realpath(os.path.join(os.path.dirname(path), location)) \
            if location else path
        if os.path.commonpath([resolved, self.root]) != self.root:
            self.report(path, number, target, "points outside the repository")
            return
        if not os.path.exists(resolved):
            self.report(path, number, target, "no such file or folder")
            return
        if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            if urllib.parse.unquote(anchor) not in self.anchors_of(resolved):
                where = "this file" if resolved == path else os.path.relpath(resolved, self.root)
                self.report(path, number, target, f"no heading in {where} has the anchor #{anchor}")


def describe(problem):
    path, number, target, what = problem
    return f"{path}:{number}: {target}: {what}"


def repository_files(root):
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            d for d in subdirectories
            if d != ".git" and not os.path.isdir(os.path.join(directory, d, "meson-private")))
        for name in sorted(files):
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                yield path


def check(root, files):
    checker = Checker(root)
    for path in files or list(repository_files(checker.root)):
        if path.endswith(".md"):
            checker.check_file(path)
        else:
            checker.check_text_file(path)
    return checker


SELF_TEST_FILES = {
    "README.md": """# Title
## Quick start
## Quick start
### 1.3 `nodewarden agent` — the node (§1)
[fine](docs/guide.md) [fine](docs/guide.md#the-guide) ![fine](docs/picture.svg) [fine](docs/)
[fine](#quick-start) [fine](#quick-start-1) [fine](#13-nodewarden-agent--the-node-1)
[fine](https://example.com/x.md#nowhere) [fine](docs/guide.md#made-by-hand)
[missing](docs/nothere.md) [bad anchor](#quick-stat) [bad anchor](docs/guide.md#nowhere)
[outside](../outside.md) [absolute](/etc/passwd) [file](file:///etc/passwd)
See ../shared/notes.md for more.
`[in code](nothere.md)` ``[in code](nothere.md)``
```
[in a fence](nothere.md)
```
[label]: docs/missing.svg
<img src="docs/picture.svg"> <a href="docs/gone.md">x</a>
""",
    "docs/guide.md": """The guide
=========
<a id="made-by-hand"></a>
[up](../README.md#title) [up](../README.md#no-such)
""",
    "docs/picture.svg": "<svg/>",
    "ARCHITECTURE.md": "# Rooms\n",
    "src/thing.cpp": """// Rooms: ARCHITECTURE.md; the manual: docs/guide.md (both in the repository).
// As STYLE.md and CONTRACT §4 say; see docs/gone.md. Installed as usr/share/doc/x/README.md.
// ../../shared/design/notes.txt
""",
    "src/picture.png": "\0PNG STYLE.md",
}

SELF_TEST_EXPECTED = [
    "README.md:8: docs/nothere.md: no such file or folder",
    "README.md:8: #quick-stat: no heading in this file has the anchor #quick-stat",
    "README.md:8: docs/guide.md#nowhere: no heading in docs/guide.md has the anchor #nowhere",
    "README.md:9: ../outside.md: points outside the repository",
    "README.md:9: /etc/passwd: an absolute path: link relative to this file instead",
    "README.md:9: file:///etc/passwd: points outside the repository",
    "README.md:10: ../shared: points outside the repository",
    "README.md:15: docs/missing.svg: no such file or folder",
    "README.md:16: docs/gone.md: no such file or folder",
    "docs/guide.md:4: ../README.md#no-such: no heading in README.md has the anchor #no-such",
    "src/thing.cpp:2: CONTRACT §: points outside the repository",
    "src/thing.cpp:2: STYLE.md: names a document that is not in the repository",
    "src/thing.cpp:2: docs/gone.md: names a document that is not in the repository",
    "src/thing.cpp:3: ../shared: points outside the repository",
    "src/thing.cpp:3: shared/design: points outside the repository",
]


def self_test():
    """The checker against a tree with known good and bad links: it must find exactly the bad."""
    with tempfile.TemporaryDirectory() as parent:
        root = os.path.join(parent, "repo")
        for name, text in SELF_TEST_FILES.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        open(os.path.join(parent, "outside.md"), "w").close()  # exists, but outside
        found = [describe(p) for p in check(root, []).problems]
    if found != SELF_TEST_EXPECTED:
        print("self-test: expected", *SELF_TEST_EXPECTED, "found", *found, sep="\n  ")
        return 1
    print(f"self-test: the {len(found)} broken links found, and only those")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    checker = check(argv[1], argv[2:])
    for problem in checker.problems:
        print(describe(problem))
    print(f"{checker.links} links checked, {checker.mention_files} files read for the documents "
          f"they name, {len(checker.problems)} problems")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
