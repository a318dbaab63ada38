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
	rate  float64 // Config.ClockRate (1 outside tests)
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
	c := &leaderClock{base: base, start: time.Now(), rate: 1, gone: make(chan struct{})}
	if held {
		c.lag.charges.charge(latest+int64(maxSlack), int64(maxSlack))
	}
	return c
}

// now is base + elapsed, in nanoseconds of server time. Only the monotonic
// reading in start counts: a wall clock that jumps, or is offset
// (Config.ClockOffset), changes nothing.
func (c *leaderClock) now() int64 {
	e := time.Since(c.start)
	if c.rate != 1 {
		return c.base + int64(float64(e)*c.rate)
	}
	return c.base + int64(e)
}

// wallClock is the node's wall-clock source: time.Now's wall reading (no
// monotonic reading) plus the test-only Config.ClockOffset. The node reads
// it only for what it reports (logs); the leader clock reads the monotonic
// clock alone. Tests skew it by an hour to show that nothing of the node's
// time hangs on it.
type wallClock struct{ offset time.Duration }

func (w wallClock) now() time.Time { return time.Now().Round(0).Add(w.offset) }
