#!/usr/bin/env bash
# Builds the DocC documentation of the Subscriptions module into a static site, and fails on any
# DocC warning or on a public symbol without a doc comment of its own.
#
#   Scripts/build-docs.sh [--scratch-path DIR] [--output DIR] [--hosting-base-path PATH]
#
# --scratch-path       SwiftPM build folder (default .build), as for `swift build --scratch-path`.
# --output             where the site goes (default <scratch-path>/docs-site).
# --hosting-base-path  the URL path the site is served under, e.g. /Subscriptions for
#                      https://user.github.io/Subscriptions/ (default: none, served at the root).
#
# View it locally (static-hosting DocC needs a web server, not file://):
#   python3 -m http.server --bind 127.0.0.1 --directory .build/docs-site 8000
#   open http://127.0.0.1:8000/documentation/subscriptions/
#
# Needs only the toolchain (swift build, swift-symbolgraph-extract, docc) and python3: no
# package plugin is involved.
set -euo pipefail
cd "$(dirname "$0")/.."

module=Subscriptions
catalog=Sources/Subscriptions/Subscriptions.docc
scratch=.build
output=
base_path=

while [[ $# -gt 0 ]]; do
    case "$1" in
        --scratch-path) scratch="$2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        --hosting-base-path) base_path="$2"; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
output="${output:-$scratch/docs-site}"
graphs="$scratch/docs-symbol-graphs"

echo "== build $module"
swift build --scratch-path "$scratch" --target "$module"
bin="$(swift build --scratch-path "$scratch" --show-bin-path)"
modules="$bin/Modules"
[[ -d "$modules" ]] || modules="$bin"

# Extract the symbol graph from the module just built, with the compiler's own target triple and
# SDK (read from SwiftPM's build description, so that the module loads on every platform).
target_flags="$(
    python3 - "$bin/description.json" "$module" <<'PY'
import json, shlex, sys
path, module = sys.argv[1:]
try:
    commands = json.load(open(path))["swiftCommands"]
except (OSError, KeyError, ValueError):
    sys.exit(0)
for name, command in commands.items():
    if command.get("moduleName") != module:
        continue
    args = command.get("otherArguments", [])
    flags = []
    for flag in ("-target", "-sdk"):
        if flag in args:
            flags += [flag, args[args.index(flag) + 1]]
    print(" ".join(shlex.quote(f) for f in flags))
    break
PY
)"
if [[ -z "$target_flags" ]]; then
    triple="$(swiftc -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')"
    target_flags="-target $triple"
    if command -v xcrun > /dev/null; then target_flags+=" -sdk $(xcrun --show-sdk-path)"; fi
fi

echo "== extract the symbol graph ($target_flags)"
rm -rf "$graphs"
mkdir -p "$graphs"
# Extension block symbols make DocC list extensions of other modules' types (such as
# NotificationCenter) under "Extended Modules"; without them DocC silently drops those members.
# shellcheck disable=SC2086  # target_flags is a list of flags
swift-symbolgraph-extract -module-name "$module" -I "$modules" $target_flags \
    -minimum-access-level public -emit-extension-block-symbols -output-dir "$graphs"

echo "== check that every public symbol has a doc comment"
python3 Scripts/check-doc-comments.py "$graphs" "$module"

echo "== docc convert (warnings are errors)"
rm -rf "$output"
docc_flags=(
    "$catalog"
    --additional-symbol-graph-dir "$graphs"
    --output-path "$output"
    --fallback-display-name "$module"
    --fallback-bundle-identifier "$module"
    --transform-for-static-hosting
    --warnings-as-errors
)
if [[ -n "$base_path" ]]; then docc_flags+=(--hosting-base-path "$base_path"); fi
docc convert "${docc_flags[@]}"

echo "== site written to $output"
echo "   python3 -m http.server --bind 127.0.0.1 --directory $output 8000"
echo "   then open http://127.0.0.1:8000${base_path%/}/documentation/$(tr '[:upper:]' '[:lower:]' <<< "$module")/"
