package node

import "time"

// leaderClock is the server time of one term of office: base is the
// machine's Now() after the barrier that opened the term, start a reading of
// the monotonic clock taken right after. It never reads wall-clock time.
type leaderClock struct {
	base  int64
	start time.Time
}

// now is base + elapsed, in nanoseconds of server time.
func (c *leaderClock) now() int64 {
	return c.base + int64(time.Since(c.start))
}
