package state

import (
	"hash/maphash"
	"time"
	"unsafe"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// memory remembers ids (request_ids, op_ids) in the order they were put,
// bounded by count and by server-time age. Since server time never goes
// back, insertion order is age order and both bounds evict from the front.
//
// It holds up to millions of ids of each kind, so it is compact: the
// entries (key, time, value inline) sit in one ring buffer in insertion
// order, and the index is an open-addressing table of 4-byte slots, each a
// 6-bit fingerprint of the key's hash and the low 26 bits of its entry's
// sequence number (linear probing, deletion by backward shift, between
// 3/8 and 3/4 full) — no per-entry allocation, no Go map of keys. The
// principal of an entry is a 4-byte number (interned while it has
// entries). docs/design.md (The id memory) has the layout and bytes per
// id.
//
// It also keeps each principal's entries in order (owners), for the quota
// of ids one principal may hold (Config.MaxIDsPerPrincipal, quota.go).
type memory[K comparable, V owned[V]] struct {
	seed  maphash.Seed
	slots []uint32         // the index: 0 empty, else fingerprint<<seqBits | seq&seqMask
	used  int              // slots in use (live entries)
	ring  []memEntry[K, V] // circular, oldest at head
	head  int              // ring index of the oldest entry
	n     int              // entries in the ring
	first uint64           // sequence number of the oldest entry
	// owners[i] is principal number i's queue (0: "", not counted);
	// ownerIDs numbers the principals with entries; freeIDs are numbers
	// to reuse.
	owners   []idQueue
	ownerIDs map[string]uint32
	freeIDs  []uint32
}

// owned is a remembered value that records the number of the principal
// that made it (0 with authentication off: not counted).
type owned[V any] interface {
	by() uint32
	ownedBy(uint32) V
}

// idQueue is one principal's entries: their sequence numbers, oldest
// first. Entries forgotten since (popped, or dead) are skipped, and
// dropped from the front as they are met; n counts the live ones.
type idQueue struct {
	name string
	seqs []uint64
	n    int
}

type memEntry[K comparable, V any] struct {
	key K
	at  int64 // server time it was remembered (>= 0); dead: -1
	val V
}

// dead marks an entry whose key was put again or removed: it is out of
// the index and skipped until it is popped.
const dead = -1

const minRing = 64

// The index's slots: seqBits bits of sequence number (the entries in the
// ring are fewer than 2^seqBits, so they name one), the rest a fingerprint.
const (
	seqBits = 26
	seqMask = 1<<seqBits - 1
)

func newMemory[K comparable, V owned[V]]() memory[K, V] {
	return memory[K, V]{seed: maphash.MakeSeed(), owners: make([]idQueue, 1), ownerIDs: map[string]uint32{}}
}

// reserve makes room for n entries at once (a restore knows how many).
func (m *memory[K, V]) reserve(n int) {
	if n > len(m.ring)-m.n {
		m.resize(max(minRing, m.n+n))
	}
	if 4*(m.used+n) > 3*len(m.slots) {
		m.reindex(m.used + n)
	}
}

func (m *memory[K, V]) len() int { return m.n }

// entry returns the entry with sequence number seq (first <= seq < first+n).
func (m *memory[K, V]) entry(seq uint64) *memEntry[K, V] {
	return &m.ring[(m.head+int(seq-m.first))%len(m.ring)]
}

func (m *memory[K, V]) hash(k K) uint64 { return maphash.Comparable(m.seed, k) }

// home is the slot where a key of hash h is first looked for.
func (m *memory[K, V]) home(h uint64) int { return int((h >> 32) * uint64(len(m.slots)) >> 32) }

func (m *memory[K, V]) next(i int) int {
	if i++; i == len(m.slots) {
		return 0
	}
	return i
}

// fingerprint is the high bits of a slot holding a key of hash h (never 0).
func fingerprint(h uint64) uint32 { return max(uint32(h)&(1<<(32-seqBits)-1), 1) << seqBits }

// seqOf is the sequence number of the entry slot s names.
func (m *memory[K, V]) seqOf(s uint32) uint64 {
	return m.first + uint64((s-uint32(m.first))&seqMask)
}

// find returns the index slot of k's live entry and its sequence number
// (slot -1 if k is not remembered).
func (m *memory[K, V]) find(k K) (int, uint64) {
	if m.used == 0 {
		return -1, 0
	}
	h := m.hash(k)
	fp := fingerprint(h)
	for i := m.home(h); ; i = m.next(i) {
		s := m.slots[i]
		if s == 0 {
			return -1, 0
		}
		if s&^seqMask == fp {
			if seq := m.seqOf(s); m.entry(seq).key == k {
				return i, seq
			}
		}
	}
}

// slot indexes entry seq, whose key k is not in the index (room made).
func (m *memory[K, V]) slot(k K, seq uint64) {
	h := m.hash(k)
	i := m.home(h)
	for m.slots[i] != 0 {
		i = m.next(i)
	}
	m.slots[i] = fingerprint(h) | uint32(seq)&seqMask
	m.used++
}

// unslot empties index slot i, moving back the slots after it that
// probing would no longer reach (backward-shift deletion).
func (m *memory[K, V]) unslot(i int) {
	for j := m.next(i); m.slots[j] != 0; j = m.next(j) {
		h := m.home(m.hash(m.entry(m.seqOf(m.slots[j])).key))
		// The slot at j stays if its home is cyclically in (i, j].
		if (i <= j && i < h && h <= j) || (i > j && (i < h || h <= j)) {
			continue
		}
		m.slots[i] = m.slots[j]
		i = j
	}
	m.slots[i] = 0
	m.used--
	if len(m.slots) > 16 && 8*m.used < len(m.slots) {
		m.reindex(m.used)
	}
}

// reindex rebuilds the index for n live entries: 2n slots (at least 16).
func (m *memory[K, V]) reindex(n int) {
	m.slots = make([]uint32, max(16, 2*n))
	m.used = 0
	for i := range m.n {
		seq := m.first + uint64(i)
		if e := m.entry(seq); e.at != dead {
			m.slot(e.key, seq)
		}
	}
}

func (m *memory[K, V]) get(k K) (V, bool) {
	if i, seq := m.find(k); i >= 0 {
		return m.entry(seq).val, true
	}
	var zero V
	return zero, false
}

// bytes is the heap the memory holds: its ring, its index and its
// principals' queues.
func (m *memory[K, V]) bytes() int64 {
	var e memEntry[K, V]
	b := int64(len(m.ring))*int64(unsafe.Sizeof(e)) + 4*int64(len(m.slots))
	for i := range m.owners {
		b += 8 * int64(cap(m.owners[i].seqs))
	}
	return b
}

// has reports whether k is remembered.
func (m *memory[K, V]) has(k K) bool {
	i, _ := m.find(k)
	return i >= 0
}

// principal is the name of principal number id.
func (m *memory[K, V]) principal(id uint32) string { return m.owners[id].name }

// ownerID is the number of principal p (0 for "", and for one with no
// entries when add is false).
func (m *memory[K, V]) ownerID(p string, add bool) uint32 {
	if p == "" {
		return 0
	}
	if id, ok := m.ownerIDs[p]; ok || !add {
		return id
	}
	var id uint32
	if k := len(m.freeIDs); k > 0 {
		id, m.freeIDs = m.freeIDs[k-1], m.freeIDs[:k-1]
	} else {
		id = uint32(len(m.owners))
		m.owners = append(m.owners, idQueue{})
	}
	m.owners[id] = idQueue{name: p}
	m.ownerIDs[p] = id
	return id
}

// put remembers v, made by principal p, under k as of server time at (>=
// 0, as the newest entry). A key put again points at its new entry; the
// old one is dead and dropped in its turn (the machine never puts a
// remembered key again).
func (m *memory[K, V]) put(k K, v V, at int64, p string) {
	if i, seq := m.find(k); i >= 0 {
		m.disown(seq)
		m.entry(seq).at = dead
		m.unslot(i)
	}
	if m.n == len(m.ring) {
		m.resize(max(minRing, len(m.ring)+len(m.ring)/8)) // 1/8 more: at most 1/8 of the ring empty
	}
	if 4*(m.used+1) > 3*len(m.slots) {
		m.reindex(m.used + 1)
	}
	id := m.ownerID(p, true)
	seq := m.first + uint64(m.n)
	m.n++
	*m.entry(seq) = memEntry[K, V]{key: k, at: at, val: v.ownedBy(id)}
	m.slot(k, seq)
	if id != 0 {
		q := &m.owners[id]
		m.trim(q)
		q.seqs = append(q.seqs, seq)
		q.n++
	}
}

// putNew is put of a key not remembered, as a restore's: one hash and one
// probe for the check and the slot (has then put takes three). If k is
// remembered it returns false and changes nothing but room.
func (m *memory[K, V]) putNew(k K, v V, at int64, p string) bool {
	if m.n == len(m.ring) {
		m.resize(max(minRing, len(m.ring)+len(m.ring)/8))
	}
	if 4*(m.used+1) > 3*len(m.slots) {
		m.reindex(m.used + 1)
	}
	h := m.hash(k)
	fp := fingerprint(h)
	i := m.home(h)
	for ; m.slots[i] != 0; i = m.next(i) {
		if s := m.slots[i]; s&^seqMask == fp && m.entry(m.seqOf(s)).key == k {
			return false
		}
	}
	id := m.ownerID(p, true)
	seq := m.first + uint64(m.n)
	m.n++
	*m.entry(seq) = memEntry[K, V]{key: k, at: at, val: v.ownedBy(id)}
	m.slots[i] = fp | uint32(seq)&seqMask
	m.used++
	if id != 0 {
		q := &m.owners[id]
		m.trim(q)
		q.seqs = append(q.seqs, seq)
		q.n++
	}
	return true
}

// disown counts live entry seq, about to be forgotten, out of its
// principal's.
func (m *memory[K, V]) disown(seq uint64) {
	id := m.entry(seq).val.by()
	if id == 0 {
		return
	}
	q := &m.owners[id]
	if q.n--; q.n == 0 {
		delete(m.ownerIDs, q.name)
		*q = idQueue{}
		m.freeIDs = append(m.freeIDs, id)
	}
}

// trim drops from q's front the entries forgotten since.
func (m *memory[K, V]) trim(q *idQueue) {
	for len(q.seqs) > 0 && (q.seqs[0] < m.first || m.entry(q.seqs[0]).at == dead) {
		q.seqs = q.seqs[1:]
	}
}

// owns is how many live entries principal p has.
func (m *memory[K, V]) owns(p string) int {
	if id := m.ownerID(p, false); id != 0 {
		return m.owners[id].n
	}
	return 0
}

// oldestOf is principal p's oldest live entry (nil if none).
func (m *memory[K, V]) oldestOf(p string) *memEntry[K, V] {
	id := m.ownerID(p, false)
	if id == 0 {
		return nil
	}
	q := &m.owners[id]
	m.trim(q)
	return m.entry(q.seqs[0])
}

// ownerFull reports whether principal p, at its quota of entries, must be
// refused a new one: its oldest is younger than minRetention, so
// forgetting it would break the promise that a retry within
// MinIDRetention is never applied twice (as full, for one principal).
// pending are p's ids not remembered yet but bound to be (live
// request_ids): they count, and cannot be forgotten to make room.
func (m *memory[K, V]) ownerFull(p string, now, minRetention int64, quota, pending int) bool {
	if p == "" || quota <= 0 {
		return false
	}
	if pending >= quota {
		return true
	}
	if minRetention <= 0 || m.owns(p)+pending < quota {
		return false
	}
	return now-m.oldestOf(p).at < minRetention
}

// forgetOwner forgets principal p's oldest entries beyond quota (pending
// counted, as in ownerFull), as long as they are at least minRetention old
// (run after a put of p's).
func (m *memory[K, V]) forgetOwner(p string, now, minRetention int64, quota, pending int) {
	for p != "" && quota > 0 && m.owns(p) > 0 && m.owns(p)+pending > quota {
		e := m.oldestOf(p)
		if now-e.at < minRetention {
			return
		}
		m.remove(e.key)
	}
}

// remove forgets k now (its entry is dead until popped).
func (m *memory[K, V]) remove(k K) {
	if i, seq := m.find(k); i >= 0 {
		m.disown(seq)
		m.entry(seq).at = dead
		m.unslot(i)
	}
}

// pop forgets the oldest entry.
func (m *memory[K, V]) pop() {
	e := m.entry(m.first)
	if e.at != dead {
		m.disown(m.first)
		i, _ := m.find(e.key)
		e.at = dead // out of the index before unslot may rebuild it
		m.unslot(i)
	}
	*e = memEntry[K, V]{}
	m.head = (m.head + 1) % len(m.ring)
	m.first++
	m.n--
	if len(m.ring) > minRing && m.n <= len(m.ring)/4 {
		m.resize(len(m.ring) / 2)
	}
}

// resize moves the entries, in order, to a ring of size size (>= n). The
// index names entries by sequence number, so it does not change.
func (m *memory[K, V]) resize(size int) {
	ring := make([]memEntry[K, V], size)
	for i := range m.n {
		ring[i] = m.ring[(m.head+i)%len(m.ring)]
	}
	m.ring, m.head = ring, 0
}

// live returns a copy of the live entries, oldest first.
func (m *memory[K, V]) live() []memEntry[K, V] {
	if m.used == 0 {
		return nil
	}
	out := make([]memEntry[K, V], 0, m.used)
	for i := range m.n {
		if e := m.entry(m.first + uint64(i)); e.at != dead {
			out = append(out, *e)
		}
	}
	return out
}

// principals returns the names of the principals by number (those of
// numbers not in use are stale or "": no live entry names them).
func (m *memory[K, V]) principals() []string {
	out := make([]string, len(m.owners))
	for i := range m.owners {
		out[i] = m.owners[i].name
	}
	return out
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
	m.idle.forget(m.clock, retention, min(m.cfg.MaxRequests, MaxIdleLocks), func(l *lockEntry) {
		m.names.remove(l)
	})
	if plant.On(plant.IDsForgotten) {
		m.plantForgetOps()
	}
}

// admitOp refuses a new op_id when the op_id memory is full of ids younger
// than MinIDRetention: forgetting one would break the promise that a retry
// within MinIDRetention is never applied twice.
//
// A principal at its quota of ids (quota.go) is refused the same way when
// its own oldest is younger than MinIDRetention; otherwise remembering the
// new id forgets its oldest (rememberedBy).
func (m *impl) admitOp(p string) error {
	minimum := m.minRetention()
	if m.ops.full(m.clock, int64(minimum), m.cfg.MaxOps) {
		return fence.Exhausted("remembered op_ids (config.max_ops)",
			"at most "+utoa(m.cfg.MaxOps)+" younger than "+minimum.String(), utoa(m.ops.len()))
	}
	if q := m.quotaOf(p).IDs; m.ops.ownerFull(p, m.clock, int64(minimum), q, 0) {
		return exhausted("remembered op_ids", p, "config.max_ids_per_principal", q, m.ops.owns(p))
	}
	return nil
}

// rememberedBy applies principal p's quota of ids after an id of p's was
// remembered: its oldest beyond the quota are forgotten once
// MinIDRetention old.
func (m *impl) rememberedBy(p string) {
	if p == "" {
		return
	}
	q, minimum := m.quotaOf(p).IDs, int64(m.minRetention())
	m.ops.forgetOwner(p, m.clock, minimum, q, 0)
	m.requests.forgetOwner(p, m.clock, minimum, q, m.liveBy[p])
}

// admitRequest is admitOp for a new request_id. The memory's cap counts
// ended requests only: a request admitted while queued or holding is
// remembered when it ends even if the memory is full then, so the memory
// may exceed MaxRequests by the number of requests live at that moment. A
// principal's quota counts its live ones too (liveBy): they cannot be
// forgotten to make room, so one principal cannot overshoot its quota, and
// with it the memory, by holding many at once.
func (m *impl) admitRequest(p string) error {
	minimum := m.minRetention()
	if m.requests.full(m.clock, int64(minimum), m.cfg.MaxRequests) {
		return fence.Exhausted("remembered request_ids (config.max_requests)",
			"at most "+utoa(m.cfg.MaxRequests)+" younger than "+minimum.String(), utoa(m.requests.len()))
	}
	if q, live := m.quotaOf(p).IDs, m.liveBy[p]; m.requests.ownerFull(p, m.clock, int64(minimum), q, live) {
		return exhausted("remembered request_ids", p, "config.max_ids_per_principal", q, m.requests.owns(p)+live)
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
