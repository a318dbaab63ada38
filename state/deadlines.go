package state

import "container/heap"

// deadlineHeap orders the locks that have something due (a lease expiry, a
// wait running out, a lock-delay ending) by (deadline, name): a total order,
// so which lock is settled first never depends on the heap's history — a
// restored replica behaves as the original. Every operation is O(log n).
type deadlineHeap []*lockEntry

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].name < h[j].name
}
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = int32(i)
	h[j].heapIndex = int32(j)
}
func (h *deadlineHeap) Push(x any) {
	l := x.(*lockEntry)
	l.heapIndex = int32(len(*h))
	*h = append(*h, l)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.heapIndex = -1
	return l
}

// set files l with deadline at.
func (h *deadlineHeap) set(l *lockEntry, at int64) {
	l.deadline = at
	if l.heapIndex >= 0 {
		heap.Fix(h, int(l.heapIndex))
		return
	}
	heap.Push(h, l)
}

func (h *deadlineHeap) remove(l *lockEntry) {
	if l.heapIndex >= 0 {
		heap.Remove(h, int(l.heapIndex))
	}
}

// due returns the lock with the earliest deadline if it is at or before now.
func (h deadlineHeap) due(now int64) (*lockEntry, bool) {
	if len(h) == 0 || h[0].deadline > now {
		return nil, false
	}
	return h[0], true
}

// nextDeadline is the earliest of the lock heap's and the session heap's.
func (m *impl) nextDeadline() (int64, bool) {
	at, ok := m.nextSessionDeadline()
	if len(m.deadlines) > 0 && (!ok || m.deadlines[0].deadline < at) {
		at, ok = m.deadlines[0].deadline, true
	}
	if e, eok := m.nextTokenExpiry(); eok && (!ok || e < at) {
		at, ok = e, true
	}
	return at, ok
}

// nextTokenExpiry is the earliest expiry, still ahead of server time, of
// an unrevoked token. A tick at it moves server time past it on every
// replica, so an idle store (where nothing else advances server time)
// refuses an expired token on time (the server judges expiry by the
// replica's server time). O(tokens): there are at most MaxAuthTokens.
func (m *impl) nextTokenExpiry() (int64, bool) {
	var at int64
	ok := false
	for _, t := range m.auth.tokens {
		if t.ExpiresAt > m.clock && !t.Revoked && (!ok || t.ExpiresAt < at) {
			at, ok = t.ExpiresAt, true
		}
	}
	return at, ok
}
