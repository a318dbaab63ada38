package node

import "time"

// leaderClock is the server time of one term of office: base is the
// machine's Now() after the barrier that opened the term, start a reading of
// the monotonic clock taken right after. It never reads wall-clock time.
// lag is the term's commit-lag bookkeeping, which sets every command's Slack.
//
// term is the raft term the office was taken in: the node serves with this
// clock only while raft's current term is still term (raft never makes a
// node leader twice in one term), so a clock left over from an earlier
// term can neither stamp a proposal nor answer a read in a later one, even
// before the leadership watcher has seen the change (design.md §2).
type leaderClock struct {
	base  int64
	start time.Time
	clock Clock // Config.Clock (the system clock outside tests)
	term  uint64
	lag   commitLag
	gone  chan struct{} // closed when the term of office ends
}

// newLeaderClock opens a term at server time base. If leases are held,
// latest is the latest expiry among them (Machine.LatestExpiry) and the term
// starts with maxSlack (Machine.MaxSlack, the largest Slack applied) charged
// until clock latest + maxSlack: a lag charged by an earlier term still
// protects the leases it was charged for, and no others (doc.go, G3).
func newLeaderClock(base int64, maxSlack time.Duration, latest int64, held bool) *leaderClock {
	c := &leaderClock{base: base, start: time.Now(), clock: SystemClock{}, gone: make(chan struct{})}
	if held {
		c.lag.charges.charge(latest+int64(maxSlack), int64(maxSlack))
	}
	return c
}

// now is base + elapsed, in nanoseconds of server time. Only the monotonic
// reading in start counts (Clock.Since): a wall clock that jumps, or is
// offset by a test clock, changes nothing.
func (c *leaderClock) now() int64 {
	return c.base + int64(c.clock.Since(c.start))
}

// wallNow is clock's wall reading (no monotonic part). The node reads it
// only for what it reports (logs, a backup's wall time); the leader clock
// reads the monotonic clock alone. Tests skew the wall clock by an hour to
// show that nothing of the node's time hangs on it.
func wallNow(clock Clock) time.Time { return clock.Now().Round(0) }

// Clock is where a node reads time. Outside tests it is SystemClock; a
// test harness injects another (daemon.Hooks) to skew the node's clocks.
// The node's server time comes from Since alone (a monotonic stopwatch,
// design.md §2); Now's wall reading is only reported.
type Clock interface {
	// Now is a reading with a monotonic part, as time.Now's.
	Now() time.Time
	// Since is the time elapsed since t, an earlier Now reading, as
	// time.Since measures it (by the monotonic parts).
	Since(t time.Time) time.Duration
}

// SystemClock is the machine's clock: time.Now and time.Since.
type SystemClock struct{}

// Now is time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Since is time.Since(t).
func (SystemClock) Since(t time.Time) time.Duration { return time.Since(t) }
