package node

import "time"

// leaderClock is the server time of one term of office: base is the
// machine's Now() after the barrier that opened the term, start a reading of
// the monotonic clock taken right after. It never reads wall-clock time.
// lag is the term's commit-lag bookkeeping, which sets every command's Slack.
type leaderClock struct {
	base  int64
	start time.Time
	lag   commitLag
}

// newLeaderClock opens a term at server time base. If leases are held,
// latest is the latest expiry among them (Machine.LatestExpiry) and the term
// starts with maxSlack (Machine.MaxSlack, the largest Slack applied) charged
// until clock latest + maxSlack: a lag charged by an earlier term still
// protects the leases it was charged for, and no others (doc.go, G3).
func newLeaderClock(base int64, maxSlack time.Duration, latest int64, held bool) *leaderClock {
	c := &leaderClock{base: base, start: time.Now()}
	if held {
		c.lag.charges.charge(latest+int64(maxSlack), int64(maxSlack))
	}
	return c
}

// now is base + elapsed, in nanoseconds of server time.
func (c *leaderClock) now() int64 {
	return c.base + int64(time.Since(c.start))
}
