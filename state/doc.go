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
// and carried by snapshots. A machine starts from [DefaultConfig] ([New]);
// an OpConfig applies to the commands after it and never undoes what was
// decided before it (a lease granted with a TTL above a lowered MaxTTL
// keeps its remaining time; its renewals are cut to the new bound). The
// only legal way to change the rules of a running store is an OpConfig in
// its log: the node proposes one when the operator's
// configuration differs from [Machine.Config]. [NewWithConfig] is for tests
// and tools, never for a replica.
//
// # Config
//
// [DefaultConfig] is the rule set before any OpConfig and what a node
// proposes when the operator sets nothing: ids kept at least 3 minutes and at most 24
// hours, up to a million of each; at most 1,024 waiters on a lock and
// 100,000 in all; at most a million locks held, delayed or with waiters
// (MaxLocks); at most 100,000 fenced
// resources holding 256 MiB of values; at most 100,000 live sessions
// (MaxSessions) with 4,096 unacknowledged saved results each
// (MaxSessionResults); a zero cap is no cap. [Config.Validate] names the first field out of bounds; an
// OpConfig that fails it is refused and changes nothing. A lease granted
// under a higher MaxTTL keeps the time it has left, but every renewal is
// cut to the MaxTTL in force: one with TTL 0 (the lease's own) renews for
// min(own TTL, MaxTTL), and the lease's TTL becomes that; a renewal asking
// for more than MaxTTL is refused.
//
// Formats: commands are encoded as version 1 ([CommandVersion]) and
// snapshots as "fence-state/2" (Restore also reads "fence-state/1"); both are pinned byte for byte by golden
// files in testdata/. A binary refuses a version or format it does not
// know, and an unknown field, rather than misreading it (fail-stop).
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
// Reads ([Machine.Lock], [Machine.Locks], [Machine.LocksPage]) change
// nothing and judge as Apply does: at the machine's decision time (see
// Time), with the lock settled as the next command would settle it — a
// lease past its end is gone (its lock-delay starts), a waiter about to be
// handed the lock makes it not free, waits that ran out are not counted.
// So a lock reads free ([LockInfo.Free]) iff an acquire applied now (at the
// same decision time) is granted. The time passed to a read only counts the
// remaining times it reports (from server time, so a lease still held at
// the decision time may show 0 left).
//
// [Machine.Queued] lists the waiting acquires with their attempts.
//
// Renew and release refusals: a token above the counter was never issued
// (UnknownToken); the lock's last token whose lease expired gets
// LeaseExpired; a token older than the lock's last grant gets StaleToken;
// anything else (a released lease, a token of another lock, a lock never
// seen) gets NotHolder.
//
// # Lock boundaries (settle.go)
//
// A lock is held by one exclusive lease, or by shared leases
// (Command.Mode), or — a semaphore (Command.Permits > 0) — by up to that
// many leases, each its own token. A set acquire (Command.Locks) asks for
// several locks at once, each in its own mode: it is granted on all of
// them under one lease and one token, or on none; it is released,
// renewed and ended (expiry, session end) as one lease by any of its
// names, and each of its locks reports it among its holders. The machine
// sorts a set by name, so the order a request lists it in decides
// nothing. A request that names a semaphore's lock with another permit
// count than the lock's (while anybody holds or waits for it) is refused
// with *fence.PermitsMismatchError.
//
// Fairness: each lock's queue is strict FIFO. A waiter is granted when it
// heads the queue of every lock it names and each has room for it; a set
// waiter keeps its place in every queue, so neither single-lock acquirers
// nor later sets pass it, and a queued exclusive request keeps later
// shared ones out (no writer starvation). No two waiters deadlock: the
// oldest waiter heads every queue it is in and is granted once the leases
// ahead of it end. Settling one lock can change others (a set's lease
// ends on all its locks; a set's grant or departure changes every queue
// it was in): settle.go settles them on a work list, in the order they
// were reached, never in map order.
//
// Every change of a lock (a grant, a release, an expiry, a waiter queued
// or leaving without a grant) is in Result.Changes, in the order made:
// what the node's watchers follow.
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
// waits. It is never granted twice. The payload compared is (name, owner,
// ttl, lock_delay); wait is not part of it, because a retry may carry only
// what is left of the wait. A try-acquire refused as busy is not
// remembered, and neither is one whose wait ran out: nothing was granted
// under its id, so a retry is a new request, answered with the lock as it
// is now.
//
// Attempts: each applied retry of a request still queued or holding its
// lock is a new attempt of it (Result.Attempt: 1 for the first, then +1;
// Event.Attempt says which attempt a grant or a wait's end found). An
// OpCancelWait names the attempt whose client went away and acts only if it
// is still the current one: a retry that arrived first owns the wait (or
// the lease a grant gave it), and the first attempt's late cancel is a
// no-op. A cancel with Attempt 0 acts on whatever attempt is current.
//
// op_id: keyed by (resource, op_id) — by the first 128 bits of the
// SHA-256 of both (opKeyOf; a collision is as likely as one of SHA-256's
// cut to 128 bits: resources.go). An accepted write, add or delete is
// remembered with a hash of (op, token, value or delta) — the first 96 bits
// of its SHA-256 — and its version and (for add) value. A repeat with
// the same payload returns that saved result (Replayed) before any token
// check — an applied op stays applied even after a newer token arrived — and
// a different payload is OpConflict. Refused operations are not remembered.
//
// # Sessions
//
// [OpSessionOpen] opens a session with a TTL (fence.MinTTL..MaxTTL) and
// returns its id (1, 2, ...: a counter in the state, never reused). A
// RequestID on the open is its idempotency key: a retried open with it
// while its session is live gets that session (Replayed). A session ends
// when the decision time reaches its last keepalive ([OpSessionKeepAlive],
// or the renewal of one of its leases) plus its TTL — never earlier, as a
// lease (G3) — or when it is closed ([OpSessionClose]). Every Apply first
// ends the sessions due at its decision time (by expiry, then id), so no
// command's outcome depends on whether a Tick ran; [Machine.NextDeadline]
// includes the earliest session expiry. Config.MaxSessions caps the live
// sessions (an open beyond it is refused).
//
// An acquire with a Session is session-bound: its TTL is ignored (the lease
// reports the session's TTL and remaining time) and it ends with the
// session: on expiry as EXPIRED at the session's expiry (its lock-delay
// applies), on close as released (no lock-delay). All of a session's
// leases end in the one apply that ends it, each lock (by name) handed to
// its next waiter in that apply, and its queued acquires end with an Event
// carrying a *fence.SessionExpiredError. Ending a session costs O(k log k)
// for its k leases and waiters (plus the queues of the locks it waits on),
// never a scan of all locks or sessions. A session-bound acquire with a Seq
// and no RequestID gets the RequestID [SessionRequestID](session, seq); a
// RequestID with that reserved prefix naming another session or seq is
// refused. Such ids are not remembered in the request memory: the
// session's saved result answers their retries.
//
// Exactly-once: a command with a Session and Seq > 0 (acquire, renew,
// release, write, add, delete, keepalive, close) is answered once. Its Ack
// (at most its Seq) first forgets the session's saved results below Ack
// and raises the session's floor to it; a Seq below the floor is refused
// (*fence.InvalidError, field "seq"); a Seq with a saved result gets it
// (Replayed, no Events but those of this apply; another op or payload for
// the same Seq is an OpConflict); otherwise the command is applied and its
// Result saved. A saved acquire that was granted or queued answers with its
// request's current outcome (queued: a new attempt; granted and held: the
// lease; ended: that end); one whose wait was cancelled is applied anew.
// Config.MaxSessionResults bounds the saved results of a session: a new Seq
// beyond it is refused (ResourceExhausted) until the client acknowledges.
// A command on a session that is not live gets *fence.SessionExpiredError;
// a session's saved results end with it.
//
// Memory: a session costs O(its leases + its queued acquires + its
// unacknowledged saved results). Measured (BenchmarkSessionBytes): about
// 660 bytes for a session holding one bound lease (the lock itself
// included), and about 260 bytes per saved result (a sequenced add; a
// write's value is not kept, a lease or an error is of the same order).
// With the defaults (100,000 sessions, 4,096 saved results each) saved
// results could reach about 100 GB if no client acknowledged: the bound
// that matters is acknowledgement (a client acknowledges every reply it
// receives, so a session keeps about as many saved results as it has
// requests in flight), and MaxSessionResults is the guard against one that
// does not. Ending a session that holds 10,000 leases, each handed to a
// waiter, takes about 25 ms in one apply (BenchmarkSessionExpiry).
//
// # Fenced resources and delete
//
// A write, add or delete of a resource is accepted with a token issued by
// the store (else UnknownToken) and not older than the last one it accepted
// (else StaleToken). [OpDelete] drops the value (and its bytes from the
// total) but keeps the resource as a tombstone with its last token and
// version ([ResourceState.Deleted]): a stale writer is refused after a
// delete as before it, and a later write or add (with a token at least the
// delete's) revives it. A delete of a resource never written leaves a
// tombstone too. Tombstones are never forgotten and count in
// Config.MaxResources (with 0 bytes of value).
//
// # Caps
//
// A command that would take the store over a cap of its Config is refused
// with a *fence.ResourceExhaustedError naming the limit (and the config
// field) and changes nothing: a new waiter beyond MaxWaitersPerLock on its
// lock or MaxWaiters in all; an acquire that would make a lock exist
// beyond MaxLocks (locks held, delayed or with waiters; a lock already
// existing is not new, an idle tombstone does not count, and at the cap
// everything due is settled first, as a Tick would); a new resource beyond MaxResources; a write or
// add that grows the total of values beyond MaxResourceBytes (a change that
// does not grow it is accepted); a new op_id or request_id the id memory
// cannot hold (Retention); a session opened beyond MaxSessions; a new Seq on
// a session holding MaxSessionResults unacknowledged results (a retry of a
// saved Seq is still answered); a session opened, or an acquire queued, by
// a principal other than "" holding MaxSessionsPerPrincipal live sessions
// or MaxWaitersPerPrincipal queued acquires (quota.go: the counts are
// derived, recounted by a restore). A cap is checked after the token: a stale token
// is refused as stale. The bound itself is allowed. What a lowered cap
// already exceeds stays until it ends.
//
// Tokens end at fence.MaxTokenJSONInt (2^53-1, exact in JSON; a backup whose
// header names a counter above it is refused). Once the counter is there an
// acquire that would be granted or queued is refused with a
// *fence.ResourceExhaustedError naming the token counter and the bound, and
// changes nothing; a waiter the lock would pass to ends with that error
// (not remembered, as a cancelled wait); an acquire of a held lock is still
// busy. OpBumpToken above the bound is refused. Only a restore's floor gets
// the counter near it.
//
// # Authentication and ownership
//
// The auth state (enabled flag, tokens by id with the SHA-256 of their
// secret, roles with permissions by name prefix and bound certificate
// names, the number of bootstraps) changes only by ops 14..20 and is in
// snapshots; the machine never makes a secret (auth.go). Every lease,
// queued request and session records Command.Principal; a renew, release,
// request_id retry or session command by another principal is refused
// with a *fence.PermissionDeniedError and changes nothing, unless
// Command.Admin (the server sets it for admins, and for every command
// while checking is off).
//
// # Signing keys
//
// The state holds the Ed25519 signing keys of signed grants (keys.go:
// seeds drawn by the proposing node, never by the machine) and records
// with every lease which key signs it — the signing key at its grant, for
// the lease's whole life (a renew does not move it). OpKeyRotate (22) adds
// the signing key (a variant only when there is none, for a leader taking
// office); OpKeyRetire (23) retires a key that is not the signing key, and
// the machine drops it when no live lease is signed by it (it counts them;
// a restore recounts); its forced variant (Delta != 0, --now) drops it at
// once and moves its live leases to the signing key. The proof itself
// (fence.Sign) is made outside the machine from LeaseSigner — the lease's
// key if the state holds its seed, else the signing key (a restore keeps
// the backed-up keys public-only) —: deterministic, so the same log gives
// the same proof everywhere. Keys and the cluster ids restored from are in
// snapshots.
//
// # Retention (what is forgotten, and when)
//
// The promise (G5): an id is remembered for at least Config.MinIDRetention
// (3 minutes by default) after it was remembered, in server time — a retry
// within that window is never applied twice — and forgotten after at most
// Config.IDRetention (24 hours). Between the two, ids are forgotten by
// count, oldest first, once Config.MaxOps (op_ids) or Config.MaxRequests
// (request_id outcomes) are remembered. When the memory is full and its
// oldest id is younger than MinIDRetention, a command that would remember a
// new id is refused with a *fence.ResourceExhaustedError naming the limit
// (it is not applied; the client may retry later); a young id is never
// forgotten to make room. An OpConfig that lowers MinIDRetention (or
// IDRetention below it) applies to ids accepted from then on: the old
// minimum still holds until it has passed since the OpConfig, so an id keeps
// the window it was accepted under. Commands without an id, and retries of
// remembered ids, are not refused. The stated load: 5,000 id-bearing
// operations per second for the 3-minute window is 900,000 ids, within the
// default million of each kind. [Machine.OldestIDAge] is the age of the
// oldest remembered id (the server exports it as a metric).
//
// At the start of every Apply, after server time advanced, the machine
// forgets, oldest first:
//   - remembered request_id outcomes at least IDRetention old (counted from
//     when the outcome became final), and beyond MaxRequests those at least
//     MinIDRetention old. Requests still queued or holding their lock are
//     never forgotten: they are part of the lock. Only final outcomes are
//     counted, and a request admitted while queued or holding is remembered
//     when it ends even if the memory is full then, so the memory may exceed
//     MaxRequests by the number of requests live at that moment.
//   - remembered op_ids at least IDRetention old, and beyond MaxOps those at
//     least MinIDRetention old.
//   - tombstones of locks: a lock that is free, not delayed and without
//     waiters is kept with its last token (so late renews and releases get
//     StaleToken or LeaseExpired) until it has been idle for IDRetention,
//     or beyond min(MaxRequests, MaxIdleLocks) idle locks (100,000, a
//     constant of the format). After that a renew or release with an old
//     token of that lock gets NotHolder (still a refusal).
//     A tombstone holds the lock's name (at most 512 bytes), its last
//     owner (at most 256) and a few hundred bytes of bookkeeping: at most
//     about 100 MB for 100,000 with the longest names.
//
// With MinIDRetention 0 ids are forgotten by count at any age. A node
// proposes DefaultConfig (or the operator's) with OpConfig, and the
// promise holds from that entry on.
//
// Memory: a remembered op_id costs about 65 bytes of heap
// (BenchmarkIDMemoryBytes at 200,000 ids: 64.9 without a principal, 73.7
// with one, which also puts each id in its principal's queue) and about
// 41 bytes of snapshot whatever the length of its names (a 16-byte key
// hashed from resource and op_id: memory.go and docs/design.md, The id
// memory); a remembered request_id about 190 bytes of heap with 26-byte
// ids, plus the bytes of distinct names and owners. The default caps (a
// million of each) are about 250 MB when full, which a steady load keeps
// them: plan for it or lower MaxOps/MaxRequests (and with them the load
// the window holds). A snapshot of 600,000 remembered ids
// (BenchmarkSnapshotIDs) takes about 0.6 s to write and 1.6-1.9 s to
// restore on a 2-core machine (docs/benchmarks.md). Only the
// copy ([Machine.SnapshotView], about a tenth of the write: 0.06-0.08 s)
// needs applies stopped; the encoding ([SnapshotView.WriteTo]) runs beside
// them.
//
// Fenced resources (their value, last token and version) are data and are
// never forgotten; deleted ones stay as tombstones.
//
// After an id is forgotten, a retry with it is a new request. Clients must
// not retry an id older than MinIDRetention and expect it to be remembered.
package state
