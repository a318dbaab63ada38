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
type waiters struct {
	mu sync.Mutex
	m  map[string][]chan state.Event
	n  int
}

func newWaiters() *waiters { return &waiters{m: make(map[string][]chan state.Event)} }

// add registers a waiter for id.
func (w *waiters) add(id string) chan state.Event {
	ch := make(chan state.Event, 1)
	w.mu.Lock()
	w.m[id] = append(w.m[id], ch)
	w.n++
	w.mu.Unlock()
	return ch
}

// remove unregisters ch.
func (w *waiters) remove(id string, ch chan state.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.m[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i:i], list[i+1:]...)
			w.n--
			break
		}
	}
	if len(list) == 0 {
		delete(w.m, id)
	} else {
		w.m[id] = list
	}
}

// deliver hands ev to every waiter registered for its request_id.
func (w *waiters) deliver(ev state.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[ev.RequestID] {
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
	return len(w.m[id]) > 0
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
