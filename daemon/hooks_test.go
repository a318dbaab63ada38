package daemon

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// A skewed clock moves the wall reading by its offset, never the
// stopwatch, and runs the stopwatch at its rate; a rate that is not a
// positive number is refused naming clock_rate.
func TestSkewedClock(t *testing.T) {
	c, err := NewSkewedClock(time.Hour, 2)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	now := c.Now()
	if d := now.Round(0).Sub(before.Round(0)); d < time.Hour || d > time.Hour+time.Minute {
		t.Fatalf("wall reading %v after the system's, want the 1h offset", d)
	}
	// The stopwatch: an interval of the system clock, read at rate 2.
	first := time.Now()
	start := c.Now()
	sys := time.Now()
	for time.Since(sys) < time.Millisecond { // a measurable interval, not a wait for an event
	}
	inner := time.Since(sys)
	got := c.Since(start)
	outer := time.Since(first)
	if got < 2*inner || got > 2*outer {
		t.Fatalf("Since %v at rate 2: want between %v and %v (the offset must not count)", got, 2*inner, 2*outer)
	}
	if plain, _ := NewSkewedClock(0, 0); plain.Rate() != 1 || plain.Offset() != 0 {
		t.Fatalf("zero rate %v offset %v, want 1 and 0", plain.Rate(), plain.Offset())
	}
	for _, r := range []float64{-1, math.Inf(1), math.NaN(), MaxClockRate + 0.001, 1e308} {
		_, err := NewSkewedClock(0, r)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "clock_rate" {
			t.Errorf("rate %v: %v, want an invalid clock_rate", r, err)
		}
	}
}
