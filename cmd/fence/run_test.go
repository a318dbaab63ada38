package main

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// TestStopPlan: when fence run sends SIGTERM and SIGKILL, for a lease whose
// safe deadline is at t0+1s, killMargin 100ms.
func TestStopPlan(t *testing.T) {
	t0 := time.Now()
	deadline := t0.Add(time.Second)
	failing := errors.New("renew: connection refused")
	lost := &client.LostError{Name: "x", Token: 1, Cause: errors.New("NOT_HOLDER")}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms       int
		renewErr error
		ended    error
		want     action
	}
	cases := []struct {
		name  string
		grace time.Duration
		steps []step
	}{
		{"healthy lease: nothing until the deadline draws near, then SIGKILL", 300 * time.Millisecond, []step{
			{0, nil, nil, nothing}, {800, nil, nil, nothing}, {899, nil, nil, nothing}, {900, nil, nil, sendKill}, {950, nil, nil, nothing},
		}},
		{"failing: SIGTERM grace before the SIGKILL, which is margin before the deadline", 300 * time.Millisecond, []step{
			{100, failing, nil, nothing}, {599, failing, nil, nothing}, {600, failing, nil, sendTerm},
			{800, failing, nil, nothing}, {899, failing, nil, nothing}, {900, failing, nil, sendKill},
		}},
		{"failure known late: SIGTERM at once, SIGKILL still by the deadline", 300 * time.Millisecond, []step{
			{850, failing, nil, sendTerm}, {899, failing, nil, nothing}, {900, failing, nil, sendKill},
		}},
		{"a renewal that succeeds again does not cancel the stop once begun", 300 * time.Millisecond, []step{
			{600, failing, nil, sendTerm}, {700, nil, nil, nothing}, {900, nil, nil, sendKill},
		}},
		{"grace longer than the time left: SIGTERM as soon as renewals fail", 5 * time.Second, []step{
			{0, nil, nil, nothing}, {400, failing, nil, sendTerm}, {899, nil, nil, nothing}, {900, nil, nil, sendKill},
		}},
		// The server refused a renewal: the lock may be another's already,
		// so no grace: SIGKILL at once, whatever --grace says.
		{"renew refused: SIGKILL at once, no grace", 5 * time.Second, []step{
			{200, nil, lost, sendKill}, {300, nil, lost, nothing}, {900, nil, lost, nothing},
		}},
		{"renew refused after a SIGTERM for failing renewals: SIGKILL at once", 300 * time.Millisecond, []step{
			{600, failing, nil, sendTerm}, {650, nil, lost, sendKill},
		}},
		{"lost past the deadline without a SIGTERM: SIGKILL at once", 300 * time.Millisecond, []step{
			{1000, nil, lost, sendKill},
		}},
	}
	for _, tc := range cases {
		p := stopPlan{grace: tc.grace, margin: 100 * time.Millisecond}
		for _, s := range tc.steps {
			if got, _ := p.next(at(s.ms), deadline, s.renewErr, s.ended); got != s.want {
				t.Errorf("%s: at %dms got action %d, want %d", tc.name, s.ms, got, s.want)
			}
		}
	}
}

func TestStopPlanFollowsDeadline(t *testing.T) {
	t0 := time.Now()
	p := stopPlan{grace: 300 * time.Millisecond, margin: 100 * time.Millisecond}
	// A renew moved the deadline out: no SIGKILL at the old one.
	if a, _ := p.next(t0.Add(900*time.Millisecond), t0.Add(2*time.Second), nil, nil); a != nothing {
		t.Fatalf("action %d after the deadline moved out, want nothing", a)
	}
	// A renew with a shorter TTL pulled it in: SIGKILL by the new one.
	if a, _ := p.next(t0.Add(950*time.Millisecond), t0.Add(time.Second), nil, nil); a != sendKill {
		t.Fatalf("action %d after the deadline was pulled in, want SIGKILL", a)
	}
	if w := p.wake(t0.Add(time.Second)); !w.Equal(t0.Add(900 * time.Millisecond)) {
		t.Errorf("wake %v after t0, want 900ms", w.Sub(t0))
	}
}
