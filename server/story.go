package server

import (
	"container/list"
	"sync"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// A lock's story (OperatorService.LockStory): the last storyEvents events
// of each of the storyNames names the node's applied changes touched most
// recently (least recently touched forgotten first). It is fed from the
// changes the node applies (Deps.Changes), after the state's lock is
// released: node-local memory, never in the replicated state or a
// snapshot, so it changes no replay (rule R1) and the state stays pure. A
// node that restarts starts with no story; every member keeps its own
// (the same events, its own wall-clock times).
//
// Memory: at most storyNames × storyEvents events of about 120 bytes plus
// their owner and principal strings (bounded by the API's owner and
// principal bounds): about 32 MB at the worst, a few MB in practice.
const (
	storyEvents = 64
	storyNames  = 4096
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

// story is one name's events: a ring of at most storyEvents, and the
// request_ids of the acquires seen queued on it and not yet out of the
// queue (at most storyEvents: a grant to one of them is a hand-off).
type story struct {
	name    string
	events  []storyEvent // ring; next is where the next event goes once full
	next    int
	dropped bool // older events were overwritten
	queued  map[string]struct{}
	elem    *list.Element
}

// storyBook is every name's story, least recently touched at the back.
type storyBook struct {
	mu     sync.Mutex
	byName map[string]*story
	lru    list.List // of *story, most recently touched at the front
	since  int64     // Unix ms the book began
	now    func() time.Time
}

func newStoryBook(now func() time.Time) *storyBook {
	return &storyBook{byName: map[string]*story{}, now: now, since: now().UnixMilli()}
}

// touch is name's story, made (forgetting the least recently touched one
// when storyNames are kept) or moved to the front.
func (b *storyBook) touch(name string) *story {
	st := b.byName[name]
	if st != nil {
		b.lru.MoveToFront(st.elem)
		return st
	}
	if len(b.byName) >= storyNames {
		old := b.lru.Back()
		b.lru.Remove(old)
		delete(b.byName, old.Value.(*story).name)
	}
	st = &story{name: name}
	st.elem = b.lru.PushFront(st)
	b.byName[name] = st
	return st
}

func (st *story) add(e storyEvent) {
	if len(st.events) < storyEvents {
		st.events = append(st.events, e)
		return
	}
	st.events[st.next] = e
	st.next = (st.next + 1) % storyEvents
	st.dropped = true
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
			st := b.touch(c.Name)
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
		st := b.touch(c.Name)
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
			e = storyEvent{kind: "refused_stale", refused: c.Token, accepted: c.LastAccepted, at: at, index: index}
		default:
			continue
		}
		st.add(e)
	}
}

// read is name's events, oldest first, and whether older ones were
// dropped. It does not count as a touch.
func (b *storyBook) read(name string) (events []storyEvent, dropped bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.byName[name]
	if st == nil {
		return nil, false
	}
	events = make([]storyEvent, 0, len(st.events))
	events = append(events, st.events[st.next:]...)
	events = append(events, st.events[:st.next]...)
	return events, st.dropped
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
