package daemon

import (
	"strconv"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/raftstore"
)

// Hooks are test seams: interfaces a test harness injects (in-process
// through WithHooks; a fence binary builds them from the FENCE_TEST_*
// variables the harness sets), never an operator: they are not part of
// Config. The zero value is production: the system clock, direct dials.
type Hooks struct {
	// Clock is where the node reads time (node.Config.Clock); nil is the
	// system clock. SkewedClock moves its wall and speeds its stopwatch.
	Clock node.Clock
	// Dialer makes the raft port's outgoing connections; nil dials
	// directly. raftstore.MapDialer sends a peer's dials to a fault proxy.
	Dialer raftstore.Dialer
}

// SkewedClock is a node.Clock for fault tests: the system clock's wall
// moved by Offset, and its stopwatch run at Rate (1.005: a clock 0.5%
// fast, within the documented 1% drift). Build it with NewSkewedClock.
type SkewedClock struct {
	offset time.Duration
	rate   float64
}

// MaxClockRate bounds a SkewedClock's rate: far from 1 (the chaos harness
// plants a clock 50% fast to show its checker catches early expiry), and
// far from where a scaled stopwatch would overflow server time.
const MaxClockRate = 100

// NewSkewedClock is a clock offset by offset whose stopwatch runs at rate
// (0 means 1). A rate that is not a number in (0, MaxClockRate] is
// refused.
func NewSkewedClock(offset time.Duration, rate float64) (SkewedClock, error) {
	if rate == 0 {
		rate = 1
	}
	if !(rate > 0 && rate <= MaxClockRate) {
		return SkewedClock{}, fence.Invalid("clock_rate", "a number above 0 and at most 100", strconv.FormatFloat(rate, 'g', -1, 64))
	}
	return SkewedClock{offset: offset, rate: rate}, nil
}

// Now is time.Now moved by the offset (time.Add moves its monotonic part
// too, which Since takes back).
func (c SkewedClock) Now() time.Time { return time.Now().Add(c.offset) }

// Since is the system time elapsed since t, a Now reading of this clock,
// at the clock's rate: the offset is not elapsed time.
func (c SkewedClock) Since(t time.Time) time.Duration {
	e := time.Since(t.Add(-c.offset))
	if c.rate == 1 || c.rate == 0 {
		return e
	}
	return time.Duration(float64(e) * c.rate)
}

// Offset is how far the wall reading is moved.
func (c SkewedClock) Offset() time.Duration { return c.offset }

// Rate is the stopwatch's speed (1: the system's).
func (c SkewedClock) Rate() float64 {
	if c.rate == 0 {
		return 1
	}
	return c.rate
}

// Option is a test seam given to New or Run.
type Option func(*Hooks)

// WithHooks sets the test hooks.
func WithHooks(h Hooks) Option { return func(x *Hooks) { *x = h } }
