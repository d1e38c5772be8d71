//! The objects this crate creates in its own schema (default `election`,
//! see [`PostgresOptions::with_schema`](crate::PostgresOptions::with_schema)),
//! their migrations, and every statement over them.
//!
//! Objects (never the application's own tables, never another schema):
//! - `meta(key, value)`: the schema version.
//! - `leases`: one row per election name: holder, the attempt's nonce, the
//!   epoch, a renewal version (bumped by every claim, renewal and
//!   release), the holder's TTL and two wall-clock timestamps for display.
//! - `epoch_seq`: the sequence every epoch is drawn from (`nextval` in the
//!   statement that wins a term), from 2 ([`Epoch::FIRST`](election_core::Epoch::FIRST))
//!   up to `i64::MAX` ([`Epoch::MAX`](election_core::Epoch::MAX)), never
//!   cycling. This crate never deletes it or moves it back.
//! - `epochs`: per election name, the highest epoch handed out and the TTL
//!   of the term that got it, written in the statement that wins each term
//!   and never deleted by this crate: a lease row deleted by hand is then
//!   still known to have had a holder (it counts as held for a full TTL),
//!   and the next epoch is above it.
//!   Triggers (`epochs_never_go_back`, `epochs_never_deleted`,
//!   `epochs_never_truncated`) refuse a `DELETE`, a `TRUNCATE` or a
//!   lowering `UPDATE` of it (the `UPDATE` guard calls its function only
//!   for a write it refuses, ADR 0040): with the lease
//!   row *and* the epoch record gone, nothing would say the name was held,
//!   and a contender that never saw the row would be elected at once beside
//!   the live holder (found by the fault tests, ADR 0039).
//! - `fences`: one high-water mark per fenced resource. Since version 4
//!   (ADR 0047) triggers (`fences_never_go_back`, `fences_never_deleted`,
//!   `fences_never_truncated`) refuse a `DELETE`, a `TRUNCATE` or a
//!   lowering (or renaming) `UPDATE` of a mark, as the epoch records are
//!   guarded: with a mark gone, a fence would accept a deposed leader's
//!   lower token. The fence's own writes only raise a mark and never call
//!   the guard's function.
//! - `leases.value` and `leases.value_epoch` (version 5, ADR 0068): the
//!   value a term published ([`Term::proclaim`](election_core::Term::proclaim))
//!   and the epoch it published it in. A read of the leader shows the
//!   value only with the row's epoch, so a value never outlives its term
//!   and no claim statement has to clear it.
//! - `heartbeats(id, version, beat_unix_ms)` and `leases.heartbeat`,
//!   `leases.heartbeat_nonce` (version 6, ADR 0110): one heartbeat per lease set,
//!   bumped by every statement that extends the set's terms; a lease row
//!   names the heartbeat of its term (only with the row's own nonce), so a
//!   contender that saw the heartbeat unchanged for a full TTL takes the row
//!   over without having watched it. A heartbeat deleted by hand only makes
//!   contenders wait out the per-row TTL.
//! - `waiters` and `waiter_seq` (version 7, ADR 0108): the waiters' queue
//!   of each name, one row per waiting attempt (its nonce, the channel of
//!   its process's session, its place in line drawn from `waiter_seq`, and
//!   an expiry by the server's clock that the waiter renews). A release
//!   wakes only the first unexpired waiter of the name, on its process's
//!   channel. The queue is advice: no claim reads it.
//! - `leases.transfer_to`, `transfer_by`, `transfer_at`, `transfer_epoch`
//!   and `waiters_all` (version 8, ADR 0112): a request that the term be
//!   handed to a successor, stored beside the term with its epoch (a
//!   renewal reads it only with the row's epoch, so a request never
//!   outlives its term and no claim clears it); and every unexpired
//!   waiter of a name, which a handover notifies (the successor may be
//!   anywhere in line).
//! - `waiters.holder`, `ttl_ms`, `ticket`, `pid`, `fresh_until`,
//!   `waiter_choosable` and `release_one` (version 9, ADR 0120): what a
//!   release needs to pass the term to the head of the line in its own
//!   statement (the waiter's identity and TTL, the number of the waiter's
//!   write the release saw, the server process of the waiter's session,
//!   until when its row is fresh), which rows it may choose, and that
//!   single release. A waiter row without them (an older version's) is
//!   woken, never passed a term.
//! - `fence_enter(resource, mark)` (version 3, ADR 0044): the fence's check
//!   and raise, in the caller's transaction, so that a fenced transaction
//!   begins in one round trip
//!   ([`PostgresFence::begin_fenced`](crate::PostgresFence::begin_fenced)).
//!
//! **Never drop the schema, disable those triggers, or move `epoch_seq`
//! back (`setval`, `ALTER SEQUENCE .. RESTART`) while any candidate, lease
//! set or fenced writer may use it**: the database cannot refuse these
//! (a superuser or the owner can do them), and epochs could then repeat, a
//! fence accept a deposed leader's writes, or two leaders overlap.
//!
//! Migrations run in one transaction under a transaction-scoped advisory
//! lock (`pg_advisory_xact_lock`) keyed by the schema name, so many
//! processes may open the same database at once; an up-to-date schema is
//! checked with one read and no lock.

use std::sync::Arc;

use sqlx::{AssertSqlSafe, Connection, PgConnection, Row as _};

use fencing::ResourceName;

use crate::error::Error;

/// The newest schema version this crate writes and reads.
pub const SCHEMA_VERSION: i64 = 9;

/// The `SQLSTATE` with which `fence_enter` refuses a token lower than the
/// stored mark; the error's `DETAIL` is the stored mark, in decimal.
pub(crate) const STALE_SQLSTATE: &str = "EL001";

/// The `SQLSTATE` with which `fence_enter` reports a mark that refused a
/// token without being higher than it (the `fences` table was edited by
/// hand); the `DETAIL` is the mark read afterwards, or empty if none.
pub(crate) const CORRUPT_SQLSTATE: &str = "EL002";

/// The name of the fence's function in the election schema.
pub(crate) const FENCE_ENTER: &str = "fence_enter";

/// Every statement of this crate, with the schema name filled in.
#[derive(Debug)]
pub(crate) struct Sql {
    /// The notification channel: `election:<schema>`.
    pub(crate) channel: Arc<str>,
    pub(crate) read_many: Arc<str>,
    pub(crate) claim_many: Arc<str>,
    pub(crate) take_released: Arc<str>,
    pub(crate) renew_many: Arc<str>,
    /// A lease set's renewal (ADR 0110): `renew_many`, its heartbeat bumped and
    /// every other heartbeat listed, in one statement.
    pub(crate) renew_with_heartbeat: Arc<str>,
    /// Deletes a closed set's heartbeat and the heartbeats nobody bumped for a day.
    pub(crate) stop_heartbeat: Arc<str>,
    pub(crate) release_many: Arc<str>,
    /// One term's release (`release_one`, ADR 0120): passed to the head of
    /// the line when it can be, else released and the head woken.
    pub(crate) release_one: Arc<str>,
    /// A single term's renewal that also reads the transfer request stored
    /// beside it (ADR 0112).
    pub(crate) renew_asked: Arc<str>,
    /// A term handed to a successor (ADR 0112), every waiter notified.
    pub(crate) release_to: Arc<str>,
    /// A transfer request stored beside the current term (ADR 0112).
    pub(crate) request_transfer: Arc<str>,
    pub(crate) proclaim: Arc<str>,
    /// A waiter's row written at its first wait, the lease row locked
    /// (ADR 0108).
    pub(crate) waiter_join: Arc<str>,
    /// A waiter's row renewed (written again if it is gone) (ADR 0108).
    pub(crate) waiter_renew: Arc<str>,
    /// A waiter's row deleted (ADR 0108).
    pub(crate) waiter_delete: Arc<str>,
    pub(crate) fence_enter: Arc<str>,
    pub(crate) fence_read: Arc<str>,
    pub(crate) fence_lock: Arc<str>,
    /// The quoted schema name.
    schema: Arc<str>,
}

impl Sql {
    /// The statements over `schema` (a checked name: see
    /// [`crate::PostgresOptions`]); quoted anyway.
    pub(crate) fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        let read_many = format!(
            "SELECT k.name, l.holder, l.epoch, l.version, l.ttl_ms, l.acquired_unix_ms, e.epoch, e.ttl_ms,
                    l.renewed_unix_ms, CASE WHEN l.value_epoch = l.epoch THEN l.value END,
                    m.id, m.version
             FROM unnest($1::text[]) AS k(name)
             LEFT JOIN {s}.leases l ON l.name = k.name
             LEFT JOIN {s}.epochs e ON e.name = k.name
             LEFT JOIN {s}.heartbeats m ON m.id = l.heartbeat AND l.heartbeat_nonce = l.nonce
             WHERE l.name IS NOT NULL OR e.name IS NOT NULL"
        );
        // One statement wins every key of a batch whose lease row (and
        // epoch record) is still exactly as its claimant read it: the
        // epoch is drawn from the sequence in this very statement (rule 1),
        // never below the floor (one above every epoch the key ever showed),
        // recorded in `epochs`, and announced on the channel at commit. A
        // row won names no heartbeat (its holder's first renewal names one);
        // a take by heartbeat ($11) also needs the heartbeat the row names
        // still at the version seen (ADR 0110).
        // A winner's row in the waiters' queue goes in the same statement
        // (ADR 0108): no later release wakes it as the head.
        let claim_many = format!(
            "WITH t AS (
                SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::int8[], $6::int8[],
                                     $11::int8[])
                  AS t(name, nonce, seen_version, seen_epoch, recorded, floor, beat_seen)
             ),
             upd AS (
                UPDATE {s}.leases l
                SET holder = $7, nonce = t.nonce,
                    epoch = greatest(nextval('{s}.epoch_seq'), t.floor),
                    version = l.version + 1, ttl_ms = $8,
                    acquired_unix_ms = $9, renewed_unix_ms = $9,
                    heartbeat = NULL, heartbeat_nonce = NULL
                FROM t
                WHERE t.seen_version IS NOT NULL AND l.name = t.name
                  AND l.version = t.seen_version AND l.epoch = t.seen_epoch
                  AND (SELECT e.epoch FROM {s}.epochs e WHERE e.name = t.name) IS NOT DISTINCT FROM t.recorded
                  AND (t.beat_seen IS NULL OR t.beat_seen = (
                        SELECT m.version FROM {s}.heartbeats m WHERE m.id = l.heartbeat AND l.heartbeat_nonce = l.nonce))
                RETURNING l.name, l.epoch
             ),
             ins AS (
                INSERT INTO {s}.leases
                  (name, holder, nonce, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms)
                SELECT t.name, $7, t.nonce, greatest(nextval('{s}.epoch_seq'), t.floor), 1, $8, $9, $9
                FROM t
                WHERE t.seen_version IS NULL
                  AND (SELECT e.epoch FROM {s}.epochs e WHERE e.name = t.name) IS NOT DISTINCT FROM t.recorded
                ON CONFLICT (name) DO NOTHING
                RETURNING name, epoch
             ),
             won AS (SELECT name, epoch FROM upd UNION ALL SELECT name, epoch FROM ins),
             rec AS (
                INSERT INTO {s}.epochs (name, epoch, ttl_ms) SELECT name, epoch, $8 FROM won
                ON CONFLICT (name) DO UPDATE SET epoch = excluded.epoch, ttl_ms = excluded.ttl_ms
                WHERE excluded.epoch > {s}.epochs.epoch
             ),
             out AS (
                DELETE FROM {s}.waiters w USING won, t
                WHERE w.name = won.name AND t.name = won.name AND w.nonce = t.nonce
             )
             SELECT won.name, won.epoch FROM won, LATERAL (SELECT pg_notify($10, won.name)) AS n"
        );
        // An attempt's first look, and a waiter's look after a
        // notification, read the row and, when it is released, win it in
        // the same statement (ADR 0045); a name never held (no row and no
        // epoch record) is won the same way, by inserting its row (ADR
        // 0065). A released row is locked and checked again by the UPDATE,
        // and a concurrent insert of the same name conflicts and does
        // nothing, so exactly one look wins; the epoch is drawn from the
        // sequence in this very statement, above every epoch the row and
        // its record show (rule 1). A name with a record but no row (its
        // row deleted by hand) is only read: it counts as held for a TTL.
        // The SELECT reads the snapshot from before the statement: what
        // the look saw, won or not. A winner's row in the waiters' queue
        // goes in the same statement (ADR 0108). A row handed over to this
        // very candidate ($2, ADR 0112) is taken the same way, as
        // `may_claim_as` lets the successor take it at once: the woken
        // successor wins in this one statement instead of reading here and
        // claiming in a second (the identity holds no control character,
        // so the `chr(1)` after it ends the successor's name exactly). The
        // last column says whether the row shows this very attempt: a
        // release passed it the term (ADR 0120).
        let take_released = format!(
            "WITH take AS (
                UPDATE {s}.leases l
                SET holder = $2, nonce = $3,
                    epoch = greatest(nextval('{s}.epoch_seq'), l.epoch + 1,
                        coalesce((SELECT r.epoch FROM {s}.epochs r WHERE r.name = l.name), 0) + 1),
                    version = l.version + 1, ttl_ms = $4,
                    acquired_unix_ms = $5, renewed_unix_ms = $5
                WHERE l.name = $1 AND l.epoch < 9223372036854775807
                  AND (l.holder IS NULL
                       OR starts_with(l.holder, chr(1) || 'handed-to ' || $2 || chr(1)))
                  AND coalesce((SELECT r.epoch FROM {s}.epochs r WHERE r.name = l.name), 0)
                      < 9223372036854775807
                RETURNING l.name, l.epoch
             ),
             ins AS (
                INSERT INTO {s}.leases
                  (name, holder, nonce, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms)
                SELECT $1, $2, $3, nextval('{s}.epoch_seq'), 1, $4, $5, $5
                WHERE $1::text IS NOT NULL
                  AND NOT EXISTS (SELECT 1 FROM {s}.leases x WHERE x.name = $1)
                  AND NOT EXISTS (SELECT 1 FROM {s}.epochs r WHERE r.name = $1)
                ON CONFLICT (name) DO NOTHING
                RETURNING name, epoch
             ),
             won AS (SELECT name, epoch FROM take UNION ALL SELECT name, epoch FROM ins),
             rec AS (
                INSERT INTO {s}.epochs (name, epoch, ttl_ms) SELECT name, epoch, $4 FROM won
                ON CONFLICT (name) DO UPDATE SET epoch = excluded.epoch, ttl_ms = excluded.ttl_ms
                WHERE excluded.epoch > {s}.epochs.epoch
             ),
             out AS (
                DELETE FROM {s}.waiters w USING won WHERE w.name = won.name AND w.nonce = $3
             )
             SELECT k.name, l.holder, l.epoch, l.version, l.ttl_ms, l.acquired_unix_ms, e.epoch, e.ttl_ms,
                    (SELECT w.epoch FROM won w, LATERAL (SELECT pg_notify($6, w.name)) AS n) AS won,
                    l.nonce = $3 AND l.holder IS NOT NULL AS ours
             FROM (VALUES ($1::text)) AS k(name)
             LEFT JOIN {s}.leases l ON l.name = k.name
             LEFT JOIN {s}.epochs e ON e.name = k.name"
        );
        // A lease set's renewal (ADR 0110): the rows renewed name its
        // heartbeat ($5, with each row's nonce); the heartbeat is bumped,
        // one version up, or written from a random version where it is
        // missing (a first beat, or deleted by hand: a version is not seen
        // twice by chance); every other heartbeat is listed as the
        // statement's snapshot shows it.
        let renew_with_heartbeat = format!(
            "WITH r AS (
                UPDATE {s}.leases l SET version = l.version + 1, renewed_unix_ms = $4,
                    heartbeat = $5, heartbeat_nonce = l.nonce
                FROM unnest($1::text[], $2::int8[], $3::int8[]) AS t(name, nonce, epoch)
                WHERE l.name = t.name AND l.nonce = t.nonce AND l.epoch = t.epoch AND l.holder IS NOT NULL
                RETURNING l.name
             ),
             beat AS (
                INSERT INTO {s}.heartbeats (id, version, beat_unix_ms)
                VALUES ($5, (random() * 4611686018427387903)::int8 + 1, $4)
                ON CONFLICT (id) DO UPDATE
                SET version = {s}.heartbeats.version + 1, beat_unix_ms = excluded.beat_unix_ms
             )
             SELECT r.name, NULL::int8, NULL::int8 FROM r
             UNION ALL
             SELECT NULL, m.id, m.version FROM {s}.heartbeats m WHERE m.id <> $5"
        );
        let stop_heartbeat =
            format!("DELETE FROM {s}.heartbeats WHERE id = $1 OR beat_unix_ms < $2");
        let renew_many = format!(
            "UPDATE {s}.leases l SET version = l.version + 1, renewed_unix_ms = $4
             FROM unnest($1::text[], $2::int8[], $3::int8[]) AS t(name, nonce, epoch)
             WHERE l.name = t.name AND l.nonce = t.nonce AND l.epoch = t.epoch AND l.holder IS NOT NULL
             RETURNING l.name"
        );
        // A release commits without waiting for its WAL flush (ADR 0071):
        // `set_config(.., true)` turns `synchronous_commit` off for this
        // statement's own transaction only. A release lost in a server
        // crash leaves the row held by a term that stopped acting, which
        // ages out after its TTL; every claim that sees the release
        // commits durably, and its flush covers the release's earlier WAL.
        //
        // It notifies the name on the channel (observers, lease sets,
        // waiters of older versions) and, on its process's own channel,
        // the head of the name's waiters' queue (ADR 0108): the waiter
        // row with the lowest place whose expiry (by the server's clock)
        // has not passed, other than the releasing attempt's own, read by
        // `waiter_head` with a snapshot taken after the row was locked
        // here (a waiter's first write locks the row too: see
        // `waiter_renew`). A batch (a lease set's) calls it only for the
        // names with a waiter row in the statement's own snapshot: a
        // call costs about 30 µs, a third of a lease set's release per
        // key, and a waiter whose first write raced the batch is woken by
        // the backstop instead.
        let release_many = format!(
            "WITH r AS (
                UPDATE {s}.leases l SET holder = NULL, nonce = NULL, version = l.version + 1
                FROM unnest($1::text[], $2::int8[]) AS t(name, nonce)
                WHERE l.name = t.name AND l.nonce = t.nonce AND l.holder IS NOT NULL
                RETURNING l.name, t.nonce
             )
             SELECT r.name FROM r
             LEFT JOIN LATERAL (
                SELECT f.nonce, f.channel FROM {s}.waiter_head(r.name, r.nonce) AS f
                WHERE cardinality($1::text[]) = 1
                   OR EXISTS (SELECT 1 FROM {s}.waiters w WHERE w.name = r.name)
                OFFSET 0
             ) AS h ON true,
             LATERAL (
                SELECT pg_notify($3, r.name),
                       CASE WHEN h.channel IS NOT NULL
                            THEN pg_notify(h.channel, h.nonce::text || ' ' || r.name) END,
                       set_config('synchronous_commit', 'off', true)
             ) AS n"
        );
        // A single term's renewal (its renewal task's), as `renew_many`
        // for one row, that also returns the transfer request stored
        // beside the term, only in the row's epoch (ADR 0112).
        let renew_asked = format!(
            "UPDATE {s}.leases l SET version = l.version + 1, renewed_unix_ms = $4
             WHERE l.name = $1 AND l.nonce = $2 AND l.epoch = $3 AND l.holder IS NOT NULL
             RETURNING CASE WHEN l.transfer_epoch = l.epoch THEN l.transfer_to END,
                       CASE WHEN l.transfer_epoch = l.epoch THEN l.transfer_by END,
                       CASE WHEN l.transfer_epoch = l.epoch THEN l.transfer_at END"
        );
        // A handover (ADR 0112): conditional on the term's nonce and epoch
        // as a release is, the row becomes held by the pseudo-holder $4
        // (which names the successor) with no nonce and no heartbeat, the
        // TTL $5 (the window) and the term's own epoch (none is drawn: the
        // successor's claim takes the next). Contenders wait it out as a
        // holder that stopped renewing, for the window; the successor
        // takes it at once. It notifies the name on the channel and, on
        // their processes' channels, every unexpired waiter of the name
        // (`waiters_all`, a snapshot taken after the row was locked, as
        // `waiter_head`'s): the successor may be anywhere in line, and the
        // others look once and wait again. Committed without waiting for
        // its flush, as a release (ADR 0071): the successor's take commits
        // durably and its flush covers the handover before it; one lost in
        // a crash before any win brings back the row of the term that
        // handed over, which stopped acting first and is waited out for a
        // TTL (the reservation, a preference, is lost with it).
        let release_to = format!(
            "WITH r AS (
                UPDATE {s}.leases l
                SET holder = $4, nonce = NULL, version = l.version + 1, ttl_ms = $5,
                    acquired_unix_ms = $6, renewed_unix_ms = NULL,
                    heartbeat = NULL, heartbeat_nonce = NULL
                WHERE l.name = $1 AND l.nonce = $2 AND l.epoch = $3 AND l.holder IS NOT NULL
                RETURNING l.name
             )
             SELECT r.name, (SELECT count(*) FROM
                    (SELECT pg_notify(w.channel, w.nonce::text || ' ' || r.name)
                     FROM {s}.waiters_all(r.name, $2) AS w) AS woken)
             FROM r, LATERAL (SELECT pg_notify($7, r.name),
                                     set_config('synchronous_commit', 'off', true)) AS n"
        );
        // A transfer request (ADR 0112), stored only while a term holds
        // the row (not released, revoked or handed over: a pseudo-holder
        // begins with a control character), with that term's epoch. It
        // moves nothing the holder's writes are conditional on.
        let request_transfer = format!(
            "UPDATE {s}.leases l
             SET transfer_to = $2, transfer_by = $3, transfer_at = $4, transfer_epoch = l.epoch
             WHERE l.name = $1 AND l.holder IS NOT NULL AND left(l.holder, 1) <> chr(1)
             RETURNING l.epoch"
        );
        // A term publishes its value (ADR 0068) only while the row shows
        // its attempt's nonce and epoch with a holder, and wakes observers
        // on the channel at commit.
        let proclaim = format!(
            "WITH p AS (
                UPDATE {s}.leases l SET value = $4, value_epoch = $3
                WHERE l.name = $1 AND l.nonce = $2 AND l.epoch = $3 AND l.holder IS NOT NULL
                RETURNING l.name
             )
             SELECT p.name FROM p, LATERAL (SELECT pg_notify($5, p.name)) AS n"
        );
        // A waiter's row (ADR 0108): written at its first wait, renewed
        // every renew interval, its expiry counted by the server's clock
        // (the queue is advice: no claim reads it). A row found expired
        // (the waiter was paused past it) goes to the back of the line;
        // expired rows of other waiters of the name are removed. Never
        // written while the attempt holds the name (a renewal that ran
        // after its win would put a winner back in line).
        //
        // The first write locks the lease row (`FOR SHARE`), so that a release
        // and a first write of a waiter row are ordered: a release that
        // locked the row first commits before this write, and the
        // waiter's next look sees it; one that comes after waits for this
        // commit, and its `waiter_head` (a fresh snapshot, taken after
        // the wait) sees the row. A handover (ADR 0112) is ordered the
        // same way: one that committed first shows as not held, so the
        // waiter looks at once (the successor takes it); one after it
        // notifies the row (`waiters_all`).
        //
        // Neither a waiter row's write nor its delete waits for its WAL
        // flush (`synchronous_commit` off for its own transaction, as a
        // release's, ADR 0071): the queue is advice, a row lost in a
        // server crash only costs its waiter its place (the next renewal
        // writes it again) or wakes a waiter that left (the backstop), and
        // thirty waiters' renewals do not queue their flushes beside a
        // handover's claim.
        let waiter_write = |lock: &str| {
            format!(
                "WITH lease AS (SELECT l.nonce, l.holder FROM {s}.leases l WHERE l.name = $1{lock}),
                 gone AS (
                    DELETE FROM {s}.waiters
                    WHERE name = $1 AND nonce <> $2 AND expires_at < now()
                 )
                 INSERT INTO {s}.waiters AS w
                   (name, nonce, channel, expires_at, holder, ttl_ms, ticket, pid, fresh_until)
                 SELECT $1, $2, $3, now() + $4::float8 * interval '1 millisecond',
                        $5, $4, $6, pg_backend_pid(), now() + $7::float8 * interval '1 millisecond'
                 FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed
                 WHERE NOT EXISTS (SELECT 1 FROM lease WHERE lease.nonce = $2)
                 ON CONFLICT (name, nonce) DO UPDATE
                 SET channel = excluded.channel, expires_at = excluded.expires_at,
                     holder = excluded.holder, ttl_ms = excluded.ttl_ms,
                     ticket = excluded.ticket, pid = excluded.pid,
                     fresh_until = excluded.fresh_until,
                     seq = CASE WHEN w.expires_at > now() THEN w.seq ELSE excluded.seq END
                 RETURNING EXISTS (SELECT 1 FROM lease WHERE lease.holder IS NOT NULL
                                          AND NOT starts_with(lease.holder, chr(1) || 'handed-to ')),
                           (SELECT count(*) FROM {s}.waiters x
                            WHERE x.name = $1 AND x.seq < w.seq
                              AND {s}.waiter_choosable(x.expires_at, x.pid, x.fresh_until))"
            )
        };
        // It returns whether a term holds the name, and how many rows
        // ahead of it a release could choose as the head
        // (`waiter_choosable`; ADR 0121: a waiter behind the head sends no
        // look at its polls while a term holds the name).
        //
        // Only the first write locks: a renewal of a row that releases
        // already see changes nothing a release could miss, and thirty
        // waiters do not lock the lease row every renew interval.
        let waiter_join = waiter_write(" FOR SHARE");
        let waiter_renew = waiter_write("");
        let waiter_delete = format!(
            "DELETE FROM {s}.waiters
             WHERE name = $1 AND nonce = $2
               AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
        );
        let fence_enter = format!("SELECT {s}.{FENCE_ENTER}($1, $2)");
        let fence_read = format!("SELECT mark FROM {s}.fences WHERE resource = $1");
        let fence_lock = format!("SELECT mark FROM {s}.fences WHERE resource = $1 FOR SHARE");
        Sql {
            channel: format!("election:{schema}").into(),
            read_many: read_many.into(),
            claim_many: claim_many.into(),
            take_released: take_released.into(),
            renew_many: renew_many.into(),
            renew_with_heartbeat: renew_with_heartbeat.into(),
            stop_heartbeat: stop_heartbeat.into(),
            release_many: release_many.into(),
            release_one: format!("SELECT {s}.release_one($1, $2, $3, $4)").into(),
            renew_asked: renew_asked.into(),
            release_to: release_to.into(),
            request_transfer: request_transfer.into(),
            proclaim: proclaim.into(),
            waiter_join: waiter_join.into(),
            waiter_renew: waiter_renew.into(),
            waiter_delete: waiter_delete.into(),
            fence_enter: fence_enter.into(),
            fence_read: fence_read.into(),
            fence_lock: fence_lock.into(),
            schema: s.into(),
        }
    }
}

impl Sql {
    /// The readying's stand-in row ([`crate::store::row::ready`], ADR
    /// 0075): a held lease row named `name` (an SQL string literal naming
    /// what no election can be named), inserted only inside a
    /// transaction that is rolled back.
    pub(crate) fn ready_row(&self, name: &str) -> String {
        format!(
            "INSERT INTO {}.leases (name, holder, nonce, epoch, version, ttl_ms)
             VALUES ({name}, '', 0, 0, 1, 1)",
            self.schema
        )
    }

    /// The one simple query of
    /// [`PostgresFence::begin_fenced`](crate::PostgresFence::begin_fenced):
    /// `fence_enter` in the implicit transaction of the message, which the
    /// `BEGIN` that follows turns into an open transaction (a refusal rolls
    /// the implicit one back and skips the `BEGIN`). `resource` goes in as
    /// an escape string literal (`E'..'`, backslashes and quotes doubled),
    /// read the same whatever `standard_conforming_strings` is.
    pub(crate) fn fence_begin(&self, resource: &ResourceName, mark: i64) -> String {
        let literal = resource.as_str().replace('\\', "\\\\").replace('\'', "''");
        format!(
            "SELECT {}.{FENCE_ENTER}(E'{literal}', {mark}); BEGIN",
            self.schema
        )
    }
}

/// The objects of version 1, created in order.
fn v1(s: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.leases (
                name text PRIMARY KEY,
                holder text,
                nonce bigint,
                epoch bigint NOT NULL CHECK (epoch >= 0),
                version bigint NOT NULL,
                ttl_ms bigint NOT NULL CHECK (ttl_ms > 0),
                acquired_unix_ms bigint,
                renewed_unix_ms bigint
            )"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.epochs (
                name text PRIMARY KEY,
                epoch bigint NOT NULL CHECK (epoch >= 0),
                ttl_ms bigint NOT NULL CHECK (ttl_ms > 0)
            )"
        ),
        // A deleted (or lowered) epoch record would let a contender that
        // never saw the name's lease row claim it at once while its holder
        // still leads: refuse such writes in the database itself.
        format!(
            "CREATE OR REPLACE FUNCTION {s}.epochs_never_go_back() RETURNS trigger
                LANGUAGE plpgsql AS $$
             BEGIN
                 IF TG_OP = 'UPDATE' AND NEW.name = OLD.name AND NEW.epoch >= OLD.epoch THEN
                     RETURN NEW;
                 END IF;
                 RAISE EXCEPTION 'election-postgres: % of %.epochs refused: epoch records are never deleted or lowered (a candidate could be elected beside a live holder)',
                     TG_OP, TG_TABLE_SCHEMA USING ERRCODE = 'restrict_violation';
             END $$"
        ),
        format!(
            "CREATE OR REPLACE TRIGGER epochs_never_go_back BEFORE UPDATE OR DELETE ON {s}.epochs
                FOR EACH ROW EXECUTE FUNCTION {s}.epochs_never_go_back()"
        ),
        format!(
            "CREATE OR REPLACE TRIGGER epochs_never_truncated BEFORE TRUNCATE ON {s}.epochs
                FOR EACH STATEMENT EXECUTE FUNCTION {s}.epochs_never_go_back()"
        ),
        format!(
            "CREATE SEQUENCE IF NOT EXISTS {s}.epoch_seq AS bigint
                MINVALUE 2 MAXVALUE 9223372036854775807 START WITH 2 NO CYCLE"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.fences (
                resource text PRIMARY KEY,
                mark bigint NOT NULL CHECK (mark > 0)
            )"
        ),
    ]
}

/// The changes of version 2 (ADR 0040), run after [`v1`] in the same
/// transaction: the guard of the epoch records calls its function only
/// for a write it refuses. Version 1 called it for every `UPDATE`, so the
/// first claim on each server backend compiled the PL/pgSQL function, on
/// a handover's critical path. The two triggers replace the one, in one
/// transaction: a `DELETE` is refused at every moment.
fn v2(s: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE OR REPLACE TRIGGER epochs_never_go_back BEFORE UPDATE ON {s}.epochs
                FOR EACH ROW
                WHEN (NEW.name IS DISTINCT FROM OLD.name OR NEW.epoch IS NULL OR NEW.epoch < OLD.epoch)
                EXECUTE FUNCTION {s}.epochs_never_go_back()"
        ),
        format!(
            "CREATE OR REPLACE TRIGGER epochs_never_deleted BEFORE DELETE ON {s}.epochs
                FOR EACH ROW EXECUTE FUNCTION {s}.epochs_never_go_back()"
        ),
    ]
}

/// The changes of version 3 (ADR 0044): `fence_enter(resource, mark)`,
/// what [`PostgresFence::advance_in`](crate::PostgresFence::advance_in)
/// did in up to three statements, as one function that runs in the
/// caller's transaction, so that a transaction can begin with it in one
/// round trip ([`PostgresFence::begin_fenced`](crate::PostgresFence::begin_fenced)):
///
/// 1. `SELECT mark .. WHERE mark >= $mark FOR SHARE` (ADR 0041): an equal
///    mark is held (share-locked until the transaction ends) and returned;
///    a higher one is refused.
/// 2. Else (the mark is lower or missing) the upsert raises it, which
///    takes the row lock and compares again (`WHERE mark <= $mark`), and
///    the mark before is returned (`NULL` if there was none).
/// 3. An upsert that changed nothing met a higher mark committed meanwhile:
///    it is read and refused.
///
/// A refusal raises [`STALE_SQLSTATE`] with the stored mark as `DETAIL`,
/// which aborts the caller's transaction; a mark that refused without
/// being higher raises [`CORRUPT_SQLSTATE`].
fn v3(s: &str) -> Vec<String> {
    vec![format!(
        "CREATE OR REPLACE FUNCTION {s}.{FENCE_ENTER}(fenced_resource text, token bigint) RETURNS bigint
            LANGUAGE plpgsql VOLATILE AS $$
         DECLARE
             stored bigint;
             previous bigint;
             changed bigint;
         BEGIN
             SELECT f.mark INTO stored FROM {s}.fences f
                 WHERE f.resource = fenced_resource AND f.mark >= token FOR SHARE;
             IF FOUND THEN
                 IF stored = token THEN
                     RETURN stored;
                 END IF;
             ELSE
                 INSERT INTO {s}.fences AS f (resource, mark) VALUES (fenced_resource, token)
                     ON CONFLICT (resource) DO UPDATE SET mark = excluded.mark
                     WHERE f.mark <= excluded.mark
                     RETURNING (SELECT p.mark FROM {s}.fences p WHERE p.resource = fenced_resource)
                     INTO previous;
                 GET DIAGNOSTICS changed = ROW_COUNT;
                 IF changed = 1 THEN
                     RETURN previous;
                 END IF;
                 SELECT f.mark INTO stored FROM {s}.fences f WHERE f.resource = fenced_resource;
                 IF stored IS NULL OR stored <= token THEN
                     RAISE EXCEPTION 'election-postgres: the fence of % refused token % below a mark of %: the fences table was edited',
                         fenced_resource, token, coalesce(stored::text, 'none')
                         USING ERRCODE = '{CORRUPT_SQLSTATE}', DETAIL = coalesce(stored::text, '');
                 END IF;
             END IF;
             RAISE EXCEPTION 'election-postgres: the fence of % refused token %: its high-water mark is %',
                 fenced_resource, token, stored
                 USING ERRCODE = '{STALE_SQLSTATE}', DETAIL = stored::text;
         END $$"
    )]
}

/// The changes of version 4 (ADR 0047): the high-water marks of `fences`
/// guard themselves as the epoch records do. A `DELETE` or `TRUNCATE` is
/// refused, and so is an `UPDATE` that lowers a mark, renames it or sets
/// it to `NULL` (the `UPDATE` guard calls its function only for a write it
/// refuses, as the epoch records' does since version 2: `fence_enter`'s
/// raise never runs PL/pgSQL for it). Run after [`v3`] in the same
/// transaction as the version number.
fn v4(s: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE OR REPLACE FUNCTION {s}.fences_never_go_back() RETURNS trigger
                LANGUAGE plpgsql AS $$
             BEGIN
                 RAISE EXCEPTION 'election-postgres: % of %.fences refused: high-water marks are never deleted or lowered (a fence would accept a deposed leader''s lower token)',
                     TG_OP, TG_TABLE_SCHEMA USING ERRCODE = 'restrict_violation';
             END $$"
        ),
        format!(
            "CREATE OR REPLACE TRIGGER fences_never_go_back BEFORE UPDATE ON {s}.fences
                FOR EACH ROW
                WHEN (NEW.resource IS DISTINCT FROM OLD.resource OR NEW.mark IS NULL OR NEW.mark < OLD.mark)
                EXECUTE FUNCTION {s}.fences_never_go_back()"
        ),
        format!(
            "CREATE OR REPLACE TRIGGER fences_never_deleted BEFORE DELETE ON {s}.fences
                FOR EACH ROW EXECUTE FUNCTION {s}.fences_never_go_back()"
        ),
        format!(
            "CREATE OR REPLACE TRIGGER fences_never_truncated BEFORE TRUNCATE ON {s}.fences
                FOR EACH STATEMENT EXECUTE FUNCTION {s}.fences_never_go_back()"
        ),
    ]
}

/// The changes of version 5 (ADR 0068): the value a term publishes and the
/// epoch it was published in, beside the lease row. A version 4 row gets
/// `NULL`s (no value). Run after [`v4`] in the same transaction as the
/// version number.
fn v5(s: &str) -> Vec<String> {
    vec![format!(
        "ALTER TABLE {s}.leases ADD COLUMN IF NOT EXISTS value text,
                               ADD COLUMN IF NOT EXISTS value_epoch bigint"
    )]
}

/// Version 6 (ADR 0110): the lease sets' heartbeats, and the heartbeat each lease
/// row's term names.
fn v6(s: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.heartbeats (
                id bigint PRIMARY KEY,
                version bigint NOT NULL,
                beat_unix_ms bigint NOT NULL
            )"
        ),
        format!(
            "ALTER TABLE {s}.leases ADD COLUMN IF NOT EXISTS heartbeat bigint,
                                   ADD COLUMN IF NOT EXISTS heartbeat_nonce bigint"
        ),
    ]
}

/// The changes of version 7 (ADR 0108): the waiters' queue. One row per
/// waiting attempt of a name: its nonce, the channel of its process's
/// session, its place in line (`seq`, from `waiter_seq`) and its expiry
/// by the server's clock; and `waiter_head`, the first unexpired row of a
/// name, which a release notifies on its channel. Run after [`v6`] in the
/// same transaction as the version number.
fn v7(s: &str) -> Vec<String> {
    vec![
        format!("CREATE SEQUENCE IF NOT EXISTS {s}.waiter_seq AS bigint"),
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.waiters (
                name text NOT NULL,
                nonce bigint NOT NULL,
                channel text NOT NULL,
                seq bigint NOT NULL DEFAULT nextval('{s}.waiter_seq'),
                expires_at timestamptz NOT NULL,
                PRIMARY KEY (name, nonce)
            )"
        ),
        format!("CREATE INDEX IF NOT EXISTS waiters_line ON {s}.waiters (name, seq)"),
        // The head of a name's queue for a release: `VOLATILE`, so it
        // reads with a snapshot of its own, taken when it runs (after the
        // release locked the lease row), not the release's from before;
        // and never inlined into it.
        format!(
            "CREATE OR REPLACE FUNCTION {s}.waiter_head(lease_name text, releasing bigint)
                RETURNS TABLE (nonce bigint, channel text)
                LANGUAGE sql VOLATILE AS $$
             SELECT w.nonce, w.channel FROM {s}.waiters w
             WHERE w.name = lease_name AND w.nonce <> releasing AND w.expires_at > now()
             ORDER BY w.seq LIMIT 1
             $$"
        ),
    ]
}

/// The changes of version 8 (ADR 0112): the transfer request beside a
/// term (`transfer_to`, `transfer_by`, `transfer_at`, and the epoch of the
/// term asked, `transfer_epoch`), and `waiters_all`, every unexpired
/// waiter of a name, which a handover notifies. Run after [`v7`] in the
/// same transaction as the version number.
fn v8(s: &str) -> Vec<String> {
    vec![
        format!(
            "ALTER TABLE {s}.leases ADD COLUMN IF NOT EXISTS transfer_to text,
                                   ADD COLUMN IF NOT EXISTS transfer_by text,
                                   ADD COLUMN IF NOT EXISTS transfer_at bigint,
                                   ADD COLUMN IF NOT EXISTS transfer_epoch bigint"
        ),
        // As `waiter_head`: `VOLATILE`, read with a snapshot of its own
        // taken after the handover locked the lease row.
        format!(
            "CREATE OR REPLACE FUNCTION {s}.waiters_all(lease_name text, releasing bigint)
                RETURNS TABLE (nonce bigint, channel text)
                LANGUAGE sql VOLATILE AS $$
             SELECT w.nonce, w.channel FROM {s}.waiters w
             WHERE w.name = lease_name AND w.nonce IS DISTINCT FROM releasing
               AND w.expires_at > now()
             $$"
        ),
    ]
}

/// The changes of version 9 (ADR 0120): a waiter row says what a release
/// needs to pass the term to it (`holder`, the waiter's identity; `ttl_ms`,
/// its TTL; `ticket`, the number of the waiter's write, whose send
/// instant the waiter keeps; `pid`, the server process of the waiter's
/// session; `fresh_until`, one and a half of the waiter's renew
/// intervals after the write, by the server's clock: a waiter that
/// stopped renewing is not passed a term), and `release_one`, one term's
/// release. Run after [`v8`] in the
/// same transaction as the version number.
///
/// `release_one(name, nonce, channel, warm)` locks the lease row while it
/// shows the releasing attempt's `nonce` with a holder (else it returns
/// `NULL` and writes nothing), notifies the name on `channel`, and reads the head
/// of the name's line with a snapshot taken after that lock (each
/// statement of the function takes its own; ADR 0108 orders a waiter's
/// first write with a release by that lock): the first unexpired row,
/// other than the releasing attempt's, that is an older version's (no
/// `pid`: woken only) or is fresh and whose session's server process
/// still runs. A waiter whose process died (once its server process has
/// seen the connection close) or that stopped renewing its row is passed
/// over at once. Then:
///
/// - **The pass**, when the head's row says what a pass needs: the row
///   becomes the head's term (its identity, its attempt's nonce, its TTL,
///   a new renewal version, no heartbeat) in an epoch drawn from
///   `epoch_seq` here, above every epoch the row and the name's record
///   show (rule 1), recorded in `epochs`; the head's row leaves the line
///   first (a head whose row its own leaving deleted meanwhile is not
///   passed the term: a release follows); the head is notified with
///   `<nonce>:<epoch>:<ticket> <name>`. Committed
///   durably (the epoch must outlive a crash). The head's validity counts
///   from before it sent the write numbered `ticket`, which this statement
///   saw committed: before this commit (rule 2).
/// - **Otherwise a release**: the row released (no holder, no nonce, a new
///   renewal version), the head (if any) notified with `<nonce> <name>`,
///   committed without waiting for its flush (ADR 0071).
///
/// With `warm` (the readying's, over a stand-in row held by another
/// nonce) it runs every statement of both branches, each matching
/// nothing: no epoch drawn, nothing written, nobody notified; the
/// session then keeps a plan of each and has loaded the tables, indexes
/// and sequence they touch, so a real pass plans none of them (measured
/// with `psql`: a first pass in a session 1.8–2.0 ms, a later one 0.7 ms).
fn v9(s: &str) -> Vec<String> {
    vec![
        format!(
            "ALTER TABLE {s}.waiters ADD COLUMN IF NOT EXISTS holder text,
                                    ADD COLUMN IF NOT EXISTS ttl_ms bigint,
                                    ADD COLUMN IF NOT EXISTS ticket bigint,
                                    ADD COLUMN IF NOT EXISTS pid integer,
                                    ADD COLUMN IF NOT EXISTS fresh_until timestamptz"
        ),
        // Whether a release may choose a waiter row as the head of its
        // line: unexpired, and an older version's (no `pid`: woken only)
        // or fresh with its session's server process running. The one
        // test of `release_one` and of a waiter's count of the rows ahead
        // of it (ADR 0121).
        format!(
            "CREATE OR REPLACE FUNCTION {s}.waiter_choosable(
                expires_at timestamptz, pid integer, fresh_until timestamptz)
                RETURNS boolean LANGUAGE sql STABLE AS $$
             SELECT expires_at > now()
                AND (pid IS NULL OR (fresh_until > now()
                     AND EXISTS (SELECT 1 FROM pg_stat_get_activity(pid))))
             $$"
        ),
        format!(
            "CREATE OR REPLACE FUNCTION {s}.release_one(lease_name text, releasing bigint, chan text,
                                                      warm boolean)
                RETURNS text LANGUAGE plpgsql VOLATILE AS $$
             DECLARE
                held_epoch bigint;
                recorded bigint;
                head record;
                won bigint;
             BEGIN
                SELECT l.epoch INTO held_epoch FROM {s}.leases l
                WHERE l.name = lease_name AND l.nonce = releasing AND l.holder IS NOT NULL
                FOR UPDATE;
                IF NOT FOUND AND NOT warm THEN
                    RETURN NULL;
                END IF;
                SELECT w.nonce, w.channel, w.holder, w.ttl_ms, w.ticket INTO head
                FROM {s}.waiters w
                WHERE w.name = lease_name AND w.nonce <> releasing
                  AND {s}.waiter_choosable(w.expires_at, w.pid, w.fresh_until)
                ORDER BY w.seq LIMIT 1;
                SELECT r.epoch INTO recorded FROM {s}.epochs r WHERE r.name = lease_name;
                IF warm OR (head.holder IS NOT NULL AND head.ticket IS NOT NULL AND head.ttl_ms > 0
                            AND held_epoch < 9223372036854775807
                            AND coalesce(recorded, 0) < 9223372036854775807) THEN
                    DELETE FROM {s}.waiters w WHERE w.name = lease_name AND w.nonce = head.nonce;
                    IF NOT FOUND THEN
                        head.channel := NULL;
                    END IF;
                    IF warm OR FOUND THEN
                        UPDATE {s}.leases l
                        SET holder = head.holder, nonce = head.nonce,
                            epoch = greatest(nextval('{s}.epoch_seq'), l.epoch + 1,
                                             coalesce(recorded, 0) + 1),
                            version = l.version + 1, ttl_ms = head.ttl_ms,
                            acquired_unix_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
                            renewed_unix_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
                            heartbeat = NULL, heartbeat_nonce = NULL
                        WHERE l.name = lease_name AND l.nonce = releasing
                        RETURNING l.epoch INTO won;
                        INSERT INTO {s}.epochs (name, epoch, ttl_ms)
                        SELECT lease_name, won, head.ttl_ms WHERE won IS NOT NULL
                        ON CONFLICT (name) DO UPDATE SET epoch = excluded.epoch, ttl_ms = excluded.ttl_ms
                        WHERE excluded.epoch > {s}.epochs.epoch;
                    END IF;
                    IF won IS NOT NULL THEN
                        PERFORM pg_notify(chan, lease_name),
                                pg_notify(head.channel,
                                    head.nonce || ':' || won || ':' || head.ticket || ' ' || lease_name);
                        RETURN lease_name;
                    END IF;
                END IF;
                UPDATE {s}.leases l SET holder = NULL, nonce = NULL, version = l.version + 1
                WHERE l.name = lease_name AND l.nonce = releasing;
                IF warm THEN
                    RETURN NULL;
                END IF;
                PERFORM pg_notify(chan, lease_name),
                        CASE WHEN head.channel IS NOT NULL
                             THEN pg_notify(head.channel, head.nonce || ' ' || lease_name) END,
                        set_config('synchronous_commit', 'off', true);
                RETURN lease_name;
             END
             $$"
        ),
    ]
}

/// The schema version recorded, if the `meta` table exists.
async fn version(conn: &mut PgConnection, schema: &str) -> Result<Option<i64>, Error> {
    let exists: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(format!("\"{schema}\".meta"))
        .fetch_one(&mut *conn)
        .await?;
    if exists.is_none() {
        return Ok(None);
    }
    let sql = format!("SELECT value FROM \"{schema}\".meta WHERE key = 'schema_version'");
    Ok(sqlx::query_scalar(AssertSqlSafe(sql))
        .fetch_optional(&mut *conn)
        .await?)
}

/// The session's `synchronous_commit` and the schema version recorded in
/// `schema`, in one round trip (one simple-protocol statement, nothing to
/// prepare; ADR 0065); the version is `None` when the schema or its `meta`
/// table does not exist yet ([`migrate`] creates them).
///
/// Failure model: the server's errors ([`Error::Unusable`] without the
/// privilege to read the schema, [`Error::Unavailable`] for a connection
/// that failed).
pub(crate) async fn session_and_version(
    conn: &mut PgConnection,
    schema: &str,
) -> Result<(String, Option<i64>), Error> {
    let sql = format!(
        "SELECT current_setting('synchronous_commit'), \
         (SELECT value FROM \"{schema}\".meta WHERE key = 'schema_version')"
    );
    match sqlx::raw_sql(AssertSqlSafe(sql))
        .fetch_one(&mut *conn)
        .await
    {
        Ok(row) => Ok((row.try_get(0)?, row.try_get(1)?)),
        // undefined_table, invalid_schema_name: not created yet.
        Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("42P01" | "3F000")) => {
            let sync = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
                .fetch_one(&mut *conn)
                .await?;
            Ok((sync, None))
        }
        Err(e) => Err(e.into()),
    }
}

/// [`Error::SchemaTooNew`] for a schema of version `found`.
pub(crate) fn too_new(found: i64) -> Error {
    Error::SchemaTooNew {
        found,
        supported: SCHEMA_VERSION,
    }
}

/// Creates or migrates the election objects in `schema` (creating the
/// schema if missing): one read when they are up to date; else one
/// transaction under `pg_advisory_xact_lock`, so concurrent opens are
/// safe. Touches nothing outside `schema`.
///
/// Failure model: [`Error::SchemaTooNew`] for a newer schema;
/// [`Error::Unusable`] without the privilege to create it; transient
/// errors as [`Error::Unavailable`].
pub(crate) async fn migrate(conn: &mut PgConnection, schema: &str) -> Result<(), Error> {
    match version(conn, schema).await? {
        Some(v) if v > SCHEMA_VERSION => return Err(too_new(v)),
        Some(v) if v == SCHEMA_VERSION => return Ok(()),
        _ => {}
    }
    let s = format!("\"{schema}\"");
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("election-postgres migrate {schema}"))
        .execute(&mut *tx)
        .await?;
    let has_schema: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(schema)
            .fetch_one(&mut *tx)
            .await?;
    if !has_schema {
        sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {s}")))
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value bigint NOT NULL)"
    )))
    .execute(&mut *tx)
    .await?;
    match version(&mut tx, schema).await? {
        Some(v) if v > SCHEMA_VERSION => return Err(too_new(v)),
        Some(v) if v == SCHEMA_VERSION => {
            tx.rollback().await?;
            return Ok(());
        }
        _ => {}
    }
    for stmt in v1(&s)
        .into_iter()
        .chain(v2(&s))
        .chain(v3(&s))
        .chain(v4(&s))
        .chain(v5(&s))
        .chain(v6(&s))
        .chain(v7(&s))
        .chain(v8(&s))
        .chain(v9(&s))
    {
        sqlx::query(AssertSqlSafe(stmt)).execute(&mut *tx).await?;
    }
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {s}.meta (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )))
    .bind(SCHEMA_VERSION)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
