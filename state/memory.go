package state

import "container/list"

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

// forget drops the oldest entries beyond max and those at least retention
// old at server time now.
func (m *memory[K, V]) forget(now, retention int64, max int) {
	for e := m.order.Front(); e != nil; e = m.order.Front() {
		me := e.Value.(*memEntry[K, V])
		if m.order.Len() <= max && now-me.at < retention {
			return
		}
		m.order.Remove(e)
		delete(m.items, me.key)
	}
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
	retention := int64(m.cfg.IDRetention)
	m.requests.forget(m.clock, retention, m.cfg.MaxRequests)
	m.ops.forget(m.clock, retention, m.cfg.MaxOps)
	m.idle.forget(m.clock, retention, m.cfg.MaxRequests, func(l *lockEntry) { delete(m.byName, l.name) })
}
