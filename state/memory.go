package state

import (
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// memory remembers ids (request_ids, op_ids) in the order they were put,
// bounded by count and by server-time age. Since server time never goes
// back, insertion order is age order and both bounds evict from the front.
//
// It holds up to a million ids of each kind, so it is compact: the entries
// (key, time, value inline) sit in one ring buffer in insertion order, and
// the map holds only each key's sequence number — no per-entry allocation
// beyond the key's own bytes. doc.go (Retention) has the bytes per id.
type memory[K comparable, V any] struct {
	index map[K]uint64     // key -> sequence number of its entry
	ring  []memEntry[K, V] // circular, oldest at head
	head  int              // ring index of the oldest entry
	n     int              // entries in the ring
	first uint64           // sequence number of the oldest entry
}

type memEntry[K comparable, V any] struct {
	key K
	at  int64 // server time it was remembered (>= 0); dead: -1
	val V
}

// dead marks an entry whose key was put again: the index points at the
// newer entry, and this one is skipped until it is popped.
const dead = -1

const minRing = 64

func newMemory[K comparable, V any]() memory[K, V] {
	return memory[K, V]{index: map[K]uint64{}}
}

// reserve makes room for n entries at once (a restore knows how many).
func (m *memory[K, V]) reserve(n int) {
	if n > len(m.ring)-m.n {
		m.resize(max(minRing, m.n+n))
		index := make(map[K]uint64, m.n+n)
		for k, seq := range m.index {
			index[k] = seq
		}
		m.index = index
	}
}

func (m *memory[K, V]) len() int { return m.n }

// entry returns the entry with sequence number seq (first <= seq < first+n).
func (m *memory[K, V]) entry(seq uint64) *memEntry[K, V] {
	return &m.ring[(m.head+int(seq-m.first))%len(m.ring)]
}

func (m *memory[K, V]) get(k K) (V, bool) {
	if seq, ok := m.index[k]; ok {
		return m.entry(seq).val, true
	}
	var zero V
	return zero, false
}

// put remembers v under k as of server time at (>= 0, as the newest
// entry). A key put again points at its new entry; the old one is dead and
// dropped in its turn (the machine never puts a remembered key again).
func (m *memory[K, V]) put(k K, v V, at int64) {
	if seq, ok := m.index[k]; ok {
		m.entry(seq).at = dead
	}
	if m.n == len(m.ring) {
		m.resize(max(minRing, 2*len(m.ring)))
	}
	seq := m.first + uint64(m.n)
	m.n++
	*m.entry(seq) = memEntry[K, V]{key: k, at: at, val: v}
	m.index[k] = seq
}

// remove forgets k now (its entry is dead until popped).
func (m *memory[K, V]) remove(k K) {
	if seq, ok := m.index[k]; ok {
		m.entry(seq).at = dead
		delete(m.index, k)
	}
}

// pop forgets the oldest entry.
func (m *memory[K, V]) pop() {
	e := m.entry(m.first)
	if e.at != dead {
		delete(m.index, e.key)
	}
	*e = memEntry[K, V]{}
	m.head = (m.head + 1) % len(m.ring)
	m.first++
	m.n--
	if len(m.ring) > minRing && m.n <= len(m.ring)/4 {
		m.resize(len(m.ring) / 2)
	}
}

// resize moves the entries, in order, to a ring of size size (>= n).
func (m *memory[K, V]) resize(size int) {
	ring := make([]memEntry[K, V], size)
	for i := range m.n {
		ring[i] = m.ring[(m.head+i)%len(m.ring)]
	}
	m.ring, m.head = ring, 0
}

// oldest returns when the oldest entry was remembered.
func (m *memory[K, V]) oldest() (int64, bool) {
	for i := range m.n {
		if at := m.entry(m.first + uint64(i)).at; at != dead {
			return at, true
		}
	}
	return 0, false
}

// forget drops the entries at least retention old at server time now, and
// the oldest beyond max as long as they are at least minRetention old.
func (m *memory[K, V]) forget(now, retention, minRetention int64, max int) {
	for m.n > 0 {
		at := m.entry(m.first).at
		age := now - at
		if at != dead && age < retention && (m.n <= max || age < minRetention) {
			return
		}
		m.pop()
	}
}

// full reports whether a new id must be refused: max entries are
// remembered (forget has run, so the oldest is younger than minRetention
// or there are exactly max) and the oldest is younger than minRetention.
func (m *memory[K, V]) full(now, minRetention int64, max int) bool {
	if minRetention <= 0 || m.n < max {
		return false
	}
	at, ok := m.oldest()
	return !ok || now-at < minRetention
}

// each calls f on every entry, oldest first.
func (m *memory[K, V]) each(f func(k K, at int64, v V)) {
	for i := range m.n {
		if e := m.entry(m.first + uint64(i)); e.at != dead {
			f(e.key, e.at, e.val)
		}
	}
}

// forget applies the retention rule (see doc.go) to the request_id and op_id
// memories and to the tombstones of idle locks. It runs at the start of
// every Apply, after server time advanced.
func (m *impl) forget() {
	minimum := int64(m.minRetention())
	retention := max(int64(m.cfg.IDRetention), minimum)
	m.requests.forget(m.clock, retention, minimum, m.cfg.MaxRequests)
	m.ops.forget(m.clock, retention, minimum, m.cfg.MaxOps)
	m.idle.forget(m.clock, retention, min(m.cfg.MaxRequests, MaxIdleLocks), func(l *lockEntry) { delete(m.byName, l.name) })
	if plant.On(plant.IDsForgotten) {
		m.plantForgetOps()
	}
}

// admitOp refuses a new op_id when the op_id memory is full of ids younger
// than MinIDRetention: forgetting one would break the promise that a retry
// within MinIDRetention is never applied twice.
func (m *impl) admitOp() error {
	if minimum := m.minRetention(); m.ops.full(m.clock, int64(minimum), m.cfg.MaxOps) {
		return fence.Exhausted("remembered op_ids (config.max_ops)",
			"at most "+utoa(m.cfg.MaxOps)+" younger than "+minimum.String(), utoa(m.ops.len()))
	}
	return nil
}

// admitRequest is admitOp for a new request_id. Only ended requests are
// counted: a request admitted while queued or holding is remembered when it
// ends even if the memory is full then, so the memory may exceed
// MaxRequests by the number of requests live at that moment.
func (m *impl) admitRequest() error {
	if minimum := m.minRetention(); m.requests.full(m.clock, int64(minimum), m.cfg.MaxRequests) {
		return fence.Exhausted("remembered request_ids (config.max_requests)",
			"at most "+utoa(m.cfg.MaxRequests)+" younger than "+minimum.String(), utoa(m.requests.len()))
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
