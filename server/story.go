package server

import (
	"container/list"
	"hash/maphash"
	"sync"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// A lock's story (OperatorService.LockStory): the last storyEvents
// lifecycle events (grant, handoff, release, expire, write) and the last
// storyRefusals refusals of a stale token of each of the storyNames names
// the node's applied changes touched most recently. It is fed from the
// changes the node applies (Deps.Changes), after the state's lock is
// released: node-local memory, never in the replicated state or a
// snapshot, so it changes no replay (rule R1) and the state stays pure. A
// node that restarts starts with no story; every member keeps its own
// (the same events, its own wall-clock times).
//
// Fairness: a name's story belongs to the principal of the change that
// made it (that of the lease or the write; "" if none). When storyNames
// are kept, the least recently touched name of the principal holding the
// most names is forgotten: a principal churning through names forgets its
// own first, not another tenant's. Refusals have a ring of their own, so
// a flood of stale writes never pushes a lock's grants out.
//
// A forgotten name sets its bit of a storyForgotten-bit filter: a name
// whose bit is set is answered as truncated (older events may be missing)
// whether or not it is kept now (false positives, never a silent gap).
//
// Memory: at most storyNames × (storyEvents + storyRefusals) events of
// about 120 bytes plus their owner and principal strings (bounded by the
// API's owner and principal bounds): an outside test filling 4096 names ×
// 64 events with 512-byte names and 256-byte owners measured 60-68 MB of
// heap (docs/operations.md); a few MB in practice.
const (
	storyEvents    = 64
	storyRefusals  = 16
	storyNames     = 4096
	storyForgotten = 1 << 16
)

// storyEvent is one event of a lock's story.
type storyEvent struct {
	kind              string // grant, handoff, release, expire, write, refused_stale
	token             fence.Token
	owner, principal  string
	refused, accepted fence.Token
	at                int64 // Unix ms
	index             uint64
	mode              fence.Mode
	session           uint64
	hasMode           bool
}

// eventRing is at most its bound's last events.
type eventRing struct {
	events  []storyEvent // next is where the next event goes once full
	next    int
	dropped bool // older events were overwritten
}

func (r *eventRing) add(e storyEvent, bound int) {
	if len(r.events) < bound {
		r.events = append(r.events, e)
		return
	}
	r.events[r.next] = e
	r.next = (r.next + 1) % bound
	r.dropped = true
}

// ordered is the ring's events, oldest first.
func (r *eventRing) ordered() []storyEvent {
	out := make([]storyEvent, 0, len(r.events))
	out = append(out, r.events[r.next:]...)
	return append(out, r.events[:r.next]...)
}

// story is one name's events, and the request_ids of the acquires seen
// queued on it and not yet out of the queue (at most storyEvents: a grant
// to one of them is a hand-off).
type story struct {
	name, principal string
	life            eventRing // lifecycle events and writes, storyEvents
	refusals        eventRing // refused_stale, storyRefusals
	queued          map[string]struct{}
	elem            *list.Element // in its principal's list
}

// storyBook is every name's story; each principal's names in a list,
// least recently touched at the back.
type storyBook struct {
	mu        sync.Mutex
	byName    map[string]*story
	byPrin    map[string]*list.List       // of *story, most recently touched at the front
	atCount   map[int]map[string]struct{} // principals by how many names they hold (at most storyNames sets)
	maxCount  int
	forgotten [storyForgotten / 64]uint64
	seed      maphash.Seed
	since     int64 // Unix ms the book began
	now       func() time.Time
}

func newStoryBook(now func() time.Time) *storyBook {
	return &storyBook{byName: map[string]*story{}, byPrin: map[string]*list.List{}, atCount: map[int]map[string]struct{}{},
		seed: maphash.MakeSeed(), now: now, since: now().UnixMilli()}
}

// forgottenBit is name's bit of the filter: its word and mask.
func (b *storyBook) forgottenBit(name string) (int, uint64) {
	h := maphash.String(b.seed, name) % storyForgotten
	return int(h / 64), 1 << (h % 64)
}

// recount moves principal p from holding from names to holding to.
func (b *storyBook) recount(p string, from, to int) {
	if from > 0 {
		delete(b.atCount[from], p) // an emptied set is kept: a churn moves one principal between two counts
	}
	if to > 0 {
		if b.atCount[to] == nil {
			b.atCount[to] = map[string]struct{}{}
		}
		b.atCount[to][p] = struct{}{}
	}
	b.maxCount = max(b.maxCount, to)
	for b.maxCount > 0 && len(b.atCount[b.maxCount]) == 0 {
		b.maxCount--
	}
}

// forgetOne forgets the least recently touched name of a principal
// holding the most names.
func (b *storyBook) forgetOne() {
	var p string
	for p = range b.atCount[b.maxCount] {
		break
	}
	l := b.byPrin[p]
	old := l.Back()
	l.Remove(old)
	n := l.Len()
	if n == 0 {
		delete(b.byPrin, p)
	}
	b.recount(p, n+1, n)
	name := old.Value.(*story).name
	delete(b.byName, name)
	w, m := b.forgottenBit(name)
	b.forgotten[w] |= m
}

// touch is name's story, made (for principal, forgetting one name when
// storyNames are kept) or moved to the front.
func (b *storyBook) touch(name, principal string) *story {
	st := b.byName[name]
	if st != nil {
		b.byPrin[st.principal].MoveToFront(st.elem)
		return st
	}
	if len(b.byName) >= storyNames {
		b.forgetOne()
	}
	st = &story{name: name, principal: principal}
	l := b.byPrin[principal]
	if l == nil {
		l = list.New()
		b.byPrin[principal] = l
	}
	st.elem = l.PushFront(st)
	b.recount(principal, l.Len()-1, l.Len())
	b.byName[name] = st
	return st
}

// record adds one applied command's changes (entry index) to the stories
// of the names they touch. A grant is a hand-off when its acquire was seen
// queued on the lock (since this node started: a waiter queued before is
// shown as a grant). Queued and left-queue
// changes are not events of their own (a busy lock's waiters would push
// its grants out of the ring); only the queued request_ids are kept.
func (b *storyBook) record(index uint64, cs []state.Change) {
	at := b.now().UnixMilli()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		switch c.Kind {
		case state.ChangeQueued:
			st := b.touch(c.Name, c.Principal)
			if c.RequestID != "" && len(st.queued) < storyEvents {
				if st.queued == nil {
					st.queued = map[string]struct{}{}
				}
				st.queued[c.RequestID] = struct{}{}
			}
			continue
		case state.ChangeLeftQueue:
			if st := b.byName[c.Name]; st != nil {
				delete(st.queued, c.RequestID)
			}
			continue
		}
		e := storyEvent{token: c.Token, owner: c.Owner, principal: c.Principal, at: at, index: index, mode: c.Mode, session: c.Session}
		st := b.touch(c.Name, c.Principal)
		switch c.Kind {
		case state.ChangeGranted:
			e.kind, e.hasMode = "grant", true
			if _, ok := st.queued[c.RequestID]; ok && c.RequestID != "" {
				e.kind = "handoff"
				delete(st.queued, c.RequestID)
			}
		case state.ChangeReleased:
			e.kind, e.hasMode = "release", true
		case state.ChangeExpired:
			e.kind, e.hasMode = "expire", true
		case state.ChangeWritten:
			e.kind, e.owner = "write", ""
		case state.ChangeRefused:
			st.refusals.add(storyEvent{kind: "refused_stale", refused: c.Token, accepted: c.LastAccepted, at: at, index: index}, storyRefusals)
			continue
		default:
			continue
		}
		st.life.add(e, storyEvents)
	}
}

// read is name's events, oldest first (in log order), and whether older
// ones may be missing: dropped from its rings, or its name forgotten
// since the book began (the filter's bit set). It does not count as a
// touch.
func (b *storyBook) read(name string) (events []storyEvent, truncated bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, m := b.forgottenBit(name)
	truncated = b.forgotten[w]&m != 0
	st := b.byName[name]
	if st == nil {
		return nil, truncated
	}
	life, refs := st.life.ordered(), st.refusals.ordered()
	events = make([]storyEvent, 0, len(life)+len(refs))
	for len(life) > 0 || len(refs) > 0 {
		if len(refs) == 0 || len(life) > 0 && life[0].index <= refs[0].index {
			events, life = append(events, life[0]), life[1:]
		} else {
			events, refs = append(events, refs[0]), refs[1:]
		}
	}
	return events, truncated || st.life.dropped || st.refusals.dropped
}

// noteChanges is the Deps.Changes hook: one applied command's changes
// (entry index) into the stories and the activity ring's grant count (a
// set's grant is one change per lock, one grant).
//
// Changes applied before the node caught up with its cluster since it
// started (Deps.Auth.CaughtUp) are past events the node learns late (what
// was committed while it was down), not fed: they would be stamped with
// the catch-up's wall time, a false spike. (The node itself hands none of
// the entries its log held when it opened, node.OnChanges.)
func (s *Server) noteChanges(index uint64, cs []state.Change) {
	// Entries the node learned late in one catch-up burst: raft's applied
	// index (which CaughtUp reads) runs ahead of the FSM's, so a burst
	// applied as one batch found the node caught up while its entries
	// were still being applied (an outside test saw a restarted node's
	// story stamp every missed event with its restart time).
	if p, ok := s.deps.Auth.(interface{ PastThrough() uint64 }); ok && index <= p.PastThrough() {
		return
	}
	if !s.fed.Load() {
		if s.deps.Auth != nil && s.deps.Auth.CaughtUp() != nil {
			return
		}
		s.fed.Store(true)
	}
	s.story.record(index, cs)
	grants := 0
	var last fence.Token
	for _, c := range cs {
		if c.Kind == state.ChangeGranted && c.Token != last {
			grants++
			last = c.Token
		}
	}
	if grants > 0 {
		s.activity.granted(grants)
	}
}
