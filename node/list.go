package node

import (
	"context"

	"github.com/fenceworks/fence/state"
)

// LocksPage lists one page of the locks whose names start with prefix
// (state.Machine.LocksPage): those after the name after ("" for the first
// page), at most limit of them, sorted by name, linearizably and at the
// leader clock like Locks. next is the after of the next page, "" when this
// page is the last.
func (n *Node) LocksPage(ctx context.Context, prefix, after string, limit int) (locks []state.LockInfo, next string, err error) {
	now, err := n.readIndex(ctx)
	if err != nil {
		return nil, "", err
	}
	n.fsm.read(func(m *state.Machine) { locks, next = m.LocksPage(prefix, after, limit, now) })
	return locks, next, nil
}
