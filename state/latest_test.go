package state

import (
	"testing"
	"time"
)

// LatestExpiry follows grants, renewals, releases and expiries, and counts a
// lease past its expiry until a command settles it.
func TestLatestExpiry(t *testing.T) {
	m := New()
	if _, ok := m.LatestExpiry(); ok {
		t.Fatal("empty machine reports a held lease")
	}
	check := func(step string, want int64, wantOK bool) {
		t.Helper()
		if got, ok := m.LatestExpiry(); got != want || ok != wantOK {
			t.Fatalf("%s: LatestExpiry = %v, %v; want %v, %v", step, time.Duration(got), ok, time.Duration(want), wantOK)
		}
	}
	mustGrant(t, m, acq(at(1), "a", "A", 10*time.Second), 1)
	check("a granted at 1s for 10s", at(11), true)
	mustGrant(t, m, acq(at(2), "b", "B", 3*time.Second), 2)
	check("b ends before a", at(11), true)
	mustOK(t, m, renew(at(4), "b", 2, 20*time.Second))
	check("b renewed at 4s for 20s", at(24), true)
	mustOK(t, m, rel(at(5), "b", 2))
	check("b released", at(11), true)
	// At 12s a has expired, but a command that does not touch it leaves it
	// unsettled: still counted.
	if r := m.Apply(rel(at(12), "other", 1)); r.Err == nil {
		t.Fatal("release of a lock never held succeeded")
	}
	check("a expired, unsettled", at(11), true)
	mustOK(t, m, tick(at(12)))
	check("a settled by a tick", 0, false)
}
