package daemon

import "time"

// Hooks are test seams. A test harness sets them (in-process through
// WithHooks; a fence binary reads them from the FENCE_TEST_* variables
// the harness sets), never an operator: they are not part of Config.
type Hooks struct {
	// Clock skews the node's clocks (node.Config.ClockOffset and
	// ClockRate); the zero value is the real clock.
	Clock ClockSkew
	// DialMap sends every outgoing dial to a raft address that is a key
	// to its value instead (a fault proxy); nil dials directly.
	DialMap map[string]string
}

// ClockSkew moves the node's wall clock by Offset and runs its leader
// stopwatch at Rate (0 means 1).
type ClockSkew struct {
	Offset time.Duration
	Rate   float64
}

// Option is a test seam given to New or Run.
type Option func(*Hooks)

// WithHooks sets the test hooks.
func WithHooks(h Hooks) Option { return func(x *Hooks) { *x = h } }
