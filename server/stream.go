package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/fenceworks/fence/state"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// SessionService.Stream carries one session's requests and replies over one
// long-lived HTTP/2 stream (gRPC, gRPC-Web or Connect streaming; HTTP/1.1
// cannot carry a bidi stream and is answered 505).
//
// The first message must name the session (else invalid_argument naming
// "session"); the stream starts with a keepalive of it, so a session that
// has ended ends the stream at once with failed_precondition and a
// SESSION_EXPIRED detail. A first message with no op and no call (0) only
// names the session; one with a call is served like every later message
// (no op: answered INVALID_ARGUMENT, field op), so a client waiting for
// its call's reply is not left waiting. A call id above 2^53 - 1 is refused (INVALID_ARGUMENT, field
// call): replies echo it, and a JSON client must read it exactly. So is a
// call id (other than 0) of a request still in flight on the stream
// (claimCall), answered as call 0: echoed, the refusal would be taken for
// the first request's reply.
//
// Every message with an op is validated like the unary call of the same
// op, bound to the stream's session (the seq and ack of the message; a
// SessionRef inside the op is ignored) and run concurrently with the
// others: each on a goroutine of its own (a worker that outlives it:
// stream_workers.go), so the node groups what arrives
// together into one raft proposal batch and a blocking acquire holds back
// no other reply. There is no order among the requests in flight on one
// stream; a client that needs one applied before another waits for the
// first one's reply. Replies carry the message's call and come as each
// completes; a Fence refusal is a reply with ErrorDetail and message (and
// replayed when it is the saved result of the seq). A failure that is not
// a refusal (the node lost leadership, an outcome it does not know, the
// server shutting down) ends the stream with its Connect error; the client
// opens a new stream and resends what was not answered, with the same seq.
//
// Bounds: at most Config.MaxStreams streams are open at once (more are
// refused with resource_exhausted, limit max_streams); on one stream at
// most Config.MaxStreamRequests requests, and maxStreamBytes of their
// messages, are in flight at once: a request beyond either is answered at
// once with RESOURCE_EXHAUSTED and nothing is applied (the client resends it
// later with the same seq). Keepalives have a bound of their own
// (maxStreamKeepAlives) and never wait for room taken by other requests. A message is at most maxRequestBytes like a
// unary request (a larger one ends the stream with invalid_argument naming
// "body"). The first message must arrive within Config.StreamFirstMessageTimeout
// and Config.ReadTimeout (else the stream ends DEADLINE_EXCEEDED and frees
// its slot); one principal holds at most Config.MaxStreamsPerPrincipal
// streams (stream_quota.go); after
// it a stream may stay idle for as long as the client keeps it (its
// keepalives may travel on it or not). A reply must be written within
// Config.WriteTimeout of when it is ready, else the stream is reset.
//
// When the stream ends (the client closed its side: once every reply is
// sent; the client went away, or a failure: at once) the requests still in
// flight are cancelled: a queued acquire is withdrawn from its queue (a
// grant that won the race is released). The session itself is not closed:
// the client may open a new stream and go on; the session ends by Close or
// by its TTL.
const (
	// DefaultMaxStreams is the default cap on open SessionService.Stream
	// streams.
	DefaultMaxStreams = 10000
	// DefaultMaxStreamRequests is the default cap on the requests in flight
	// on one stream.
	DefaultMaxStreamRequests = 1024
	// maxStreamBytes bounds the messages in flight on one stream (the sum
	// of their encoded sizes): four of the largest.
	maxStreamBytes = 4 * maxRequestBytes
	// maxStreamKeepAlives bounds the keepalives in flight on one stream.
	// They are not counted in MaxStreamRequests: a stream whose every slot
	// holds a waiting acquire must still keep its session alive (else the
	// session, and every lease on it, would end because the client was
	// waiting for locks).
	maxStreamKeepAlives = 4
	// replyQueue is how many replies may wait for the stream's sender
	// before the requests answering them wait too.
	replyQueue = 64
)

// sessionStream is one SessionService.Stream being served.
type sessionStream struct {
	s       *Server
	st      sessionTransport
	session uint64
	// connReplies is the reply budget of the stream's connection (nil:
	// none), for each request's hold (reply_budget.go).
	connReplies *replyBudget

	ctx    context.Context // ends with the stream: in-flight requests are cancelled
	cancel context.CancelFunc

	// replies are the replies queued for sending (bounded: a request
	// whose reply finds it full waits). Whoever queues one sends what is
	// queued unless another goroutine is sending (flushReplies): no
	// goroutine of its own and no wake-up per reply.
	replies chan queuedReply
	// queued counts the replies queued and not yet taken by a sender
	// (added after a reply is queued, so that the goroutine letting go of
	// sending sees a reply queued by one that found it sending).
	queued atomic.Int64
	// sending is held by the goroutine sending the queued replies.
	sending atomic.Bool
	// sendFailed: a send failed (the stream is ended); later replies are
	// dropped. Read and written only by the goroutine holding sending.
	sendFailed bool
	wg         sync.WaitGroup // requests in flight
	inflight   atomic.Int64
	bytes      atomic.Int64
	// keepalives in flight: counted apart from inflight, so a stream full
	// of waiting acquires can still keep its session alive.
	keepalives atomic.Int64

	mu      sync.Mutex
	failure error // the first failure; it ends the stream

	// callsMu guards calls: the call ids of the requests in flight (call
	// 0, no id, is not counted), so a second request with the id of one
	// in flight is refused (its reply could not be told from the first's).
	callsMu sync.Mutex
	calls   map[uint64]struct{}
}

const streamProc = fencev1connect.SessionServiceStreamProcedure

// sessionTransport is what carries one session stream: SessionService.Stream
// over Connect (connectTransport) or the lean session port (lean.go). The
// handling of its messages (serveSession) is the same for both.
type sessionTransport interface {
	// Receive returns the next message; io.EOF once the client closed its
	// side (the replies in flight are still sent).
	Receive() (*fencev1.SessionRequest, error)
	// Send sends a reply, or buffers it until Flush.
	Send(*fencev1.SessionReply) error
	// Flush writes what Send buffered: the sender calls it once the
	// replies ready together are sent.
	Flush() error
	// noReadDeadline lifts the bound on the wait for the first message.
	noReadDeadline()
	// writeWithin bounds the writes of one batch of replies (0: none).
	writeWithin(d time.Duration)
	// closeBody ends the client's side: a Receive blocked on it returns.
	closeBody()
}

// connectTransport is SessionService.Stream over Connect (HTTP/2): each
// Send is written and flushed by Connect.
type connectTransport struct {
	*connect.BidiStream[fencev1.SessionRequest, fencev1.SessionReply]
	*streamConn // nil when Handler is mounted without serveStreams
}

func (connectTransport) Flush() error { return nil }

// serveStream serves one stream until the client ends it or it fails.
func (s *Server) serveStream(ctx context.Context, st *connect.BidiStream[fencev1.SessionRequest, fencev1.SessionReply]) error {
	return s.serveSession(ctx, connectTransport{st, streamConnOf(ctx)})
}

// serveSession serves one session stream, on whichever transport, until
// the client ends it or it fails; the error is a *connect.Error (nil: the
// client ended it).
func (s *Server) serveSession(ctx context.Context, st sessionTransport) error {
	// The caller is authenticated (and may lock) before it takes a slot
	// of MaxStreams: a stream without credentials is refused at once,
	// not kept open until its first message (an outside test held every
	// slot with streams that sent no token and nothing else).
	var principal string // "" with checking off: no per-principal quota
	if s.deps.Auth != nil && s.deps.Auth.AuthEnabled() {
		actx, err := s.authorize(ctx, "Stream", state.PermLock, anyName)
		if err != nil {
			return s.connectError(ctx, streamProc, err)
		}
		p, _ := fence.PrincipalFrom(actx)
		principal = p.Name
	}
	// The principal's quota first (stream_quota.go): a principal at it
	// takes no slot of MaxStreams.
	release, err := s.principalStreams.take(principal, s.streamQuota(principal), "open session streams", "max_streams_per_principal")
	if err != nil {
		return s.connectError(ctx, streamProc, err)
	}
	defer release()
	if n := s.streams.Add(1); n > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		return s.connectError(ctx, streamProc, &fence.ResourceExhaustedError{
			Limit: "open session streams (config.max_streams)", Bound: fmt.Sprintf("at most %d", s.cfg.MaxStreams), Got: fmt.Sprint(n - 1),
		})
	}
	defer s.streams.Add(-1)
	first, err := s.receiveFirst(st)
	if errors.Is(err, io.EOF) {
		first, err = new(fencev1.SessionRequest), nil // closed before naming a session
	}
	if err != nil {
		return s.receiveError(err)
	}
	if first.GetSession() == 0 {
		return s.connectError(ctx, streamProc, fence.Invalid("session", "set on the first message (the id SessionService.Open returned)", ""))
	}
	// The session must be live; connecting is a sign of life, so this is
	// a keepalive.
	if _, err := s.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: first.GetSession()}); err != nil {
		return s.connectError(ctx, streamProc, err)
	}
	// From here the stream may idle as long as the client keeps it.
	st.noReadDeadline()
	ss := &sessionStream{s: s, st: st, session: first.GetSession(), connReplies: connReplies(ctx), replies: make(chan queuedReply, replyQueue)}
	ss.ctx, ss.cancel = context.WithCancel(ctx)
	defer ss.cancel()
	if principal != "" {
		go ss.watchCredentials()
	}
	return ss.serve(first)
}

// serve dispatches first and every later message until the client's side
// ends, then waits for the requests in flight and their replies.
func (ss *sessionStream) serve(first *fencev1.SessionRequest) error {
	ss.dispatch(first, true)
	for {
		m, err := ss.st.Receive()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// Gone, cut, or unreadable: what is in flight is
				// cancelled (waits withdrawn), not waited for.
				ss.end(ss.s.receiveError(err))
			}
			break
		}
		ss.dispatch(m, false)
	}
	// Every request queued its reply and sent what was queued (or left
	// it to the goroutine sending then, which sends it before it is done)
	// before its wg.Done: nothing is left to send here.
	ss.wg.Wait()
	ss.flushReplies()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.failure
}

// end records the stream's first failure and ends it: in-flight requests
// are cancelled and the request body is closed, so Receive returns.
func (ss *sessionStream) end(err error) {
	ss.mu.Lock()
	if ss.failure == nil {
		ss.failure = err
	}
	ss.mu.Unlock()
	ss.cancel()
	ss.st.closeBody()
}

// receiveError is the Connect error that ends a stream whose Receive
// failed.
func (s *Server) receiveError(err error) error {
	if s.draining() {
		return connect.NewError(connect.CodeUnavailable, errShuttingDown)
	}
	if ce := new(connect.Error); errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(connect.CodeCanceled, err)
}

// dispatch starts serving one message, or answers it at once when it is
// refused before anything runs.
func (ss *sessionStream) dispatch(m *fencev1.SessionRequest, first bool) {
	if first && m.GetOp() == nil && m.GetCall() == 0 {
		return // it only names the session: no call to answer
	}
	c, err := ss.call(m)
	if err == nil && m.GetCall() > fence.MaxTokenJSONInt {
		// A call id is echoed in the reply: above 2^53 a JSON client
		// (JavaScript's numbers) could not match the reply to its request.
		err = fence.Invalid("call", fmt.Sprintf("at most %d (2^53 - 1: a reply's call must be exact as a JSON number)", uint64(fence.MaxTokenJSONInt)), fmt.Sprint(m.GetCall()))
	}
	inFlight := false
	if err == nil && !ss.claimCall(m.GetCall()) {
		inFlight = true
		err = fence.Invalid("call", "the id of no other request in flight on this stream (a reply is matched to its request by it)", fmt.Sprint(m.GetCall()))
	}
	ss.s.metrics.streamRequests.WithLabelValues(c.op).Inc()
	if err != nil {
		call := m.GetCall()
		if call > fence.MaxTokenJSONInt || inFlight {
			// Echoed, it would be inexact as a JSON number, the very
			// thing refused, or taken for the reply of the request in
			// flight with that id: answered as call 0, the refusal's
			// value naming it exactly (a string).
			call = 0
		}
		ss.reply(ss.s.refusal(call, err, false))
		return
	}
	if c.op == "keep_alive" {
		if ss.keepalives.Add(1) > maxStreamKeepAlives {
			ss.keepalives.Add(-1)
			ss.releaseCall(m.GetCall())
			ss.reply(ss.s.refusal(m.GetCall(), &fence.ResourceExhaustedError{Limit: "keepalives in flight on one stream", Bound: fmt.Sprintf("at most %d", maxStreamKeepAlives)}, false))
			return
		}
		ss.wg.Add(1)
		ss.s.workers.run(func() {
			defer func() {
				ss.keepalives.Add(-1)
				ss.wg.Done()
			}()
			ss.do(m.GetCall(), c)
		})
		return
	}
	size := int64(proto.Size(m))
	n, b := ss.inflight.Add(1), ss.bytes.Add(size)
	if max := int64(ss.s.cfg.MaxStreamRequests); n > max || b > maxStreamBytes {
		ss.inflight.Add(-1)
		ss.bytes.Add(-size)
		ss.releaseCall(m.GetCall())
		limit := &fence.ResourceExhaustedError{Limit: "requests in flight on one stream (config.max_stream_requests)", Bound: fmt.Sprintf("at most %d", max), Got: fmt.Sprint(n - 1)}
		if n <= max {
			limit = &fence.ResourceExhaustedError{Limit: "request bytes in flight on one stream", Bound: fmt.Sprintf("at most %d", maxStreamBytes), Got: fmt.Sprint(b - size)}
		}
		ss.reply(ss.s.refusal(m.GetCall(), limit, false))
		return
	}
	ss.wg.Add(1)
	ss.s.workers.run(func() {
		defer func() {
			ss.inflight.Add(-1)
			ss.bytes.Add(-size)
			ss.wg.Done()
		}()
		ss.do(m.GetCall(), c)
	})
}

// do runs one request and queues its reply, or ends the stream.
func (ss *sessionStream) do(call uint64, c streamCall) {
	// A large reply holds its bytes in the connection's reply budget
	// until it is sent (reply_budget.go).
	h := &replyHold{all: ss.s.replies, conn: ss.connReplies, build: ss.s.building, principals: ss.s.principalReplies}
	r, replayed, err := c.run(withReplyHold(ss.ctx, h))
	switch {
	case err == nil:
		r.Call, r.Replayed = call, replayed
	case fence.ReasonOf(err) != "":
		r = ss.s.refusal(call, err, replayed)
	case ss.ctx.Err() == nil && c.acquire != nil &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		// The wait ran past the handler's bound (boundWait) while the
		// stream lives: the node withdrew it, so the caller holds
		// nothing, as when a wait runs out.
		r = ss.s.refusal(call, &fence.BusyError{Name: *c.acquire, Waited: true}, false)
	default:
		h.release()
		ss.releaseCall(call)
		ss.end(ss.s.connectError(ss.ctx, streamProc, err))
		return
	}
	// Free before the reply is queued: a client that has its reply may
	// use the id again.
	ss.releaseCall(call)
	ss.queue(queuedReply{r, h})
}

// claimCall records call as in flight; false if a request with that id
// already is. Call 0 (no id) is never refused.
func (ss *sessionStream) claimCall(call uint64) bool {
	if call == 0 {
		return true
	}
	ss.callsMu.Lock()
	defer ss.callsMu.Unlock()
	if _, ok := ss.calls[call]; ok {
		return false
	}
	if ss.calls == nil {
		ss.calls = map[uint64]struct{}{}
	}
	ss.calls[call] = struct{}{}
	return true
}

// releaseCall forgets call once its reply is queued.
func (ss *sessionStream) releaseCall(call uint64) {
	if call == 0 {
		return
	}
	ss.callsMu.Lock()
	delete(ss.calls, call)
	ss.callsMu.Unlock()
}

// queuedReply is a reply for the sender and the reply bytes it holds
// (nil: none), given back once it is sent.
type queuedReply struct {
	r    *fencev1.SessionReply
	hold *replyHold
}

// reply queues r and sends what is queued (queue).
func (ss *sessionStream) reply(r *fencev1.SessionReply) { ss.queue(queuedReply{r: r}) }

// queue queues q (waiting while the queue is full) and sends what is
// queued, unless another goroutine is sending it.
func (ss *sessionStream) queue(q queuedReply) {
	ss.replies <- q
	ss.queued.Add(1)
	ss.flushReplies()
}

// flushReplies sends the queued replies unless another goroutine is
// sending them. The one sending looks at the queue again after it lets go,
// so a reply queued while it sent, by a goroutine that found it sending,
// is never left behind: every reply queued is sent (or, after a failed
// send, dropped) before the goroutine that queued it returns from queue,
// or by the goroutine sending then before that one returns from its own.
func (ss *sessionStream) flushReplies() {
	for ss.queued.Load() > 0 {
		if !ss.sending.CompareAndSwap(false, true) {
			return // the goroutine sending looks again when it is done
		}
		ss.sendQueued()
		ss.sending.Store(false)
	}
}

// sendQueued sends what is queued, as one batch under one write deadline
// and one flush (the caller holds sending). After a failed send it drops
// what is queued (nothing waits on a stream that has ended).
func (ss *sessionStream) sendQueued() {
	if ss.sendFailed {
		for {
			select {
			case q := <-ss.replies:
				ss.queued.Add(-1)
				q.hold.release()
			default:
				return
			}
		}
	}
	ss.st.writeWithin(ss.s.cfg.WriteTimeout)
	var err error
batch:
	for n := 0; err == nil && n < replyQueue; n++ {
		select {
		case q := <-ss.replies:
			ss.queued.Add(-1)
			err = ss.st.Send(q.r)
			q.hold.release()
		default:
			break batch
		}
	}
	if err == nil {
		err = ss.st.Flush()
	}
	ss.st.writeWithin(0)
	if err != nil {
		ss.sendFailed = true
		ss.end(ss.s.receiveError(err))
	}
}

// refusal is the reply to call refused with err (a Fence refusal).
func (s *Server) refusal(call uint64, err error, replayed bool) *fencev1.SessionReply {
	s.countRefusal(err)
	s.activity.refused(string(fence.ReasonOf(err)))
	s.logRefusal(s.baseCtx, streamProc, err)
	return &fencev1.SessionReply{Call: call, Result: &fencev1.SessionReply_Error{Error: apierr.Detail(err)}, Message: err.Error(), Replayed: replayed}
}

// streamCall is one message of a stream made ready to run: the call that
// asks the Service, its reply wrapped in a SessionReply.
type streamCall struct {
	op  string // the metrics label: the op's field name
	run call[fencev1.SessionReply]
	// acquire is the lock's name when the op is an acquire (its wait may
	// outlive the handler's bound: see do).
	acquire *string
}

// call validates m and binds it to the stream's session (a SessionRef
// inside the op is ignored). A message's own session, when set, must be
// the stream's.
func (ss *sessionStream) call(m *fencev1.SessionRequest) (streamCall, error) {
	s := ss.s
	b := binding{session: ss.session, seq: m.GetSeq(), ack: m.GetAck()}
	berr := checkBinding(b, "session", "ack")
	if m.GetSession() != 0 && m.GetSession() != ss.session {
		berr = fence.Invalid("session", fmt.Sprintf("0 or the stream's session (%d)", ss.session), fmt.Sprint(m.GetSession()))
	}
	var (
		c   streamCall
		err error
	)
	switch op := m.GetOp().(type) {
	case *fencev1.SessionRequest_KeepAlive:
		do, e := s.keepAliveCall(op.KeepAlive, b)
		c, err = wrapCall("keep_alive", do, func(r *fencev1.KeepAliveResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_KeepAlive{KeepAlive: r}}
		}), e
	case *fencev1.SessionRequest_Acquire:
		do, e := s.acquireCall(op.Acquire, b)
		c, err = wrapCall("acquire", do, func(r *fencev1.AcquireResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Acquire{Acquire: r}}
		}), e
		name := op.Acquire.GetName()
		c.acquire = &name
	case *fencev1.SessionRequest_Renew:
		do, e := s.renewCall(op.Renew, b)
		c, err = wrapCall("renew", do, func(r *fencev1.RenewResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Renew{Renew: r}}
		}), e
	case *fencev1.SessionRequest_Release:
		do, e := s.releaseCall(op.Release, b)
		c, err = wrapCall("release", do, func(r *fencev1.ReleaseResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Release{Release: r}}
		}), e
	case *fencev1.SessionRequest_Write:
		do, e := s.writeCall(op.Write, b)
		c, err = wrapCall("write", do, func(r *fencev1.WriteResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Write{Write: r}}
		}), e
	case *fencev1.SessionRequest_Add:
		do, e := s.addCall(op.Add, b)
		c, err = wrapCall("add", do, func(r *fencev1.AddResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Add{Add: r}}
		}), e
	case *fencev1.SessionRequest_Delete:
		do, e := s.deleteCall(op.Delete, b)
		c, err = wrapCall("delete", do, func(r *fencev1.DeleteResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Delete{Delete: r}}
		}), e
	case *fencev1.SessionRequest_Close:
		do, e := s.closeCall(b)
		c, err = wrapCall("close", do, func(r *fencev1.CloseSessionResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Close{Close: r}}
		}), e
	case *fencev1.SessionRequest_Read:
		// Reads are linearizable and propose nothing; seq and ack mean
		// nothing to them (nor does a bad one).
		do, e := s.readCall(op.Read.GetResource())
		return wrapCall("read", do, func(r *fencev1.ReadResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Read{Read: r}}
		}), e
	case *fencev1.SessionRequest_Get:
		do, e := s.getCall(op.Get.GetName())
		return wrapCall("get", do, func(r *fencev1.GetResponse) *fencev1.SessionReply {
			return &fencev1.SessionReply{Result: &fencev1.SessionReply_Get{Get: r}}
		}), e
	default:
		return streamCall{op: "none"}, fence.Invalid("op", "one of keep_alive, acquire, renew, release, write, add, delete, read, get, close", "")
	}
	return c, firstErr(err, berr)
}

// wrapCall is the streamCall that runs do and wraps its reply in a
// SessionReply (do is nil when the message was refused: nothing runs).
func wrapCall[Res any](op string, do call[Res], wrap func(*Res) *fencev1.SessionReply) streamCall {
	c := streamCall{op: op}
	if do != nil {
		c.run = func(ctx context.Context) (*fencev1.SessionReply, bool, error) {
			out, replayed, err := do(ctx)
			if err != nil {
				return nil, replayed, err
			}
			return wrap(out), replayed, nil
		}
	}
	return c
}

// credentialsRecheck is how often an open stream's credentials are judged
// again (watchCredentials).
const credentialsRecheck = time.Second

// watchCredentials ends the stream once its credentials no longer hold
// (the token revoked or expired, the certificate's role unbound): every
// message is judged anew, but a stream that sends nothing kept its slots
// of --max-streams and of its principal's quota (an outside test revoked a
// token whose two idle streams went on holding them).
func (ss *sessionStream) watchCredentials() {
	t := time.NewTicker(credentialsRecheck)
	defer t.Stop()
	for {
		select {
		case <-ss.ctx.Done():
			return
		case <-t.C:
			if _, err := ss.s.identify(ss.ctx, true); err != nil && !errors.Is(err, fence.ErrUnavailable) {
				ss.end(ss.s.connectError(ss.ctx, streamProc, err))
				return
			}
		}
	}
}
