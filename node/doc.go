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
// A goroutine on the leader sleeps until Machine.NextDeadline() (re-read after
// every applied batch) and then proposes one state.OpTick, which expires what
// is due and hands freed locks to their next waiters in that one apply.
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
