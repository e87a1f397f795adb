#!/usr/bin/env python3
"""Checks that the cross-references of the docs and comments resolve.

Two kinds of reference, in the prose of the checkout: Markdown outside code blocks, and the
comments of Swift, C, Promela, shell and Python files (not their code, where `"App/A.swift"` is a
test's made-up call site; not `.build`; not `CHANGELOG.md`, whose entries name files as they were
then):

- A file named by path or name (`Engine/Core/Route.swift`, `Route+Locked.swift`, `shims.c`):
  some file of the checkout must end with that path. So a file that moves or splits fails every
  mention that still names its old place.
- A section of the engine's design note or of the model's README named in quotes after the file
  (`DESIGN.md, "Fence mode selection"`, `DESIGN.md "Post"`, `DESIGN.md's "Cycles"`): the file
  must have a heading with that title (a title that begins with the quoted words counts, so
  `"Grace periods"` finds "Grace periods (retired tables and buffers)").

And the design note's map: every Swift file under `Sources/Subscriptions/Engine/` has a row in a
table of DESIGN.md (its first cell names the file by its path below `Engine/`, or below the
folder the table is about), and every row names exactly one file.

Names that stand for no file of ours (a user's `Screen.swift` in an example, a generated
`main.swift`) are listed in EXAMPLES below. Prints each broken reference as `file:line: …` and
exits 1 if there is any.

Usage: Scripts/check-references.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCANNED = ('.md', '.swift', '.h', '.c', '.pml', '.sh', '.py')
SKIPPED_DIRS = {'.build', '.git', '.swiftpm'}
SKIPPED_FILES = {'CHANGELOG.md'}
# Names that are not files of this checkout: a user's code in examples, system headers, the
# verifier Spin generates.
EXAMPLES = {'Screen.swift', 'Login.swift', 'File.swift', 'LoginTests.swift', 'App.swift', 'main.swift',
            'Tests.swift', 'malloc.h', 'stdatomic.h', 'pan.c'}
# Folders of made-up call sites in examples (`App/Screen.swift:12`).
EXAMPLE_FOLDERS = ('App/', 'Module/', 'Tests/BatteryTests.swift')
FILE_REF = re.compile(r'(?<![\w+./-])((?:[\w+-]+/)*[\w+-]+\.(?:swift|c|h|pml))\b')
SECTION_REF = re.compile(r'\b(DESIGN\.md|Model/README\.md)(?:,|\'s)?\s+"([^"]+)"')
HEADING = re.compile(r'^#+\s+(.*?)\s*$')


def checkout_files():
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith('.')]
        for name in names:
            yield os.path.relpath(os.path.join(folder, name), ROOT)


def headings(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return [m.group(1).replace('`', '') for line in f if (m := HEADING.match(line))]


def prose(path, lines):
    """The numbered lines of `path` that are prose: outside fenced blocks in Markdown, comment
    lines elsewhere (a line whose text starts a comment, or the comment after code)."""
    fenced = False
    for number, line in enumerate(lines, 1):
        if path.endswith('.md'):
            if line.lstrip().startswith('```'):
                fenced = not fenced
            elif not fenced:
                yield number, line
            continue
        text = line.strip()
        markers = ('#',) if path.endswith(('.sh', '.py')) else ('//', '/*', '*')
        if text.startswith(markers):
            yield number, line
        elif not path.endswith(('.sh', '.py')) and '//' in line and '"' not in line.split('//', 1)[0]:
            yield number, '//' + line.split('//', 1)[1]


def unmapped_engine_files():
    """The engine files DESIGN.md's map leaves out, and the map's rows that name no file or
    several."""
    engine = 'Sources/Subscriptions/Engine'
    design = os.path.join(ROOT, engine, 'DESIGN.md')
    rows = []
    with open(design, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if m := re.match(r'^\| `([\w+/.-]+\.swift)` \|', line):
                rows.append((number, m.group(1)))
    files = sorted(
        os.path.relpath(os.path.join(folder, name), os.path.join(ROOT, engine))
        for folder, _, names in os.walk(os.path.join(ROOT, engine))
        for name in names
        if name.endswith('.swift'))
    problems = []
    named = set()
    for number, row in rows:
        hits = [f for f in files if f == row or f.endswith('/' + row)]
        if len(hits) != 1:
            problems.append(f'{engine}/DESIGN.md:{number}: the map row {row} names {len(hits)} files')
        named.update(hits)
    for path in files:
        if path not in named:
            problems.append(f'{engine}/DESIGN.md: the map has no row for {path}')
    return problems


def main():
    files = sorted(checkout_files())
    suffixes = set()
    for path in files:
        parts = path.split(os.sep)
        for i in range(len(parts)):
            suffixes.add('/'.join(parts[i:]))
    sections = {
        'DESIGN.md': headings('Sources/Subscriptions/Engine/DESIGN.md'),
        'Model/README.md': headings('Model/README.md'),
    }
    broken = []
    for path in files:
        if not path.endswith(SCANNED) or os.path.basename(path) in SKIPPED_FILES:
            continue
        if path == os.path.relpath(os.path.abspath(__file__), ROOT):
            continue
        with open(os.path.join(ROOT, path), encoding='utf-8', errors='replace') as f:
            for number, line in prose(path, f):
                for ref in FILE_REF.findall(line):
                    if ref in EXAMPLES or ref.startswith(EXAMPLE_FOLDERS) or ref in suffixes:
                        continue
                    broken.append(f'{path}:{number}: no file ends with {ref}')
                for document, title in SECTION_REF.findall(line):
                    if not any(h == title or h.startswith(title + ' ') for h in sections[document]):
                        broken.append(f'{path}:{number}: {document} has no section "{title}"')
    broken += unmapped_engine_files()
    for line in broken:
        print(line)
    if broken:
        print(f'{len(broken)} broken references', file=sys.stderr)
        return 1
    print('every file and section reference resolves; the engine map lists every engine file')
    return 0


if __name__ == '__main__':
    sys.exit(main())
