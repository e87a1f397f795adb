// Replaced by Scripts/compile-fail-check.sh with each file of Cases/ in turn.
