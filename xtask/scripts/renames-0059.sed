# Identifier renames of ADR 0059 (one layout and one name per concept in
# every backend). Apply to Rust sources and Markdown written against the
# names before it:  sed -i -E -f xtask/scripts/renames-0059.sed FILES...
# Word-boundary patterns; each line is safe across the whole workspace.
#
# Public (see each crate's CHANGELOG.md, "Renamed"):
s/\bSqliteLeases\b/SqliteKeyedClaims/g
s/\bPostgresLeases\b/PostgresKeyedClaims/g
s/\bNatsLeases\b/NatsKeyedClaims/g
# election_sql::Hold (a held lease row: name, nonce, epoch). The core's
# keyed book also has a (crate-private) `Hold<S>`, which keeps its name:
# only the SQL one is ever written with a lifetime or through election_sql.
s/\belection_sql::Hold\b/election_sql::HeldRow/g
s/\bHold<'/HeldRow<'/g
s/\bHold \{ name:/HeldRow { name:/g
# Module paths of the backends' new layout (crate-internal):
s/\bcrate::lease_set::SqliteLeases\b/crate::keyed::SqliteKeyedClaims/g
s/\bcrate::lease_set::PostgresLeases\b/crate::keyed::PostgresKeyedClaims/g
s/\bcrate::claimfile\b/crate::store::claim_file/g
s/\bclaimfile::/claim_file::/g
s/\bcrate::lease_steps\b/crate::keyed::steps/g
s/\bcrate::book\b/crate::keyed::key_table/g
s/\bcrate::latest\b/crate::store::exact_read/g
s/\bcrate::value\b/crate::store::record/g
# NATS internal names (unique to election-nats/src):
s/\bLatest\b/ExactEntry/g
s/\blatest::latest\b/exact_read::read_exact/g
s/\blatest::operation\b/exact_read::operation/g
s/\bvalue::(key|key_of|leader_of|is_pending|PENDING)\b/record::\1/g
s/\bRenewal::Gone\b/Renewal::Lost/g
# NOT safe workspace-wide; renames-0059.sh applies these in the named crates only:
#   election-sqlite, election-postgres, election-sql: \bHold\b -> HeldRow
#   election-sqlite/src: crate::(context|row|host_lock|names|schema) -> crate::store::\1
#   election-postgres/src: crate::(context|row|notify|schema) -> crate::store::\1
#   election-postgres/src: crate::lease_set -> crate::keyed
#   election-nats/src: crate::(connection|bucket|session) -> crate::store::\1
#   election-nats/src: crate::lease_set -> crate::keyed
#   election-nats/src: \bBook\b -> KeyTable (the core's keyed book keeps `Book`)
#   election-nats/src: \bbook\b -> table (the field and variables of the key table)
#   election-nats/src: \bHolding\b -> HeldTerm (election-file's waiter and the test kit's memory backend keep theirs)
#   election-nats/src: \bValue\b -> ClaimRecord (not proptest's Strategy<Value = ..>)
#   election-nats/src: \bLoss\b -> LostKey (the key table's alias; not the core's renewal::Loss)
#   election-nats/src: (conn|self).latest( -> \1.read_exact(
#   election-file/src: crate::(record|ceiling|lock|waiter|fstype) -> crate::store::\1
