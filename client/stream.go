package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// run holds the session's stream for as long as the Client lives: while a
// session is open it serves one stream at a time, and when a stream breaks
// it opens the next one — on the next endpoint, when the Client has several
// — and resends every call still without a reply, with the same seq.
// Broken streams go round the endpoints at once, with a backoff pause
// between rounds (see backoffCap for its bound; a stream that had replies
// resets it to the first), so a node that answers and then ends every
// stream is not called in a tight loop.
func (s *session) run() {
	defer close(s.loopDone)
	pause := s.c.cfg.backoffMin
	broken := 0       // streams that broke since the last pause
	waiting := false  // a node answered Unavailable since the last pause
	reopened := false // a stream that had replies broke: look for the leader again
	for {
		s.mu.Lock()
		id, gen := s.id, s.gen
		s.mu.Unlock()
		if id == 0 {
			select {
			case <-s.wake:
				continue
			case <-s.closing:
				return
			}
		}
		if reopened {
			// A stream that worked broke: the leader may have moved, or be
			// the node that failed. Ask where it is now, for a tenth of
			// the TTL at most: the session's margin is for the stream
			// that replaces the broken one.
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-s.closing:
					cancel()
				case <-ctx.Done():
				}
			}()
			s.c.seekLeader(ctx, s.ttlOf()/10)
			cancel()
		}
		reopened = false
		ep := s.c.pick()
		err, answered := s.serve(ep, id, gen)
		select {
		case <-s.closing:
			return
		default:
		}
		if err == nil {
			continue // the session ended; wait for the next
		}
		if errors.Is(err, errMoveToLeader) {
			// Ended on purpose: the Client points at the leader now
			// (follow_leader.go). Open the next stream there at once.
			s.c.cfg.logger.Debug("fence: moving the session's stream to the leader", "session", id, "from", ep.url)
			continue
		}
		if errors.Is(err, fence.ErrSessionExpired) {
			s.expired(gen, err) // the server ended the stream: the session is gone
			continue
		}
		// The session lives on the servers, not on one of them: the next
		// stream may as well be on the next endpoint (the one that failed
		// may be down, cut off, or no longer able to reach the leader).
		s.c.failover(ep)
		if answered {
			// A stream that had replies starts a new round: the next
			// endpoint is tried at once, and the pause starts from the
			// bottom again.
			pause = s.c.cfg.backoffMin
			broken, waiting = 0, false
			reopened = true
		}
		broken++
		waiting = waiting || answeredUnavailable(err)
		s.mu.Lock()
		if s.gen == gen {
			s.lastErr = err
		}
		s.mu.Unlock()
		s.c.cfg.logger.Debug("fence: session stream broke, reconnecting", "session", id, "endpoint", ep.url, "err", err)
		if broken < len(s.c.endpoints) {
			continue // the round of the endpoints goes on at once
		}
		t := time.NewTimer(jitter(pause))
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			return
		}
		pause = min(2*pause, s.c.backoffCap(waiting))
		broken, waiting = 0, false
	}
}

// errKeepAliveTimeout: a keepalive got no reply within TTL/3; the stream
// is taken for dead and its connection cut.
var errKeepAliveTimeout = errors.New("fence: session keepalive got no reply within TTL/3")

// serve runs one stream of session id (generation gen) on ep until it
// breaks (the error), the session ends or the Client closes (nil). answered
// reports whether any reply came on it.
func (s *session) serve(ep *endpoint, id, gen uint64) (err error, answered bool) {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.streamCancel = cancel
	s.mu.Unlock()
	st := s.openStream(ctx, ep)
	recvErr := make(chan error, 1)
	replied := make(chan struct{}, 1)
	go func() {
		for {
			r, err := st.Receive()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case replied <- struct{}{}:
			default:
			}
			s.deliver(gen, r)
		}
	}()
	received := false
	defer func() {
		// Canceling alone does not end a Receive once the reply headers
		// came while the request body is still open (net/http's HTTP/2
		// client watches the context only after the body is done): close
		// the request side too.
		cancel()
		_ = st.CloseRequest()
		if !received {
			<-recvErr
		}
		select {
		case <-replied:
			answered = true
		default:
		}
	}()

	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return nil, false
	}
	dropped := s.calls.requeue()
	s.deferred, s.deferUntil = nil, time.Time{} // requeued with the rest
	// The stream opens with a keepalive: it names the session (attach) and
	// extends it.
	ka := s.queueKeepAliveLocked()
	s.calls.queue = append([]*call{ka}, s.calls.queue[:len(s.calls.queue)-1]...)
	s.mu.Unlock()
	for _, c := range dropped {
		c.finish(nil, errStreamBroke)
	}

	first := true
	mover := s.newLeaderMover(ep)
	select {
	case <-s.followerSeen: // said of an earlier stream's node
	default:
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.gen != gen {
			s.mu.Unlock()
			return nil, false
		}
		if len(s.deferred) > 0 && !time.Now().Before(s.deferUntil) {
			s.calls.queue = append(s.calls.queue, s.deferred...)
			s.deferred, s.deferUntil = nil, time.Time{}
		}
		batch := s.calls.queue
		s.calls.queue = nil
		ack := s.calls.ack()
		s.mu.Unlock()
		for _, c := range batch {
			m := c.req
			m.Session, m.Call, m.Seq, m.Ack = 0, c.id, c.seq, ack
			if first {
				m.Session, first = id, false
			}
			if c.keepAlive {
				s.mu.Lock()
				c.sent = time.Now()
				s.mu.Unlock()
			}
			if err := st.Send(m); err != nil {
				// The stream is over; its status comes with Receive, which
				// ends once the request side is closed too.
				cancel()
				_ = st.CloseRequest()
				received = true
				return streamErr(<-recvErr, err), false
			}
		}
		if err := st.Flush(); err != nil {
			cancel()
			_ = st.CloseRequest()
			received = true
			return streamErr(<-recvErr, err), false
		}

		wait, hung := s.keepAliveDue()
		if hung {
			s.mu.Lock()
			if s.gen == gen {
				s.lastErr = errKeepAliveTimeout
			}
			s.mu.Unlock()
			if s.conns != nil {
				s.conns.cut() // a new stream must not reuse a connection that stopped answering
			}
			return errKeepAliveTimeout, false
		}
		if wait <= 0 {
			s.mu.Lock()
			if s.gen == gen {
				s.queueKeepAliveLocked()
			}
			s.mu.Unlock()
			continue
		}
		s.mu.Lock()
		if len(s.deferred) > 0 {
			wait = min(wait, max(time.Until(s.deferUntil), 0))
		}
		s.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-s.wake:
		case err := <-recvErr:
			received = true
			return streamErr(err, nil), false
		case <-timer.C:
		case <-s.followerSeen:
			mover.start(ctx)
		case moved := <-mover.done:
			if mover.finish(moved) {
				return errMoveToLeader, true
			}
		case <-s.closing:
			return nil, false
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// errStreamBroke fails a keepalive whose stream broke before its reply.
var errStreamBroke = errors.New("fence: session stream broke")

// streamErr is the error that ended a stream: what Receive said, which
// carries the server's status, or else what Send said.
func streamErr(recv, send error) error {
	if recv != nil {
		return toError("session stream", recv)
	}
	return toError("session stream", send)
}

// queueKeepAliveLocked queues a keepalive (s.mu held) and returns it.
func (s *session) queueKeepAliveLocked() *call {
	c := newCall(&fencev1.SessionRequest{Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}})
	c.keepAlive = true
	s.calls.add(c, false)
	s.ka = c
	return c
}

// keepAliveDue returns how long until the next keepalive is due (<= 0: now),
// or hung when the one in flight has had no reply for TTL/3.
func (s *session) keepAliveDue() (wait time.Duration, hung bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	third := s.ttl / 3
	if s.ka != nil {
		if s.ka.sent.IsZero() {
			return time.Hour, false // queued, not sent yet: the send wakes us
		}
		left := time.Until(s.ka.sent.Add(third))
		return left, left <= 0
	}
	// Every TTL/3 after the last successful one — and no later than 2/3 of
	// a TTL before the deadline, which a reply to an older send (a
	// Lease.Renew) may have pulled in: a keepalive that then gets no reply
	// is known to fail (RenewErr) a third of a TTL before the deadline.
	next := s.lastSent.Add(third)
	if d := s.deadline.Add(-2 * third); d.Before(next) {
		next = d
	}
	if s.kaRetry.After(next) {
		next = s.kaRetry
	}
	return time.Until(next), false
}

// deliver hands a reply of the stream of generation gen to its call.
func (s *session) deliver(gen uint64, r *fencev1.SessionReply) {
	var err error
	if det := r.GetError(); det != nil {
		err = replyError(det, r.GetMessage())
	}
	full := streamFull(err)
	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return
	}
	c := s.calls.pending[r.GetCall()]
	if c == nil {
		s.mu.Unlock()
		return
	}
	if full && !c.keepAlive {
		// Too many requests in flight on the stream: nothing was applied.
		// The call stays pending (so ack does not pass its seq) and is sent
		// again shortly, with the same seq.
		s.deferred = append(s.deferred, c)
		if s.deferUntil.IsZero() {
			s.deferUntil = time.Now().Add(s.c.cfg.backoffMin)
		}
		s.mu.Unlock()
		s.kick()
		return
	}
	s.calls.take(c.id)
	if c == s.ka {
		s.ka = nil
	}
	abandoned := c.abandoned
	s.mu.Unlock()

	if errors.Is(err, fence.ErrSessionExpired) {
		s.expired(gen, err)
		c.finish(nil, err)
		return
	}
	if c.keepAlive {
		if err != nil {
			s.mu.Lock()
			s.lastErr = err
			s.kaRetry = time.Now().Add(s.ttl / 10)
			s.mu.Unlock()
		} else {
			info := r.GetKeepAlive().GetSession()
			s.extend(gen, c.sent, info, info.GetRemaining().AsDuration())
			s.noteFollower(r.GetKeepAlive().GetFollower())
		}
		c.finish(r, err)
		s.kick()
		return
	}
	if abandoned && err == nil && r.GetAcquire() != nil {
		// Granted to a caller that stopped waiting: nobody holds it, free it.
		l := r.GetAcquire().GetLease()
		s.sendAndForget(gen, &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Release{Release: &fencev1.ReleaseRequest{Name: l.GetName(), Token: l.GetToken()}}})
	}
	c.finish(r, err)
}

// streamFull reports the server's refusal of a request beyond its bound of
// requests in flight on one stream (a limit of the stream, not of the
// store: nothing was applied).
func streamFull(err error) bool {
	var re *fence.ResourceExhaustedError
	return errors.As(err, &re) && strings.Contains(re.Limit, "in flight on one stream")
}

// replyError is the refusal carried by a reply.
func replyError(det *fencev1.ErrorDetail, msg string) error {
	if err := apierr.FromDetail(det); err != nil {
		return err
	}
	return fmt.Errorf("fence: refused (%s): %s", det.GetReason(), msg)
}

// sendAndForget queues a sequenced request of generation gen whose reply
// nobody waits for.
func (s *session) sendAndForget(gen uint64, req *fencev1.SessionRequest) {
	s.mu.Lock()
	if s.gen == gen && s.id != 0 {
		c := newCall(req)
		c.abandoned = true
		s.calls.add(c, true)
	}
	s.mu.Unlock()
	s.kick()
}

// call sends req on the session's stream (sequenced: with the next seq)
// and waits for its reply. It opens the session first if none is open, and
// returns errNoSessions if the server has none. It returns the generation
// of the session that answered. When ctx ends first the call is abandoned:
// it stays queued (so that a seq is never reused and ack never passes a
// request whose outcome is unknown), its reply is discarded, and a lease
// it is granted is released.
func (s *session) call(ctx context.Context, op string, req *fencev1.SessionRequest, sequenced bool) (*fencev1.SessionReply, uint64, error) {
	var c *call
	var gen uint64
	for c == nil {
		g, err := s.ensureOpen(ctx)
		if err != nil {
			return nil, 0, err
		}
		s.mu.Lock()
		if s.gen == g && s.id != 0 {
			c, gen = newCall(req), g
			s.calls.add(c, sequenced)
		}
		s.mu.Unlock()
	}
	s.kick()
	select {
	case <-c.done:
		return c.reply, gen, c.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	waiting := s.calls.has(c)
	if waiting {
		c.abandoned = true
	}
	s.mu.Unlock()
	if !waiting {
		<-c.done // its reply is being handed over: take it
		return c.reply, gen, c.err
	}
	return nil, gen, withCause(ctx, fmt.Errorf("fence: %s: %w", op, ctx.Err()))
}
