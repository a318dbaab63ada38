// Package node runs one Fence node: a hashicorp/raft instance (a single voter
// by default) whose FSM is a state.Machine, with a durable log and stable
// store (fsync'd before every reply, G6), file snapshots, the leader clock of
// DESIGN.md §2, the expiry ticker, waiters for blocking acquires and
// linearizable reads.
//
// # Log store
//
// A new data dir gets hashicorp/raft-wal (DataDir/wal): each batch of
// entries is appended to a segment file with one fsync. A dir that already
// holds a raft-boltdb log (DataDir/raft.db, two fsyncs per batch) keeps
// using it; Config.LogStore can name either kind, and a dir holding the
// other kind is refused (logs are not migrated). Concurrent proposals are
// group-committed: raft writes what queued during the previous fsync as one
// batch. A running node holds an flock on DataDir/LOCK, so a second process
// on the same dir fails after Config.LockTimeout.
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
// # Expiry
//
// A goroutine on the leader sleeps until clock - slack reaches
// Machine.NextDeadline() (a decision time; both re-read after every applied
// batch) and then proposes one state.OpTick, which expires what is due and
// hands freed locks to their next waiters in that one apply.
//
// # G3: no expiry before TTL after the commit
//
// A command is stamped when proposed, but committed (fsync'd) a little later,
// so counting a lease from its stamp would let it end up to one commit lag
// early. Each term keeps the largest commit lag it has seen, maxLag (lag =
// leader clock when raft's future returns the applied result, minus the
// command's Now), and the Now of every proposal in flight. Every command Q is
// stamped with Slack = max(maxLag, Q.Now - oldest in-flight Now), and the
// machine makes Q's expiry decisions at Q.Now - Slack (never earlier than a
// previous decision), while Q's own grants and renewals start at Q.Now.
//
// Why it holds (clock = this leader's monotonic clock): lease g is stamped
// P, committed at C, and its result seen at A_g >= C, so lag_g = A_g - P >=
// C - P. Only a command Q applied after g can expire it, and only if
// Q.Now - Slack_Q >= P + TTL (g's lease starts at the machine time of its
// apply, which is >= P and >= every decision time before it). If Q was
// stamped before g, Q.Now - Slack_Q <= Q.Now <= P. If Q was stamped while g
// was in flight, Slack_Q >= Q.Now - P, so its decision time is <= P. If Q
// was stamped after A_g, Slack_Q >= maxLag >= lag_g, so Q.Now >= P + TTL +
// lag_g >= C + TTL: the lease ended no earlier than TTL after its commit.
// Stamping and the in-flight set share one mutex, so one of the three cases
// always applies. Renewals are the same with P their stamp; a lock handed to
// a waiter is a grant by the command that hands it on.
//
// Across terms: a new leader's clock starts at base = Machine.Now(), so time
// with no leader does not count, and its maxLag starts at Machine.MaxSlack()
// (the largest Slack ever applied), so a lag charged in an earlier term is
// still charged. What remains is a grant whose result its leader never saw
// (it lost office or crashed between commit and apply-seen): its own lag was
// never measured, and the splice of the two terms' clocks at base may drop up
// to that lag if it exceeds MaxSlack. Its proposer never answered the client,
// whose own deadline counted from its send time keeps it safe (G8).
//
// The cost: leases live up to maxLag longer than their TTL, ticks come
// maxLag later, and maxLag (like MaxSlack) never decreases — one slow fsync
// lengthens every later lease by that much.
//
// # Blocking acquires
//
// An acquire with Wait > 0 registers a waiter for its request_id (a random one
// is made when the caller gave none) before it is proposed, because the
// grant may be applied before raft's future returns. The waiter receives the
// state.Event of the grant or of the wait running out. If the caller's
// context ends first, the node proposes state.OpCancelWait so the lock is not
// handed to a client that went away: the machine drops the queued request,
// or, if the grant won the race, releases that lease and hands the lock on.
//
// # Reads
//
// Reads use the read-index protocol: note raft's commit index, confirm
// leadership with VerifyLeader, wait until the FSM has applied up to the noted
// index, then read the machine under a read lock at the leader's clock.
package node
