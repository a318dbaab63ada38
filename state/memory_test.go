package state

import (
	"fmt"
	"testing"
)

// The ring keeps insertion order through growth, wrap-around and shrinking,
// and a key put again is found at its new entry.
func TestMemoryRing(t *testing.T) {
	m := newMemory[string, tv]()
	check := func(from, to int) {
		t.Helper()
		var got []string
		m.each(func(k string, at int64, v tv) {
			if k != fmt.Sprint(v) || at != int64(v) {
				t.Fatalf("entry %s at %d holds %d", k, at, v)
			}
			got = append(got, k)
		})
		if len(got) != to-from || m.len() != to-from {
			t.Fatalf("%d entries (len %d), want %d..%d", len(got), m.len(), from, to)
		}
		for i, k := range got {
			if k != fmt.Sprint(from+i) {
				t.Fatalf("entry %d is %s, want %d", i, k, from+i)
			}
			if v, ok := m.get(k); !ok || int(v) != from+i {
				t.Fatalf("get %s: %d %v", k, v, ok)
			}
		}
		if at, ok := m.oldest(); (to > from) != ok || (ok && at != int64(from)) {
			t.Fatalf("oldest %d %v, want %d", at, ok, from)
		}
	}
	for i := range 1000 {
		m.put(fmt.Sprint(i), tv(i), int64(i), "")
	}
	check(0, 1000)
	m.forget(1000, 1<<62, 0, 10) // by count
	check(990, 1000)
	if len(m.ring) > 64 {
		t.Fatalf("ring of %d kept for 10 entries", len(m.ring))
	}
	for i := 1000; i < 1100; i++ { // wraps around, then grows
		m.put(fmt.Sprint(i), tv(i), int64(i), "")
	}
	check(990, 1100)
	m.forget(1100, 1100-1050, 0, 1<<30) // by age: at <= 1050 goes
	check(1051, 1100)
	m.forget(1100, 1<<62, 1100-1060, 10) // by count, but only those at least 40 old
	check(1061, 1100)
	if _, ok := m.get("1000"); ok {
		t.Fatal("forgotten key still found")
	}
	m.forget(1<<62, 1, 0, 0)
	check(0, 0)

	// A key put again: the newer entry wins; the older is dropped in its turn.
	m.put("a", 1, 1, "")
	m.put("a", 2, 2, "")
	if v, _ := m.get("a"); v != 2 {
		t.Fatalf("a = %d", v)
	}
	m.pop()
	if v, ok := m.get("a"); !ok || v != 2 {
		t.Fatalf("dropping the older entry lost the newer: %d %v", v, ok)
	}
}

// tv is a remembered value of the memory tests: an int made by no
// principal.
type tv int

func (tv) by() uint32 { return 0 }

func (v tv) ownedBy(uint32) tv { return v }

// The index finds every live key and no forgotten one through puts,
// removes, puts again and pops in any order (backward-shift deletion,
// rebuilds as it grows and shrinks), checked against a map after every
// step.
func TestMemoryIndexAgreesWithAMap(t *testing.T) {
	m := newMemory[string, tv]()
	want := map[string]tv{}
	var order []string // live keys, oldest first
	rng := uint64(1)
	next := func(n int) int { rng = rng*6364136223846793005 + 1442695040888963407; return int(rng>>33) % n }
	for step := range 10_000 {
		switch op := next(10); {
		case op < 5 || len(order) == 0: // a new key, or one put again
			k := fmt.Sprint(next(1000))
			_, had := want[k]
			putNew := next(2) == 0 // refused, changing nothing, if k is remembered
			if putNew && had {
				if m.putNew(k, tv(step), int64(step), "") {
					t.Fatalf("step %d: putNew %s accepted, remembered", step, k)
				}
				break
			}
			if had {
				for i, o := range order {
					if o == k {
						order = append(order[:i], order[i+1:]...)
						break
					}
				}
			}
			if putNew {
				if !m.putNew(k, tv(step), int64(step), "") {
					t.Fatalf("step %d: putNew %s refused", step, k)
				}
			} else {
				m.put(k, tv(step), int64(step), "")
			}
			want[k] = tv(step)
			order = append(order, k)
		case op < 7: // remove one
			i := next(len(order))
			m.remove(order[i])
			delete(want, order[i])
			order = append(order[:i], order[i+1:]...)
		default: // forget the oldest entries (dead ones included)
			for range next(20) {
				if m.n == 0 {
					break
				}
				if e := m.entry(m.first); e.at != dead {
					delete(want, e.key)
					order = order[1:]
				}
				m.pop()
			}
		}
		if m.used != len(want) {
			t.Fatalf("step %d: %d keys indexed, want %d", step, m.used, len(want))
		}
		for k := range 1000 {
			key := fmt.Sprint(k)
			v, ok := m.get(key)
			if w, live := want[key]; ok != live || v != w {
				t.Fatalf("step %d: get %s = %d %v, want %d %v", step, key, v, ok, w, live)
			}
		}
	}
}
