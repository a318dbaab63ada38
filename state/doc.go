// Package state is the deterministic heart of Fence: locks with FIFO waiters,
// the global fencing-token counter, fenced resources, and the op_id and
// request_id memories, as plain Go data. [Machine.Apply] takes one [Command]
// at a server time carried in the command and returns a [Result]; nothing
// here reads a clock, does I/O, starts a goroutine, or lets map iteration
// order decide anything. The node replicates commands through raft (encoded
// with [Command.MarshalBinary]) and applies them in log order on every
// replica; [Machine.Snapshot] and [Machine.Restore] move the whole state.
//
// # Contract: the log decides
//
// Replaying the same log gives the same state on any node, with any flags,
// on any version that can read it. Every rule that can change a command's
// outcome is either a constant of the log format or recorded in the log:
// the rules of the second kind are a [Config], set by an [OpConfig] command
// and carried by snapshots. A machine starts from [InitialConfig] ([New]);
// an OpConfig applies to the commands after it and never undoes what was
// decided before it (a lease granted with a TTL above a lowered MaxTTL
// keeps it). The only legal way to change the rules of a running store is
// an OpConfig in its log: the node proposes one when the operator's
// configuration differs from [Machine.Config]. [NewWithConfig] is for tests
// and tools, never for a replica.
//
// # Config
//
// [InitialConfig] is the rule set of log format 1, which had no OpConfig:
// a log or snapshot written before OpConfig existed replays under exactly
// the rules that decided it (100,000 ids of each kind, forgotten by count
// at any age or after 24 h; no caps; the largest MaxTTL, since that code
// refused a TTL above the server's flag before proposing it). Replaying it
// "identically" requires those rules, including the silent forgetting
// (fault G5 of that format): replay must reproduce what was acknowledged,
// not what should have been. [DefaultConfig] is what a node proposes when
// the operator sets nothing: ids kept at least 3 minutes and at most 24
// hours, up to a million of each; at most 1,024 waiters on a lock and
// 100,000 in all; at most 100,000 fenced resources holding 256 MiB of
// values. [Config.Validate] names the first field out of bounds.
//
// # Locks
//
// An acquire is granted when the lock is free: no unexpired lease, no
// lock-delay running, and nobody queued. The token is the next value of one
// counter shared by all locks, starting at 1. Otherwise it is busy, or, with
// Wait > 0, it queues; waiters are granted in arrival order when the lock
// frees, and the grant (or the wait running out) is an [Event] in the Result
// of whatever command decided it. A waiter gets the lock if its wait had not
// run out at the instant the lock became available (the end of the lease or
// of its lock-delay), even if the command that notices comes later; its lease
// then runs a full TTL from that command's time.
//
// Expiry is applied by OpTick for everything due ([Machine.NextDeadline]
// says when) and lazily by any command that touches the lock. A lease ends
// at the time of its grant or last renewal plus its TTL, as seen from the
// decision time (see Time): never earlier (G3). A lease that expires (not
// one released) with a lock-delay keeps the lock from being granted until
// expiry + lock-delay.
//
// [Machine.NextDeadline] also reports the end of a lock-delay on a lock with
// no waiters: the Tick at that instant makes the lock idle so its tombstone
// can later be forgotten.
//
// Reads ([Machine.Lock], [Machine.Locks]) change nothing: at the time asked
// they show a lease past its expiry as gone (with its lock-delay), but a
// waiter holds the lock only once a command (a Tick) has handed it over.
//
// Renew and release refusals: a token above the counter was never issued
// (UnknownToken); the lock's last token whose lease expired gets
// LeaseExpired; a token older than the lock's last grant gets StaleToken;
// anything else (a released lease, a token of another lock, a lock never
// seen) gets NotHolder.
//
// # Time
//
// Each command carries Now and Slack. Server time (Machine.Now) is the
// largest Now applied; grants and renewals start at it, waits are counted
// from it, and remaining times reported to clients count from it. Every
// expiry decision — a lease ending (lazily, by a Tick, or as seen by a
// renew, a release or a request_id replay), a wait running out, a lock-delay
// ending, and whether a waiter's wait had run out when the lock became
// available — is made at the decision time instead: the largest Now - Slack
// applied so far (and at least 0). It never decreases and never exceeds
// server time. The node sets Slack to the commit lag it has measured, so a
// lease granted by a command stamped P and committed at C ≤ P + lag is never
// expired by a command stamped before C + TTL (the node package doc has the
// argument). [Machine.NextDeadline] is in decision time; [Machine.MaxSlack]
// is the largest Slack applied. Both the decision time and MaxSlack are in
// snapshots.
//
// # Idempotency
//
// request_id: a retried acquire gets the outcome of its first attempt — the
// same lease (Remaining recomputed) while it is held; LeaseExpired or
// NotHolder with its token once it expired or was released; Queued while it
// waits; Busy with Waited once the wait ran out. It is never granted twice.
// The payload compared is (name, owner, ttl, lock_delay); wait is not part of
// it, because a retry may carry only what is left of the wait. A try-acquire
// refused as busy is not remembered.
//
// op_id: keyed by (resource, op_id). An accepted write or add is remembered
// with a hash of (op, token, value or delta) and its token, version and (for
// add) value. A repeat with the same payload returns that saved result
// (Replayed) before any token check — an applied op stays applied even after
// a newer token arrived — and a different payload is OpConflict. Refused
// operations are not remembered.
//
// # Retention (what is forgotten, and when)
//
// At the start of every Apply, after server time advanced, the machine
// forgets, oldest first:
//   - remembered request_id outcomes beyond Config.MaxRequests, or whose
//     outcome became final at least Config.IDRetention ago in server time.
//     Requests still queued or holding their lock are never forgotten: they
//     are part of the lock.
//   - remembered op_ids beyond Config.MaxOps, or accepted at least
//     Config.IDRetention ago.
//   - tombstones: a lock that is free, not delayed and without waiters is
//     kept with its last token (so late renews and releases get StaleToken
//     or LeaseExpired) until it has been idle for Config.IDRetention, or
//     beyond Config.MaxRequests idle locks. After that a renew or release
//     with an old token of that lock gets NotHolder.
//
// Fenced resources (their value, last token and version) are data and are
// never forgotten.
//
// After an id is forgotten, a retry with it is a new request. Clients must
// not retry older than the retention (24 h by default).
package state
