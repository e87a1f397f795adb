#!/usr/bin/env python3
"""Lists the public symbols of a module that have no doc comment of their own; exits 1 if any.

Usage: check-doc-comments.py SYMBOL_GRAPH_DIR MODULE

Reads every `MODULE.symbols.json` and `MODULE@Other.symbols.json` (extensions of other
modules' types, e.g. `NotificationCenter`) in SYMBOL_GRAPH_DIR, as written by
`swift-symbolgraph-extract -minimum-access-level public`.

A symbol must carry its own `///` comment when all of these hold:
  - its access level is `public` or `open`;
  - it is declared in this module's sources: it has a source `location`, and its identifier is
    not `::SYNTHESIZED::` (synthesized symbols are copies of protocol-extension members, such as
    Equatable's `!=`, AsyncSequence's `map`, or a default implementation from one of our own
    protocols, which is checked where it is written);
  - it is not an extension block (`swift.extension`), and no component of its path starts with
    `_` (DocC hides underscored symbols, like the compiler's own convention for internals).

A comment counts only when it was written in this module (`docComment.module == MODULE`) and is
not blank: the compiler fills in documentation inherited from a protocol requirement (for
example an undocumented `hash(into:)` gets `Hashable`'s text), which says nothing about this
type's threading or lifetime semantics, so inherited text does not count.
"""

import glob
import json
import os
import sys
import urllib.parse
import urllib.request


def location_of(symbol):
    """(path, line) of the declaration, the path relative to the current directory when possible."""
    loc = symbol.get("location") or {}
    uri = loc.get("uri", "")
    path = urllib.request.url2pathname(urllib.parse.urlparse(uri).path) if uri else "?"
    if path != "?":
        try:
            path = os.path.relpath(path)
        except ValueError:
            pass
    line = loc.get("position", {}).get("line", -1) + 1  # symbol graph lines are 0-based
    return path, line


def needs_doc(symbol):
    if symbol.get("accessLevel") not in ("public", "open"):
        return False
    if "location" not in symbol:
        return False
    if "::SYNTHESIZED::" in symbol["identifier"]["precise"]:
        return False
    if symbol["kind"]["identifier"] == "swift.extension":
        return False
    if any(component.startswith("_") for component in symbol.get("pathComponents", [])):
        return False
    return True


def has_own_doc(symbol, module):
    doc = symbol.get("docComment")
    if not doc:
        return False
    if doc.get("module", module) != module:
        return False
    return any(line.get("text", "").strip() for line in doc.get("lines", []))


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    directory, module = argv[1], argv[2]
    files = sorted(
        glob.glob(os.path.join(directory, f"{module}.symbols.json"))
        + glob.glob(os.path.join(directory, f"{module}@*.symbols.json"))
    )
    if not files:
        print(f"error: no symbol graph for module {module} in {directory}", file=sys.stderr)
        return 2

    checked = 0
    missing = []
    seen = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            graph = json.load(f)
        for symbol in graph.get("symbols", []):
            precise = symbol["identifier"]["precise"]
            if precise in seen or not needs_doc(symbol):
                continue
            seen.add(precise)
            checked += 1
            if not has_own_doc(symbol, module):
                name = ".".join(symbol.get("pathComponents", [])) or symbol["names"]["title"]
                kind = symbol["kind"].get("displayName", symbol["kind"]["identifier"])
                missing.append((location_of(symbol), kind, name))

    for (path, line), kind, name in sorted(missing):
        print(f"{path}:{line}: error: public {kind.lower()} '{name}' has no doc comment of its own (add a /// comment)")
    if missing:
        print(f"{len(missing)} of {checked} public symbols of {module} are undocumented.", file=sys.stderr)
        return 1
    print(f"All {checked} public symbols of {module} have doc comments.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
