#!/bin/sh
# Brings code written against the names before ADR 0059 over to them: the
# workspace-wide patterns of renames-0059.sed on every tracked .rs and .md
# file (not the ADRs and CHANGELOGs, which keep their history), then the patterns that
# are safe only inside one crate. Idempotent. Run from the repository root.
set -eu
here=$(dirname "$0")
files() { git ls-files -- "$@" | grep -E '\.(rs|md)$' | grep -v -e '^docs/adr/0' -e 'CHANGELOG.md$' || true; }
in_crate() { dir=$1; shift; files "$dir" | xargs -r sed -i -E "$@"; }

files . | xargs -r sed -i -E -f "$here/renames-0059.sed"

for c in crates/election-sql crates/election-sqlite crates/election-postgres; do
    in_crate "$c" -e 's/\bHold\b/HeldRow/g'
done
in_crate crates/election-sqlite/src \
    -e 's/\bcrate::(context|row|host_lock|names|schema)\b/crate::store::\1/g' \
    -e 's/\bcrate::lease_set\b/crate::keyed/g'
in_crate crates/election-postgres/src \
    -e 's/\bcrate::(context|row|notify|schema)\b/crate::store::\1/g' \
    -e 's/\bcrate::lease_set\b/crate::keyed/g'
in_crate crates/election-nats/src \
    -e 's/\bcrate::(connection|bucket|session)\b/crate::store::\1/g' \
    -e 's/\bcrate::lease_set\b/crate::keyed/g' \
    -e 's/\bBook\b/KeyTable/g' \
    -e 's/\bbook\b/table/g' \
    -e 's/\bHolding\b/HeldTerm/g' \
    -e 's/\bValue\b/ClaimRecord/g' -e 's/Strategy<ClaimRecord/Strategy<Value/g' \
    -e 's/\bLoss\b/LostKey/g' \
    -e 's/\b(conn|self)\.latest\(/\1.read_exact(/g'
in_crate crates/election-file/src \
    -e 's/\bcrate::(record|ceiling|lock|waiter|fstype)\b/crate::store::\1/g'
