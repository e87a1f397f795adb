#!/usr/bin/env bash
# Kept for .ci/run and the docs: the mutation check is Scripts/mutation-check.py (see its --help).
exec python3 "$(dirname "$0")/mutation-check.py" "$@"
