package node

import (
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/fenceworks/fence/state"
)

// waiters routes the Events of queued acquires to the requests waiting for
// them, by request_id. A waiter is registered before its acquire is
// proposed and removed by its owner; deliver never blocks (each waiter
// channel has room for its one final Event).
//
// Several attempts of one request_id (a client's retry while its first
// connection still waits) wait on one queue entry, so an attempt that
// gives up must not withdraw it while another attempt here still waits:
// leave tells the attempt that ends whether it was the last one, and the
// highest attempt this node has seen for the request_id (from Result.Attempt
// and Event.Attempt), which the last one's cancel must name.
type waiters struct {
	mu sync.Mutex
	m  map[string]*waitEntry
	n  int
}

// waitEntry is the attempts of one request_id waiting on this node.
type waitEntry struct {
	chans   []chan state.Event
	attempt uint32 // highest attempt seen while any was registered
}

func newWaiters() *waiters { return &waiters{m: make(map[string]*waitEntry)} }

// add registers a waiter for id.
func (w *waiters) add(id string) chan state.Event {
	ch := make(chan state.Event, 1)
	w.mu.Lock()
	e := w.m[id]
	if e == nil {
		e = &waitEntry{}
		w.m[id] = e
	}
	e.chans = append(e.chans, ch)
	w.n++
	w.mu.Unlock()
	return ch
}

// remove unregisters ch.
func (w *waiters) remove(id string, ch chan state.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(id, ch)
}

// leave unregisters ch, an attempt that gives up having been applied as
// attempt. last reports whether no other attempt of id is registered here
// now; highest is the highest attempt seen for id (at least attempt).
func (w *waiters) leave(id string, ch chan state.Event, attempt uint32) (last bool, highest uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	highest = attempt
	if e := w.m[id]; e != nil {
		highest = max(highest, e.attempt)
	}
	w.removeLocked(id, ch)
	return w.m[id] == nil, highest
}

func (w *waiters) removeLocked(id string, ch chan state.Event) {
	e := w.m[id]
	if e == nil {
		return
	}
	for i, c := range e.chans {
		if c == ch {
			e.chans = append(e.chans[:i:i], e.chans[i+1:]...)
			w.n--
			break
		}
	}
	if len(e.chans) == 0 {
		delete(w.m, id)
	}
}

// saw records that id was applied as attempt (while a waiter is registered).
func (w *waiters) saw(id string, attempt uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[id]; e != nil {
		e.attempt = max(e.attempt, attempt)
	}
}

// deliverAll hands each of evs, in order, to every waiter registered for
// its request_id, under one lock: O(len(evs)), however
// many (a session that ends with 100,000 leases hands on as many locks in
// one apply).
func (w *waiters) deliverAll(evs []state.Event) {
	if len(evs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range evs {
		w.deliverLocked(ev)
	}
}

func (w *waiters) deliverLocked(ev state.Event) {
	e := w.m[ev.RequestID]
	if e == nil {
		return
	}
	e.attempt = max(e.attempt, ev.Attempt)
	for _, ch := range e.chans {
		select {
		case ch <- ev:
		default:
		}
	}
}

// has reports whether a waiter is registered for id.
func (w *waiters) has(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[id] != nil
}

// count is the number of registered waiters.
func (w *waiters) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// newRequestID makes a request_id for a blocking acquire that came without
// one.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "node-" + hex.EncodeToString(b[:])
}
