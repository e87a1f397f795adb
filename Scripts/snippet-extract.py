#!/usr/bin/env python3
"""Turns the ```swift blocks of Markdown pages into one Swift file per page, for
Scripts/snippet-check.sh (which documents the conventions; CONTRIBUTING.md states them too).

    snippet-extract.py --root DIR --out PACKAGE_DIR [--apple] [--no-relay] [--prefixes DIR] PAGE.md...

Writes PACKAGE_DIR/Sources/<Target>/<Target>.swift for every page with a snippet to compile,
PACKAGE_DIR/targets.txt (one "<Target> <page>" line each) and prints one line per page:
"<page> <blocks> <compiled> <apple-only> <skipped>".

How a page becomes a file:
- Every ```swift block (at any indentation, e.g. inside DocC's @Column) is one snippet, in page
  order. The page is compiled as if it began with `import Subscriptions`.
- A block right after a line `<!-- snippet: apple-only -->` compiles only with --apple, which
  writes only the pages that have such a block (the others compile without it, on Linux); after
  `<!-- snippet: skip: REASON -->` a block never compiles (REASON is required).
- Without --no-relay, snippets that import SubscriptionsRedis compile; with it they are skipped.
- Lines at column 0 that start a declaration (import, an attribute, class, struct, enum, actor,
  protocol, extension, func, typealias, with any modifiers) and everything up to the end of that
  declaration stay at file scope, so types, extensions and topics are library code.
- Every other top-level line (let, var, expressions) is a statement. A page's statements run in
  one `@MainActor func … async throws`, the way a program's top-level code runs on the main actor;
  each snippet's statements sit in a scope nested inside the previous snippet's, so a snippet sees
  the names bound by earlier ones and may bind a name again. A name a snippet binds at its top
  level (`let x = …`, `var x = …`) stands for a program's global: it is kept alive to the end of
  the page (`withExtendedLifetime`), so an unused token binding is no warning, but an unbound
  `subscribe(…)` still is ("result unused").
- `#sourceLocation` points every line at the page, so diagnostics name the Markdown line.
- --prefixes DIR also writes each page cut short after its 1st, 2nd, … snippet (all but the whole
  page), which the check type-checks: file-scope declarations and imports are visible to the whole
  file, so only a shorter file shows a snippet that uses what a later one declares.
"""
import argparse
import os
import re
import sys

FENCE = re.compile(r"^(\s*)```swift\s*$")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$")
MODIFIERS = (
    r"(?:(?:public|internal|fileprivate|private|package|open|final|nonisolated|indirect"
    r"|static|mutating|convenience|required|override|isolated)\s+)*"
)
DECL = re.compile(
    r"^(?:import\s|@|" + MODIFIERS + r"(?:class|struct|enum|actor|protocol|extension|func|typealias)\b)"
)
BINDING = re.compile(r"^(?:let|var)\s+([A-Za-z_][A-Za-z0-9_]*)\b")


def blocks(lines):
    """Yields (first code line number, code lines, marker) for every ```swift block."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        marker = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0:
            mm = MARKER.match(lines[j])
            if mm:
                marker = mm.group(1)
        start = i + 1
        k = start
        while k < len(lines) and lines[k].strip() != "```":
            k += 1
        if k == len(lines):
            sys.exit(f"unterminated ```swift block at line {i + 1}")
        code = [line[indent:] if line[:indent].strip() == "" else line for line in lines[start:k]]
        yield start + 1, code, marker
        i = k + 1


def depth_change(line):
    """Net change of bracket depth on a line, ignoring string literals and // comments."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = line.split("//", 1)[0]
    return sum(line.count(c) for c in "{([") - sum(line.count(c) for c in "})]")


def items(code):
    """Splits a snippet into (is_declaration, first line index, lines) items at column 0."""
    result = []
    pending = []  # comments and blank lines: they go with the next item
    i = 0
    while i < len(code):
        line = code[i]
        if not line.strip() or line.lstrip().startswith("//"):
            pending.append(line)
            i += 1
            continue
        first = i - len(pending)
        body = pending + [line]
        pending = []
        is_decl = bool(DECL.match(line))
        depth = depth_change(line)
        i += 1
        # An attribute on its own line belongs to the declaration below it.
        while is_decl and line.startswith("@") and depth == 0 and i < len(code) and code[i].startswith("@"):
            line = code[i]
            body.append(line)
            depth += depth_change(line)
            i += 1
        if is_decl and re.fullmatch(r"@\w+(\(.*\))?", line.strip()) and i < len(code):
            line = code[i]
            body.append(line)
            depth += depth_change(line)
            i += 1
        while i < len(code):
            nxt = code[i]
            stripped = nxt.lstrip()
            continues = depth > 0 or (nxt[:1] in (" ", "\t") and stripped) or stripped[:1] in (".", "{", "}", ")", "]")
            if not continues:
                break
            body.append(nxt)
            depth += depth_change(nxt)
            i += 1
        result.append((is_decl, first, body))
    if pending and result:
        result[-1][2].extend(pending)
    return result


def location(page, line):
    return f'#sourceLocation(file: "{page}", line: {line})'


def page_file(page, lines, apple, relay):
    """Returns (the compiled snippets, each as (declarations, statement chunks, bound names), or
    None, counts)."""
    snippets = []
    counts = {"blocks": 0, "compiled": 0, "apple": 0, "skipped": 0}
    for first_line, code, marker in blocks(lines):
        counts["blocks"] += 1
        if marker is not None:
            if marker == "apple-only":
                counts["apple"] += 1
                if not apple:
                    continue
            elif marker.startswith("skip:") and marker[len("skip:"):].strip():
                counts["skipped"] += 1
                continue
            else:
                sys.exit(f"{page}:{first_line - 1}: unknown snippet marker '{marker}' "
                         "(apple-only, or skip: REASON)")
        if not relay and any(re.match(r"\s*import\s+SubscriptionsRedis\b", line) for line in code):
            counts["skipped"] += 1
            continue
        counts["compiled"] += 1
        decls, chunks, names = [], [], []
        for is_decl, index, body in items(code):
            text = location(page, first_line + index) + "\n" + "\n".join(body)
            if is_decl:
                decls.append(text)
            else:
                chunks.append(text)
                for line in body:
                    m = BINDING.match(line)
                    if m and m.group(1) != "_":
                        names.append(m.group(1))
        snippets.append((decls, chunks, names))
    if counts["compiled"] == 0 or (apple and counts["apple"] == 0):
        return None, counts
    return snippets, counts


def render(page, snippets):
    """The Swift file of a page's compiled snippets (or of the first few)."""
    out = ["// Generated by Scripts/snippet-extract.py from " + page + ": do not edit.", "import Subscriptions", ""]
    for decls, _, _ in snippets:
        out += [d + "\n#sourceLocation()\n" for d in decls]
    out.append("@MainActor func runSnippets() async throws {")
    closers = []
    for _, chunks, names in snippets:
        out.append("do {")
        out += [c + "\n#sourceLocation()" for c in chunks]
        keep = f"withExtendedLifetime(({', '.join(names)})) {{}}" if names else ""
        closers.append(keep)
    for keep in reversed(closers):
        if keep:
            out.append(keep)
        out.append("}")
    out.append("}")
    return "\n".join(out) + "\n"


def target_name(page):
    base = os.path.splitext(page)[0]
    return "Snippets_" + re.sub(r"[^A-Za-z0-9]+", "_", base).strip("_")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--apple", action="store_true")
    parser.add_argument("--no-relay", action="store_true")
    parser.add_argument("--prefixes", metavar="DIR",
                        help="also write DIR/<Target>-<n>.swift: the page's first n compiled snippets, "
                        "for every n short of all of them")
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    sources = os.path.join(args.out, "Sources")
    targets = []
    for page in args.pages:
        with open(os.path.join(args.root, page), encoding="utf-8") as f:
            lines = f.read().split("\n")
        snippets, counts = page_file(page, lines, args.apple, not args.no_relay)
        if args.apple and snippets is None:
            continue  # compiled without --apple
        print(page, counts["blocks"], counts["compiled"], counts["apple"], counts["skipped"])
        if snippets is None:
            continue
        source = render(page, snippets)
        name = target_name(page)
        if args.prefixes:
            os.makedirs(args.prefixes, exist_ok=True)
            for n in range(1, len(snippets)):
                with open(os.path.join(args.prefixes, f"{name}-{n}.swift"), "w", encoding="utf-8") as f:
                    f.write(render(page, snippets[:n]))
        folder = os.path.join(sources, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name + ".swift")
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != source:  # leave unchanged files alone: SwiftPM then skips them
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
        targets.append(f"{name} {page}")
    live = {line.split()[0] for line in targets}
    for name in os.listdir(sources) if os.path.isdir(sources) else []:
        if name not in live:  # a page that no longer has a snippet to compile
            for leftover in os.listdir(os.path.join(sources, name)):
                os.remove(os.path.join(sources, name, leftover))
            os.rmdir(os.path.join(sources, name))
    with open(os.path.join(args.out, "targets.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(targets) + "\n")


if __name__ == "__main__":
    main()
