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

// newLeaderClock opens a term at server time base. The commit lag starts at
// maxSlack, the largest Slack the machine has applied, so a lag charged by an
// earlier term is not forgotten.
func newLeaderClock(base int64, maxSlack time.Duration) *leaderClock {
	c := &leaderClock{base: base, start: time.Now()}
	c.lag.maxLag = int64(maxSlack)
	return c
}

// now is base + elapsed, in nanoseconds of server time.
func (c *leaderClock) now() int64 {
	return c.base + int64(time.Since(c.start))
}
