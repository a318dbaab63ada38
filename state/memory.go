package state

import (
	"container/list"
	"time"

	"github.com/fenceworks/fence"
)

// memory remembers ids (request_ids, op_ids) in the order they were put,
// bounded by count and by server-time age. Since server time never goes
// back, insertion order is age order and both bounds evict from the front.
type memory[K comparable, V any] struct {
	items map[K]*list.Element
	order *list.List // of *memEntry[K, V], oldest first
}

type memEntry[K comparable, V any] struct {
	key K
	at  int64 // server time it was remembered
	val V
}

func newMemory[K comparable, V any]() memory[K, V] {
	return memory[K, V]{items: map[K]*list.Element{}, order: list.New()}
}

func (m *memory[K, V]) len() int { return m.order.Len() }

func (m *memory[K, V]) get(k K) (V, bool) {
	if e, ok := m.items[k]; ok {
		return e.Value.(*memEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put remembers v under k as of server time at (as the newest entry).
func (m *memory[K, V]) put(k K, v V, at int64) {
	if e, ok := m.items[k]; ok {
		m.order.Remove(e)
	}
	m.items[k] = m.order.PushBack(&memEntry[K, V]{key: k, at: at, val: v})
}

// oldest returns when the oldest entry was remembered.
func (m *memory[K, V]) oldest() (int64, bool) {
	if e := m.order.Front(); e != nil {
		return e.Value.(*memEntry[K, V]).at, true
	}
	return 0, false
}

// forget drops the entries at least retention old at server time now, and
// the oldest beyond max as long as they are at least minRetention old.
func (m *memory[K, V]) forget(now, retention, minRetention int64, max int) {
	for e := m.order.Front(); e != nil; e = m.order.Front() {
		me := e.Value.(*memEntry[K, V])
		age := now - me.at
		if age < retention && (m.order.Len() <= max || age < minRetention) {
			return
		}
		m.order.Remove(e)
		delete(m.items, me.key)
	}
}

// full reports whether a new id must be refused: max entries are
// remembered (forget has run, so the oldest is younger than minRetention
// or there are exactly max) and the oldest is younger than minRetention.
func (m *memory[K, V]) full(now, minRetention int64, max int) bool {
	if minRetention <= 0 || m.order.Len() < max {
		return false
	}
	at, ok := m.oldest()
	return !ok || now-at < minRetention
}

// each calls f on every entry, oldest first.
func (m *memory[K, V]) each(f func(k K, at int64, v V)) {
	for e := m.order.Front(); e != nil; e = e.Next() {
		me := e.Value.(*memEntry[K, V])
		f(me.key, me.at, me.val)
	}
}

// forget applies the retention rule (see doc.go) to the request_id and op_id
// memories and to the tombstones of idle locks. It runs at the start of
// every Apply, after server time advanced.
func (m *impl) forget() {
	retention, minimum := int64(m.cfg.IDRetention), int64(m.cfg.MinIDRetention)
	m.requests.forget(m.clock, retention, minimum, m.cfg.MaxRequests)
	m.ops.forget(m.clock, retention, minimum, m.cfg.MaxOps)
	m.idle.forget(m.clock, retention, m.cfg.MaxRequests, func(l *lockEntry) { delete(m.byName, l.name) })
}

// admitOp refuses a new op_id when the op_id memory is full of ids younger
// than MinIDRetention: forgetting one would break the promise that a retry
// within MinIDRetention is never applied twice.
func (m *impl) admitOp() error {
	if m.ops.full(m.clock, int64(m.cfg.MinIDRetention), m.cfg.MaxOps) {
		return fence.Exhausted("remembered op_ids (config.max_ops)",
			"at most "+utoa(m.cfg.MaxOps)+" younger than "+m.cfg.MinIDRetention.String(), utoa(m.ops.len()))
	}
	return nil
}

// admitRequest is admitOp for a new request_id. Only ended requests are
// counted: a request admitted while queued or holding is remembered when it
// ends even if the memory is full then, so the memory may exceed
// MaxRequests by the number of requests live at that moment.
func (m *impl) admitRequest() error {
	if m.requests.full(m.clock, int64(m.cfg.MinIDRetention), m.cfg.MaxRequests) {
		return fence.Exhausted("remembered request_ids (config.max_requests)",
			"at most "+utoa(m.cfg.MaxRequests)+" younger than "+m.cfg.MinIDRetention.String(), utoa(m.requests.len()))
	}
	return nil
}

// oldestIDAge is the age at now of the oldest remembered op_id or
// request_id.
func (m *impl) oldestIDAge(now int64) time.Duration {
	now = max(now, m.clock)
	var age int64
	for _, f := range []func() (int64, bool){m.ops.oldest, m.requests.oldest} {
		if at, ok := f(); ok {
			age = max(age, now-at)
		}
	}
	return time.Duration(age)
}
