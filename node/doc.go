// Package node runs one Fence node: a hashicorp/raft instance (a single voter
// by default, or a member of a cluster) whose FSM is a state.Machine, with a
// durable log and stable store (fsync'd before every reply, G6), file
// snapshots, the leader clock of docs/design.md §2, the expiry ticker,
// waiters for blocking acquires and linearizable reads.
//
// # Cluster mode
//
// With Config.Mux (raftstore.Listen) raft runs over TCP on the mux's port
// and the node is one member of a cluster. A new data dir bootstraps a
// one-voter cluster of itself (Config.Bootstrap), or the static voter set
// Config.Peers (every node given the same list), or nothing: it waits to be
// added by the leader (Node.AddVoter, what a joining node asks for through
// any member). A data dir with raft state ignores both: a restarted node
// rejoins with its log. Open returns once raft runs; Node.Ready says when
// the node can take part (a leader is known, and it has applied what it
// knows to be committed, or it is in office). Only the leader in office
// serves: on any other node Apply, the reads and the membership changes
// answer ErrNotLeader before anything is proposed, and a node never reads
// its own state for a client (it may be stale). Leadership lost with a
// command in flight is ErrUnknownOutcome, never ErrNotLeader. Close on a
// leader with other voters first hands leadership over
// (raft.LeadershipTransfer, at most twice the election timeout). A removed
// node keeps running as a follower in no configuration (it never stands
// for election, so it grants nothing) and can be added again. A node that
// does not lead warns when its flags' rules differ from the log's: the
// log's are in force; a node's flags are proposed only when it takes office.
//
// # Log store
//
// The raft plumbing under the node is package raftstore: Open takes the
// data dir's lock and opens the log and stable store (raftstore.Open), and
// wraps them and the snapshot store in raftstore's fail-stop guards. A new
// data dir gets hashicorp/raft-wal (DataDir/wal): each batch of entries is
// appended to a segment file with one fsync. It is the only log store: a
// dir holding a raft-boltdb log (DataDir/raft.db) is refused (logs are not
// migrated). A running node holds an flock on
// DataDir/LOCK, so a second process on the same dir fails after
// Config.LockTimeout.
//
// # Group commit
//
// Concurrent proposals are grouped twice. The node writes the commands
// that queue while the previous group is in flight as one log entry (a group
// entry: first byte 0xC1, the group's one Now and Slack, then each command
// as state encodes it; group.go, groupcodec.go), with no timer: on an idle
// node a command is proposed at once, alone. The FSM applies a group's
// commands in order under one lock and answers each caller with its own
// Result; a failure (leadership lost, a fatal store error) answers every
// command of the group with the error (ErrNotLeader, ErrUnknownOutcome,
// ErrClosed). Entries written before groups existed (one command each)
// still apply as they did. Then raft writes the entries that queued during
// the previous fsync as one batch.
//
// # Fail-stop
//
// The log store, raft's stable store and the snapshot store are wrapped
// (raftstore.GuardedLog, GuardedStable, GuardedSnapshots: under raft, so a
// follower's appends, term and vote and a snapshot installed from the
// leader are guarded too) so that any write error (disk full, I/O error)
// is fatal: the node records it (raftstore.FailStop), stops acknowledging
// (a proposal in flight or made later gets an error wrapping
// ErrUnknownOutcome or ErrClosed, reads get ErrNotLeader, it never takes
// office again, the log takes no append, the snapshot store no snapshot,
// and it grants no vote) and calls Config.OnFatal, which by default logs and exits with
// status 70. A cluster leader also steps down (watchFatal: a barrier, an
// append the guard refuses): if OnFatal returns, a leader whose failure
// was not an append (raft steps down only then) would go on heartbeating
// and keep the others from electing. A log that failed an append
// may hold part of a batch, and raft-wal refuses every later append after
// one: serving on would either wedge or lie. A restart replays what is
// durable. An Apply whose entry was handed to raft but whose fate is
// unknown (leadership lost, shutdown or failure in flight) returns
// ErrUnknownOutcome: the client retries with the same op_id or request_id.
// WAL segment fsyncs are counted (Status.LogSyncs).
//
// # Snapshots
//
// The node takes a snapshot once the log written since the last one holds
// Config.SnapshotBytes bytes of command data, or Config.SnapshotThreshold
// commands and a quarter of the last snapshot's bytes of command data (a
// large state is copied whole while applies wait, and then encoded and
// written beside them, so its snapshot writes stay within 4 times the
// log's bytes; raft's own timed check is off: it rewrote a large state
// every 30 s), and raft then compacts
// the log behind it, keeping Config.TrailingLogs entries (default 64).
// raft-wal deletes a segment file only once every entry in it is
// compacted, and preallocates the next, so the WAL dir holds at most about
// SnapshotBytes + TrailingLogs × the largest entry + two segments
// (TestWALSegmentsDeletedAfterSnapshots). A restart restores the last
// snapshot and replays the short tail. Open gives up
// after Config.ReadyTimeout, and then closes everything: raft never answers
// a future still queued when it shuts down, so the node never waits on a
// raft future without also watching its own shutdown (Node.await).
//
// # Rules
//
// The machine's rules (state.Config: MaxTTL, id memory, caps) are in its
// log, never in flags: the FSM starts from state.New (the log format's
// initial rules) and learns the rest from OpConfig entries and snapshots.
// Config.Rules is what the operator wants; once in office, before its clock
// runs (so before it serves), a node whose recorded rules (Node.Rules)
// differ proposes them as an OpConfig, logging both. They apply to later
// commands only, so a restart with a lower MaxTTL keeps every acknowledged
// lease and token. Whoever validates a request before proposing it must use
// Node.Rules, not its flags.
//
// # Signing keys
//
// In office, before its clock runs, a leader whose state has no signing key
// proposes one (OpKeyRotate, only if none; its seed from crypto/rand), and
// the node is not Ready until its state holds a key. Every grant the
// Service answers (acquire, renew, replayed, session) and a Get of a held
// lock carry fence.Lease.Signed, made here with fence.Sign from the key
// the state records for the lease (signing.go); a Write, Add or Delete
// carrying a signed token is verified against the applied key set before
// it is proposed (*fence.ForgedTokenError, nothing proposed).
//
// # Time
//
// The node never puts wall-clock time into a command. On taking office, after
// a raft barrier (so every committed entry has been applied), the leader reads
// base = Machine.Now() and starts a monotonic stopwatch; its clock is
// base + elapsed, and every proposed command carries Now = clock. Time with
// no leader — a single node that is down — therefore does not count: leases
// are extended by the gap, never shortened.
//
// A term of office belongs to one raft term: the term is read before the
// barrier and must be the same after it (terms only grow, so the barrier
// was committed by this node leading that term). The clock serves only
// while raft's current term is still that one: raft's leadership channel
// keeps only its latest value, so a node that lost and regained leadership
// may see one "leader" notice, and a clock of the earlier term must not
// stamp a command of the later one (its slack bookkeeping misses what the
// leaders between charged) nor answer a read before that term's barrier.
// A group is checked again right before it goes to raft (refused with
// ErrNotLeader, nothing proposed). A test harness's Config.Clock may scale
// the stopwatch or move the wall clock, which the node reads only for its
// logs and a backup's wall time.
//
// # Expiry
//
// A goroutine on the leader sleeps until clock - slack reaches
// Machine.NextDeadline() (a decision time; both re-read after every applied
// batch) and then proposes one state.OpTick, which expires what is due and
// hands freed locks to their next waiters in that one apply.
//
// # G3: no expiry before TTL after the commit
//
// A command is stamped when proposed (a group once, as one command that
// starts every lease its commands start), but committed (fsync'd) a little later,
// so counting a lease from its stamp would let it end up to one commit lag
// early. Each term keeps the Now of every proposal in flight and a set of
// charges (until, lag). When raft's future returns a command's applied
// result at leader clock A, its lag is A - Now; if the command started
// leases — its grant or renewal, every lock it handed to a waiter, and the
// session period an open or keepalive starts — and
// d is the longest TTL among them, (A + d, lag) is charged. Every command Q
// is stamped with Slack = max(largest lag charged with until > Q.Now,
// Q.Now - oldest in-flight Now), and the machine makes Q's expiry decisions
// at Q.Now - Slack (never earlier than a previous decision), while Q's own
// grants and renewals start at Q.Now. A charge whose until has passed is
// dropped: the slack decays once the leases it protected are over.
//
// Why it holds (clock = this leader's monotonic clock): lease g is started by
// a command stamped P with TTL d, committed at C, and its result seen at
// A >= C, so lag = A - P >= C - P and the charge is (A + d, lag) or one that
// covers it (later until and larger lag). g starts at the machine time of
// its apply, which is >= P and >= every decision time before it, so g ends
// only when some command Q applied after it has Q.Now - Slack_Q >= P + d.
// If Q was stamped before g, Q.Now - Slack_Q <= Q.Now <= P. If Q was stamped
// while g was in flight, Slack_Q >= Q.Now - P, so its decision time is <= P.
// If Q was stamped after A (stamping, the in-flight set and charging share
// one mutex, so one of the three cases applies): either Q.Now < A + d, the
// charge is live and Slack_Q >= lag, so Q.Now >= P + d + lag = A + d; or
// Q.Now >= A + d already. Either way Q.Now >= A + d >= C + d: the lease ended
// no earlier than d after its commit. A renewal is the same with P its stamp
// and d its new TTL; a lock handed to a waiter is a lease started by the
// command that hands it on. A command that starts no lease charges nothing
// (its lag is kept only as a metric).
//
// Across terms: a new leader's clock starts at base = Machine.Now(), so time
// with no leader does not count. If leases are held, it starts with one
// charge (L + M, M), where M = Machine.MaxSlack() (the largest Slack ever
// applied) and L = Machine.LatestExpiry() (the latest expiry among held
// leases). Take a lease g of an earlier term, expiring at E <= L, whose
// lag was carried: some command stamped after A_g was applied. If that
// command was stamped while g's charge was live, its Slack >= lag_g, so
// M >= lag_g; a command Q of the new term ends g only if Q.Now - Slack_Q >=
// E, and either the charge is live (Slack_Q >= M) or Q.Now >= L + M; both
// give Q.Now >= E + M >= P + d + lag_g = A_g + d >= C + d. If it was stamped
// after the charge ended, base >= A_g + d >= C + d already. A lease not held
// at takeoffice can no longer be ended, so only held leases matter. What
// remains is a lease whose lag was never carried: its leader never saw its
// result, or lost office or crashed before any later command was applied.
// Its lag is lost with the term, and the splice of the two terms' clocks at
// base may drop up to that lag. The lease still ends no earlier than d
// after its stamp on the leader clocks (base >= P, and the new clock reaches
// P + d no sooner than the old one would have), so a client, whose deadline
// counts from its send time before P, is still safe (G8).
//
// The cost: a lease started by a slow commit, and every lease and tick
// decided while its charge is live, runs up to that lag late — until that
// lease's TTL plus the lag has passed; after a restart, up to MaxSlack late
// until the leases held at the restart are over. Charges are kept as their
// Pareto frontier (a charge with an earlier until and a smaller lag than
// another is dropped), at most 64 apart: past that, the two neighbours with
// the closest lags merge into one with the later until and the larger lag,
// which only lengthens the slack.
//
// # Blocking acquires
//
// An acquire with Wait > 0, or with a RequestID (it may be the retry of a
// queued one, even with Wait 0), registers a waiter for its request_id (a
// random one is made when the caller gave none) before it is proposed,
// because the grant may be applied before raft's future returns. Each call
// registers its own waiter, so every attempt of one request_id waiting here
// receives the state.Event of the grant or of the wait running out. The
// wait is bounded by Wait + Config.WaitMargin even if the caller's context
// has no deadline; past the bound, or when the caller's context ends, the
// attempt ends. If another attempt of the same request_id is still
// registered on this node, it owns the queue entry and nothing is
// proposed (a retry that gives up first must not withdraw the wait its
// first, still connected, attempt is in). The last attempt to end proposes
// state.OpCancelWait naming the highest attempt this node has seen for the
// request_id (Result.Attempt, Event.Attempt), so the entry is not left
// queued for nobody: the machine drops the queued request, or, if the
// grant won the race, releases that lease and hands the lock on. If a
// retry was applied since (a newer attempt, on its way here or on another
// connection), the cancel is a no-op: a dropped connection cannot cancel
// the retry's wait, nor release the lease the retry returned.
//
// A session-bound acquire with a Seq waits under
// state.SessionRequestID(Session, Seq), which the node sets as its
// RequestID when it has none (the machine would give it the same), so a
// client that resends the seq after a lost connection re-attaches to the
// same wait. Its Event may also end it with a *fence.SessionExpiredError:
// the session was closed or expired while it waited.
//
// Orphans: acquires queued when a node takes office were waited for on a
// node that is gone (a crash, a restart, or a leader that lost office: its
// waiting calls are answered ErrUnknownOutcome at once, so their clients
// retry with the same request_id at the new leader). After Config.WaiterGrace the node
// cancels (with the attempt recorded at takeoffice) every one that no call
// on this node waits for; a client that retried within the grace made a
// newer attempt and keeps its place. During the grace an orphan may be
// granted the lock (it is first in line); its cancel at the grace's end
// then releases that lease and hands the lock on, so a dead waiter holds a
// lock for at most the grace, never its whole TTL. Session-bound waiters
// follow the same rule: a live session does not make its queued acquire
// wanted (its client may be gone with its stream, the session not yet
// expired), and a client that reconnects resends every unanswered seq,
// which re-attaches under the same request_id within the grace.
//
// # Reads
//
// Reads use the read-index protocol: note raft's commit index, confirm
// leadership with VerifyLeader, check the term of office is still raft's
// term (then the noted index covers every entry committed before the read
// began), wait until the FSM has applied up to the noted index, then read
// the machine under a read lock at the leader's clock.
package node
