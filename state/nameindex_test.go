package state

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// indexNames is the name index's names in order.
func indexNames(m *Machine) []string {
	var out []string
	m.names.t.Ascend(func(l *lockEntry) bool { out = append(out, l.name); return true })
	return out
}

// allLocks is every lock entry of m, in name order.
func allLocks(m *Machine) []*lockEntry {
	var out []*lockEntry
	m.names.each(func(l *lockEntry) { out = append(out, l) })
	return out
}

// checkLookups: every name of want is found by name (the name index's
// get, the only index by name since the byName map went) with its
// holder's token (0: free, kept as a tombstone), every name of gone is not
// found, the machine holds no lock besides want's, and Lock and LockHeld
// (the reads) say the same.
func checkLookups(t *testing.T, m *Machine, when string, want map[string]fence.Token, gone []string) {
	t.Helper()
	for name, tok := range want {
		l := m.names.get(name)
		if l == nil || l.name != name {
			t.Fatalf("%s: lock %q not found (got %v)", when, name, l)
		}
		var got fence.Token
		if g := l.only(); g != nil {
			got = g.token
		}
		if got != tok {
			t.Fatalf("%s: lock %q held by token %d, want %d", when, name, got, tok)
		}
		if info := m.LockHeld(name, at(0)); info.Free != (tok == 0) || (tok != 0 && (info.Lease == nil || info.Lease.Token != tok)) {
			t.Fatalf("%s: LockHeld(%q) = %+v, want token %d", when, name, info, tok)
		}
	}
	for _, name := range gone {
		if l := m.names.get(name); l != nil {
			t.Fatalf("%s: forgotten lock %q still found", when, name)
		}
	}
	if n := m.names.len(); n != len(want) {
		t.Fatalf("%s: %d locks in the index, want %d", when, n, len(want))
	}
}

// mapNames is the names of allLocks.
func mapNames(m *Machine) []string {
	var out []string
	for _, l := range allLocks(m) {
		out = append(out, l.name)
	}
	return out
}

// A lock is found by name through the name index alone: after grants,
// releases (the lock kept as a tombstone), the forgetting of tombstones,
// a re-acquire of a forgotten name (a new entry, a later token), and a
// snapshot and restore — with the same answers on the restored copy.
func TestLockLookupThroughNameIndex(t *testing.T) {
	cfg := uncapped()
	cfg.IDRetention = time.Second
	cfg.MinIDRetention = time.Second
	m := New(cfg)
	want := map[string]fence.Token{}
	for i := range 200 {
		name := fmt.Sprintf("h/%03d", i)
		want[name] = mustOK(t, m, acq(at(0), name, "A", 24*time.Hour)).Lease.Token
	}
	var gone []string
	for i := range 100 {
		name := fmt.Sprintf("r/%03d", i)
		r := mustOK(t, m, acq(at(0), name, "A", time.Hour))
		mustOK(t, m, rel(at(0), name, r.Lease.Token))
		want[name] = 0
		gone = append(gone, name)
	}
	checkLookups(t, m, "after grants and releases", want, nil)
	m.Apply(tick(at(3600 * 2))) // retention forgets the released r/ tombstones
	for _, name := range gone {
		delete(want, name)
	}
	checkLookups(t, m, "after forgetting", want, gone)
	again := mustOK(t, m, acq(at(7200), gone[7], "B", 24*time.Hour)).Lease.Token
	want[gone[7]] = again
	checkLookups(t, m, "after re-acquiring "+gone[7], want, gone[8:])
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	r := New(cfg)
	if err := r.Restore(bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	checkLookups(t, r, "after restore", want, gone[8:])
	// The restored copy decides as the original: a release by name finds
	// its lock on both.
	name := "h/042"
	for _, x := range []*Machine{m, r} {
		mustOK(t, x, rel(at(7200), name, want[name]))
	}
	want[name] = 0
	checkLookups(t, m, "after a release", want, gone[8:])
	checkLookups(t, r, "after a release on the restored copy", want, gone[8:])
}

// Reads find locks by name concurrently (reads under a read lock run at
// once: api.go): each finds its own lock, and the race detector sees no
// shared key being written (the lookup's probe is per call).
func TestConcurrentLockLookups(t *testing.T) {
	m := New(uncapped())
	toks := make([]fence.Token, 64)
	for i := range toks {
		toks[i] = mustOK(t, m, acq(at(0), fmt.Sprintf("c/%02d", i), "A", time.Hour)).Lease.Token
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(toks))
	for i := range toks {
		wg.Go(func() {
			name := fmt.Sprintf("c/%02d", i)
			for range 200 {
				if info := m.LockHeld(name, at(0)); info.Name != name || info.Lease == nil || info.Lease.Token != toks[i] {
					errs <- fmt.Sprintf("LockHeld(%q) = %+v, want token %d", name, info, toks[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

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
