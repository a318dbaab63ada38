package client

import (
	"cmp"
	"slices"
	"time"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// call is one request on the session's stream, from the moment it is
// queued until its reply (or the end of its session).
type call struct {
	id        uint64 // correlation id, echoed by the reply
	seq       uint64 // exactly-once sequence number; 0: not sequenced
	req       *fencev1.SessionRequest
	keepAlive bool
	sent      time.Time // keepalive: when it was sent

	// abandoned: its caller stopped waiting (its context ended); the reply
	// is discarded, except a grant, which is released at once.
	abandoned bool

	done  chan struct{}
	reply *fencev1.SessionReply
	err   error
}

func newCall(req *fencev1.SessionRequest) *call {
	return &call{req: req, done: make(chan struct{})}
}

// finish hands the call its outcome. It runs once per call: whoever takes
// the call out of its table (under session.mu) finishes it.
func (c *call) finish(reply *fencev1.SessionReply, err error) {
	c.reply, c.err = reply, err
	close(c.done)
}

// callTable holds the calls of one session generation that have no reply
// yet, and the order in which to send them. It is guarded by session.mu.
//
// Sequence numbers count from 1 per session. ack, sent with every request,
// is the lowest seq whose reply has not come; it is kept by a floor that
// only moves up (each seq is passed once), so finding it costs O(1)
// amortized however many calls are in flight.
type callTable struct {
	nextCall uint64
	nextSeq  uint64
	floor    uint64
	pending  map[uint64]*call // by call id
	bySeq    map[uint64]*call // sequenced calls by seq
	queue    []*call          // to send on the current stream, in order
}

func (t *callTable) init() {
	t.pending = map[uint64]*call{}
	t.bySeq = map[uint64]*call{}
	t.nextSeq, t.floor = 1, 1
}

// reset starts the numbering of a new session.
func (t *callTable) reset() {
	t.init()
	t.queue = nil
}

// add registers c, gives it its call id and (if sequenced) the next seq,
// and queues it.
func (t *callTable) add(c *call, sequenced bool) {
	t.nextCall++
	c.id = t.nextCall
	if sequenced {
		c.seq = t.nextSeq
		t.nextSeq++
		t.bySeq[c.seq] = c
	}
	t.pending[c.id] = c
	t.queue = append(t.queue, c)
}

// take removes the call with id and returns it (nil if it has none).
func (t *callTable) take(id uint64) *call {
	c := t.pending[id]
	if c == nil {
		return nil
	}
	delete(t.pending, id)
	if c.seq != 0 {
		delete(t.bySeq, c.seq)
	}
	return c
}

// has reports whether c is still waiting for its reply.
func (t *callTable) has(c *call) bool { return t.pending[c.id] == c }

// ack is the lowest seq whose reply has not come.
func (t *callTable) ack() uint64 {
	for t.floor < t.nextSeq && t.bySeq[t.floor] == nil {
		t.floor++
	}
	return t.floor
}

// takeAll removes every call and returns them.
func (t *callTable) takeAll() []*call {
	all := make([]*call, 0, len(t.pending))
	for _, c := range t.pending {
		all = append(all, c)
	}
	t.pending = map[uint64]*call{}
	t.bySeq = map[uint64]*call{}
	t.queue = nil
	return all
}

// requeue is for a new stream: every call without a reply is queued again
// in the order it was first queued (same call id, same seq), except
// keepalives, which are removed and returned (a new stream starts with a
// fresh one).
func (t *callTable) requeue() (keepAlives []*call) {
	t.queue = t.queue[:0]
	for id, c := range t.pending {
		if c.keepAlive {
			delete(t.pending, id)
			keepAlives = append(keepAlives, c)
			continue
		}
		t.queue = append(t.queue, c)
	}
	slices.SortFunc(t.queue, func(a, b *call) int { return cmp.Compare(a.id, b.id) })
	return keepAlives
}
