package state

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
)

// indexNames is the name index's names in order.
func indexNames(m *Machine) []string {
	var out []string
	m.names.t.Ascend(func(l *lockEntry) bool { out = append(out, l.name); return true })
	return out
}

// mapNames is byName's names, sorted.
func mapNames(m *Machine) []string {
	var out []string
	for name := range m.byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// TestNameIndexHoldsExactlyTheMachinesLocks: the name index (derived,
// never snapshotted) holds every lock of byName and no other, through
// grants, releases, the forgetting of idle tombstones and a restore; and
// a page of a prefix read through it is the same locks in the same order
// on the machine and on its restored copy.
func TestNameIndexHoldsExactlyTheMachinesLocks(t *testing.T) {
	cfg := uncapped()
	cfg.IDRetention = time.Second
	cfg.MinIDRetention = time.Second
	m := New(cfg)
	for i := range 300 {
		mustOK(t, m, acq(at(0), fmt.Sprintf("p/%03d", i), "A", 24*time.Hour))
	}
	for i := range 100 {
		r := mustOK(t, m, acq(at(0), fmt.Sprintf("q/%03d", i), "A", time.Hour))
		mustOK(t, m, rel(at(0), fmt.Sprintf("q/%03d", i), r.Lease.Token))
	}
	if got, want := indexNames(m), mapNames(m); !slices.Equal(got, want) {
		t.Fatalf("after grants: index %d names, byName %d", len(got), len(want))
	}
	// The released q/ locks are idle tombstones; retention forgets them.
	m.Apply(tick(at(3600 * 2)))
	if got, want := indexNames(m), mapNames(m); !slices.Equal(got, want) {
		t.Fatalf("after forgetting: index %v..., byName %v...", got[:min(3, len(got))], want[:min(3, len(want))])
	}
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	r := New(cfg)
	if err := r.Restore(bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, want := indexNames(r), mapNames(r); !slices.Equal(got, want) {
		t.Fatalf("after restore: index %d names, byName %d", len(got), len(want))
	}
	a, next := m.LocksPage("p/", "p/100", 10, at(1))
	c, rnext := r.LocksPage("p/", "p/100", 10, at(1))
	if len(a) != 10 || a[0].Name != "p/101" || next != "p/110" || len(c) != 10 || c[0].Name != "p/101" || rnext != next {
		t.Fatalf("page after p/100: %d locks from %q next %q; restored: %d next %q", len(a), a[0].Name, next, len(c), rnext)
	}
}
