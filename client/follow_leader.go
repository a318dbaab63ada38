package client

import (
	"context"
	"errors"
	"time"
)

// A session's stream that works on a follower stays there until it breaks
// (run opens the next one on the leader, seekLeader): after a leadership
// change, or on a Client that could not find the leader when its stream
// opened, every request would go on paying the follower's forwarding —
// about twice the cluster's CPU of a request on the leader
// (docs/benchmarks.md, "Sessions: the leader, spread, or a follower").
//
// So a keepalive reply says whether the node that answered it leads
// (KeepAliveResponse.follower, set by the server). When one says it does
// not, and the Client has several endpoints and may choose among them
// (not WithEndpointsInOrder), the stream's sender asks where the leader is
// (seekLeader, in a goroutine of its own, bounded by a tenth of the TTL),
// and when another endpoint says it leads it ends the stream on purpose
// (errMoveToLeader): run opens the next stream there at once and resends
// every call without a reply with its seq, as after any break — so the
// session keeps its id, its leases and exactly-once, and a caller sees
// nothing but the time the move took. At most one move per
// leaderMoveEvery, so that two nodes that disagree on who leads (an
// election half seen) do not bounce a session between them.

// leaderMoveEvery is the least time between two moves of one session.
const leaderMoveEvery = 10 * time.Second

// errMoveToLeader ends a stream that is moved to the leader.
var errMoveToLeader = errors.New("fence: session stream moved to the leader")

// noteFollower is called with every keepalive reply: follower is what it
// said of the node that answered.
func (s *session) noteFollower(follower bool) {
	if !follower || len(s.c.endpoints) <= 1 || s.c.cfg.inOrder {
		return
	}
	select {
	case s.followerSeen <- struct{}{}:
	default:
	}
}

// leaderMover is the sender's side of a move: start asks where the leader
// is (once at a time, at most once per leaderMoveEvery), and done carries
// true when the Client now points at another endpoint than the stream's.
type leaderMover struct {
	s       *session
	ep      *endpoint
	seeking bool
	done    chan bool // cap 1
}

func (s *session) newLeaderMover(ep *endpoint) *leaderMover {
	return &leaderMover{s: s, ep: ep, done: make(chan bool, 1)}
}

// start asks where the leader is, unless a question is out or the session
// moved less than leaderMoveEvery ago. ctx is the stream's.
func (m *leaderMover) start(ctx context.Context) {
	s := m.s
	if m.seeking || time.Since(s.lastMove) < leaderMoveEvery {
		return
	}
	m.seeking = true
	go func() {
		s.c.seekLeader(ctx, s.ttlOf()/10)
		m.done <- s.c.cur.Load() != m.ep.idx
	}()
}

// finish takes the answer of start: whether to move.
func (m *leaderMover) finish(moved bool) bool {
	m.seeking = false
	if moved {
		m.s.lastMove = time.Now()
	}
	return moved
}
