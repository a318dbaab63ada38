package state

import (
	"strings"
	"sync"

	"github.com/google/btree"
)

// nameIndex holds every lock entry of the machine in name order: it finds
// a lock by name (get, O(log N)) and a page of a prefix (locksPage: List,
// a watch's state) in O(log N + page). It is the only index of locks by
// name — there is no map beside it, which saved ~36 bytes a lock (issue
// 24, item 5; docs/design.md, "A lock in memory"). lockFor adds, forget
// removes, a restore rebuilds it; it is never written to a snapshot:
// replay and restore give the same locks in it, and nothing in a
// command's outcome depends on its shape.
type nameIndex struct {
	t *btree.BTreeG[*lockEntry]
}

// nameIndexDegree is the B-tree's degree: nodes of up to 2×32-1 entries.
const nameIndexDegree = 32

func newNameIndex() nameIndex {
	return nameIndex{t: btree.NewG(nameIndexDegree, func(a, b *lockEntry) bool { return a.name < b.name })}
}

func (x nameIndex) add(l *lockEntry)    { x.t.ReplaceOrInsert(l) }
func (x nameIndex) remove(l *lockEntry) { x.t.Delete(l) }
func (x nameIndex) len() int            { return x.t.Len() }

// nameProbes are the keys get looks a name up with: the tree compares
// *lockEntry by name, and a probe of its own per lookup would be 144
// bytes of garbage. A pool, not a field of the machine, because reads
// under a read lock run concurrently (api.go).
var nameProbes = sync.Pool{New: func() any { return new(lockEntry) }}

// get returns the lock named name, nil if there is none.
func (x nameIndex) get(name string) *lockEntry {
	p := nameProbes.Get().(*lockEntry)
	p.name = name
	l, _ := x.t.Get(p)
	p.name = ""
	nameProbes.Put(p)
	return l
}

// each calls f on every lock, in name order.
func (x nameIndex) each(f func(*lockEntry)) {
	x.t.Ascend(func(l *lockEntry) bool { f(l); return true })
}

// ascend calls f on each lock whose name starts with prefix and comes
// after after ("": from the first), in name order, until f returns false.
func (x nameIndex) ascend(prefix, after string, f func(*lockEntry) bool) {
	pivot := prefix
	if after >= prefix {
		pivot = after + "\x00" // the least name after after
	}
	x.t.AscendGreaterOrEqual(&lockEntry{name: pivot}, func(l *lockEntry) bool {
		if !strings.HasPrefix(l.name, prefix) {
			return false // past the prefix's names: they are contiguous
		}
		return f(l)
	})
}
