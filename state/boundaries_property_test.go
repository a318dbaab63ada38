package state

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fenceworks/fence"
)

// The lock-boundary reference model: who holds and who waits for which
// lock, by request, with no time (no lease expires and no wait runs out:
// TestBoundariesMatchModel draws TTLs and waits far longer than the run).
// A request is granted when every lock it names is free for it — no one
// queued ahead, room for its mode (one exclusive holder; shared holders
// beside shared ones; a semaphore's permits) — else queued on every lock
// with a wait, else refused. When a lease ends, the head of each queue is
// granted, repeatedly, while it can be (on all its locks at once).
type refModel struct {
	holders map[string][]refHold // by lock, in grant order
	queues  map[string][]*refReq // by lock, in arrival order
	permits map[string]uint32    // while used
	leases  map[fence.Token]*refReq
	byID    map[string]*refReq
}

type refReq struct {
	id    string
	specs []fence.LockSpec // sorted
	token fence.Token      // granted: its token (the machine's; the model checks its order)
}

type refHold struct {
	r    *refReq
	mode fence.Mode
}

func newRefModel() *refModel {
	return &refModel{holders: map[string][]refHold{}, queues: map[string][]*refReq{}, permits: map[string]uint32{},
		leases: map[fence.Token]*refReq{}, byID: map[string]*refReq{}}
}

func (m *refModel) used(name string) bool { return len(m.holders[name]) > 0 || len(m.queues[name]) > 0 }

func (m *refModel) room(s fence.LockSpec) bool {
	hs := m.holders[s.Name]
	switch {
	case m.used(s.Name) && m.permits[s.Name] > 0:
		return len(hs) < int(m.permits[s.Name])
	case len(hs) == 0:
		return true
	case s.Mode == fence.Exclusive:
		return false
	}
	return hs[0].mode == fence.Shared
}

// acquire returns "granted", "queued", "busy" or "mismatch".
func (m *refModel) acquire(r *refReq, wait bool) string {
	for _, s := range r.specs {
		if m.used(s.Name) && m.permits[s.Name] != s.Permits {
			return "mismatch"
		}
	}
	free := true
	for _, s := range r.specs {
		if len(m.queues[s.Name]) > 0 || !m.room(s) {
			free = false
		}
	}
	switch {
	case free:
		return "granted"
	case wait:
		for _, s := range r.specs {
			if !m.used(s.Name) {
				m.permits[s.Name] = s.Permits
			}
			m.queues[s.Name] = append(m.queues[s.Name], r)
		}
		m.byID[r.id] = r
		return "queued"
	}
	return "busy"
}

func (m *refModel) hold(r *refReq, token fence.Token) {
	r.token = token
	for _, s := range r.specs {
		if !m.used(s.Name) {
			m.permits[s.Name] = s.Permits
		}
		m.holders[s.Name] = append(m.holders[s.Name], refHold{r: r, mode: s.Mode})
	}
	m.leases[token] = r
}

// release ends lease token and returns the waiters granted, in the order
// the model grants them (the machine's order may differ across locks: the
// model compares sets and checks per-lock FIFO).
func (m *refModel) release(token fence.Token) []*refReq {
	r := m.leases[token]
	delete(m.leases, token)
	for _, s := range r.specs {
		m.holders[s.Name] = slices.DeleteFunc(m.holders[s.Name], func(h refHold) bool { return h.r == r })
	}
	return m.handOn()
}

func (m *refModel) cancel(id string) []*refReq {
	r := m.byID[id]
	delete(m.byID, id)
	for _, s := range r.specs {
		m.queues[s.Name] = slices.DeleteFunc(m.queues[s.Name], func(w *refReq) bool { return w == r })
	}
	return m.handOn()
}

// handOn grants heads until none can be: the fixpoint is unique (a waiter
// is granted iff it heads every queue it is in and has room on each).
func (m *refModel) handOn() []*refReq {
	var out []*refReq
	for {
		var names []string
		for n, q := range m.queues {
			if len(q) > 0 {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		progressed := false
		for _, n := range names {
			q := m.queues[n]
			if len(q) == 0 {
				continue
			}
			w := q[0]
			ok := true
			for _, s := range w.specs {
				if len(m.queues[s.Name]) == 0 || m.queues[s.Name][0] != w || !m.room(s) {
					ok = false
				}
			}
			if !ok {
				continue
			}
			for _, s := range w.specs {
				m.queues[s.Name] = m.queues[s.Name][1:]
			}
			delete(m.byID, w.id)
			out = append(out, w)
			w.token = 0 // set by the caller from the machine's grant
			for _, s := range w.specs {
				m.holders[s.Name] = append(m.holders[s.Name], refHold{r: w, mode: s.Mode})
			}
			progressed = true
		}
		if !progressed {
			return out
		}
	}
}

// drawSpecs draws one lock or a set over few names, with modes and
// permits colliding often.
func drawSpecs(t *rapid.T) []fence.LockSpec {
	names := []string{"a", "b", "c", "d"}
	n := rapid.SampledFrom([]int{1, 1, 1, 2, 3}).Draw(t, "locks")
	picked := rapid.Permutation(names).Draw(t, "names")[:n]
	var out []fence.LockSpec
	for _, name := range picked {
		s := fence.LockSpec{Name: name}
		switch rapid.IntRange(0, 5).Draw(t, "kind") {
		case 0, 1:
			s.Mode = fence.Shared
		case 2:
			s.Permits = uint32(rapid.IntRange(1, 2).Draw(t, "permits"))
		}
		out = append(out, s)
	}
	return out
}

// TestBoundariesMatchModel: random acquires (one lock or a set, exclusive,
// shared or permits, try or wait), releases and cancels, against the
// reference model: each outcome agrees, the holders and queues of every
// lock agree, a set is held on all its locks or none, no exclusive holder
// beside another, never more holders than permits, every grant's token is
// larger than every earlier one, the Changes of each command replayed on
// the previous view give the next one, and a snapshot restored mid-run
// decides the rest alike (R1).
func TestBoundariesMatchModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, ref := New(), newRefModel()
		var last fence.Token
		ids := 0
		live := func() []fence.Token {
			var ts []fence.Token
			for tok := range ref.leases {
				ts = append(ts, tok)
			}
			slices.Sort(ts)
			return ts
		}
		granted := func(step int, r *refReq, l *fence.Lease) {
			if l.Token <= last {
				t.Fatalf("step %d: token %d not above the last grant's %d", step, l.Token, last)
			}
			last = l.Token
			r.token = l.Token
			ref.leases[l.Token] = r
		}
		restoreAt := rapid.IntRange(0, 40).Draw(t, "restore_at")
		for step := range 40 {
			now := int64(step) * int64(time.Millisecond)
			if step == restoreAt {
				var b, again bytes.Buffer
				if err := m.Snapshot(&b); err != nil {
					t.Fatalf("snapshot: %v", err)
				}
				n := New()
				if err := n.Restore(bytes.NewReader(b.Bytes())); err != nil {
					t.Fatalf("restore: %v", err)
				}
				if err := n.Snapshot(&again); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
					t.Fatal("restored snapshot differs")
				}
				m = n
			}
			var res Result
			var wantGranted []*refReq
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 6:
				ids++
				r := &refReq{id: fmt.Sprintf("r%d", ids), specs: fence.SortLocks(drawSpecs(t))}
				wait := rapid.Bool().Draw(t, "wait")
				c := Command{Op: OpAcquire, Now: now, Owner: r.id, TTL: time.Hour, RequestID: r.id}
				if len(r.specs) == 1 {
					c.Name, c.Mode, c.Permits = r.specs[0].Name, r.specs[0].Mode, r.specs[0].Permits
				} else {
					c.Locks = slices.Clone(r.specs)
					c.Locks = rapid.Permutation(c.Locks).Draw(t, "order") // any order: the machine sorts
				}
				if wait {
					c.Wait = time.Hour
				}
				want := ref.acquire(r, wait)
				res = m.Apply(c)
				got := "busy"
				switch {
				case res.Err == nil && res.Lease != nil:
					got = "granted"
				case res.Err == nil && res.Queued:
					got = "queued"
				case errorsIsMismatch(res.Err):
					got = "mismatch"
				case errorsIsBusy(res.Err):
				default:
					t.Fatalf("step %d: %+v: %s", step, c, describe(res))
				}
				if got != want {
					t.Fatalf("step %d: %+v: machine %s, model %s", step, c, got, want)
				}
				if got == "granted" {
					ref.hold(r, 0)
					delete(ref.leases, 0)
					granted(step, r, res.Lease)
				}
			case op < 9:
				ts := live()
				if len(ts) == 0 {
					continue
				}
				tok := rapid.SampledFrom(ts).Draw(t, "release")
				r := ref.leases[tok]
				name := rapid.SampledFrom(r.specs).Draw(t, "by").Name // any of its locks
				wantGranted = ref.release(tok)
				res = m.Apply(rel(now, name, tok))
				if res.Err != nil {
					t.Fatalf("step %d: release %s/%d: %v", step, name, tok, res.Err)
				}
			default:
				if len(ref.byID) == 0 {
					continue
				}
				var waiting []string
				for id := range ref.byID {
					waiting = append(waiting, id)
				}
				sort.Strings(waiting)
				id := rapid.SampledFrom(waiting).Draw(t, "cancel")
				name := rapid.SampledFrom(ref.byID[id].specs).Draw(t, "on").Name
				wantGranted = ref.cancel(id)
				res = m.Apply(Command{Op: OpCancelWait, Now: now, Name: name, RequestID: id})
			}
			// The waiters the model hands on are the machine's events, as a set.
			var gotIDs, wantIDs []string
			for _, e := range res.Events {
				if e.Err != nil || e.Lease == nil {
					t.Fatalf("step %d: event %+v: no wait can run out or fail here", step, e)
				}
				gotIDs = append(gotIDs, e.RequestID)
			}
			for _, w := range wantGranted {
				wantIDs = append(wantIDs, w.id)
			}
			slices.Sort(gotIDs)
			slices.Sort(wantIDs)
			if !slices.Equal(gotIDs, wantIDs) {
				t.Fatalf("step %d: machine granted %v, model %v", step, gotIDs, wantIDs)
			}
			for _, e := range res.Events {
				r := wantGranted[slices.IndexFunc(wantGranted, func(w *refReq) bool { return w.id == e.RequestID })]
				granted(step, r, e.Lease)
			}
			checkBoundaryState(t, step, m, ref)
		}
	})
}

func errorsIsMismatch(err error) bool { _, ok := err.(*fence.PermitsMismatchError); return ok }

// checkBoundaryState holds the machine's locks to the model's, and to the
// invariants of lock boundaries.
func checkBoundaryState(t *rapid.T, step int, m *Machine, ref *refModel) {
	for _, name := range []string{"a", "b", "c", "d"} {
		info := m.Lock(name, m.Now())
		var got, want []fence.Token
		shared := 0
		for _, h := range info.Holders {
			got = append(got, h.Token)
			mode := h.Mode
			if len(h.Locks) > 0 {
				i := slices.IndexFunc(h.Locks, func(s fence.LockSpec) bool { return s.Name == name })
				if i < 0 {
					t.Fatalf("step %d: lock %s held by set lease %d that does not name it", step, name, h.Token)
				}
				mode = h.Locks[i].Mode
			}
			if mode == fence.Shared {
				shared++
			}
		}
		for _, h := range ref.holders[name] {
			want = append(want, h.r.token)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: lock %s held by %v, model %v", step, name, got, want)
		}
		n := len(info.Holders)
		switch {
		case info.Permits > 0 && n > int(info.Permits):
			t.Fatalf("step %d: lock %s: %d holders of %d permits", step, name, n, info.Permits)
		case info.Permits == 0 && n > 1 && shared != n:
			t.Fatalf("step %d: lock %s: an exclusive holder beside another (%d holders, %d shared)", step, name, n, shared)
		}
		if info.Waiters != len(ref.queues[name]) {
			t.Fatalf("step %d: lock %s: %d waiters, model %d", step, name, info.Waiters, len(ref.queues[name]))
		}
	}
	// Every queue is the model's, in arrival order (FIFO per lock).
	var gotQ, wantQ []string
	for _, name := range []string{"a", "b", "c", "d"} {
		if l := m.impl.names.get(name); l != nil {
			for _, w := range l.queue {
				gotQ = append(gotQ, name+"/"+w.id)
			}
		}
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		for _, w := range ref.queues[name] {
			wantQ = append(wantQ, name+"/"+w.id)
		}
	}
	if !slices.Equal(gotQ, wantQ) {
		t.Fatalf("step %d: queues %v, model %v", step, gotQ, wantQ)
	}
	// A set's lease holds every lock it names.
	for tok, r := range ref.leases {
		for _, s := range r.specs {
			if !slices.Contains(holdersOf(m, s.Name), tok) {
				t.Fatalf("step %d: set lease %d not on its lock %s", step, tok, s.Name)
			}
		}
	}
}
