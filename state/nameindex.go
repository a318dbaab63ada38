package state

import (
	"strings"

	"github.com/google/btree"
)

// nameIndex orders the locks of byName by name, so that a page of a
// prefix (locksPage: List, a watch's state) costs O(log N + page) instead
// of a scan and sort of every lock. It is derived from byName, kept in
// step with it (lockFor adds, forget removes, a restore rebuilds it) and
// never written to a snapshot: replay and restore give the same locks in
// it, and nothing in a command's outcome depends on its shape.
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
