package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// A watch (LockService.Watch, and GET /v1/watch as Server-Sent Events)
// follows one lock or the locks under a prefix on this node's applied
// state (Deps.Watches): the state first, then every change in log order.
// It needs read permission on the name or the whole prefix (as List: a
// principal whose permission covers only part of the prefix is refused,
// naming the prefix). Watches have a budget of their own: at most
// Config.MaxWatches are open (--max-watches) and, with authentication on,
// Config.MaxWatchesPerPrincipal of one principal
// (--max-watches-per-principal); one more is refused RESOURCE_EXHAUSTED
// (HTTP 429) naming the bound, and counted
// (fence_watches_refused_total{limit}). They take no slot of the session
// streams' --max-streams, and a watch on HTTP/1.1 (SSE, Connect or
// gRPC-Web streaming: its connection carries nothing else while it lasts)
// gives its connection's slot of --max-conns and of
// --max-conns-per-principal back while it is open, with a kernel send
// buffer of watchSendBuffer; the connection is closed when the watch
// ends. So idle watches cannot lock other clients out, nor make the
// server encode megabytes each. The credentials are judged again every second (a
// revoked token's watch ends UNAUTHENTICATED).
//
// A watch is cut (fence_watch_cut_total{reason}) when it falls behind the
// node's ring of recent changes ("behind": RESOURCE_EXHAUSTED, limit
// watch_history; the client resumes from its last position and gets the
// state if the history is gone), or when one of its events is not
// written within Config.WriteTimeout ("send": its reader stopped reading;
// the stream is reset), or when its state is not written within
// Config.WriteTimeout plus watchStatePage a page ("state"). None ever
// holds up an apply.

const (
	// DefaultMaxWatches is the default of Config.MaxWatches
	// (--max-watches): the open watches of every client together. A
	// watch holds at most one page of its state (256 locks) and its
	// connection's buffers.
	DefaultMaxWatches = 4096
	// DefaultMaxWatchesPerPrincipal is `fence serve`'s default of
	// Config.MaxWatchesPerPrincipal: a quarter of DefaultMaxWatches, so
	// one principal cannot take every watch from the others.
	DefaultMaxWatchesPerPrincipal = DefaultMaxWatches / 4

	watchProc = fencev1connect.LockServiceWatchProcedure
	// watchHistoryLimit names the cut of a watch the ring moved past.
	watchHistoryLimit = "recent changes a watch may lag (config.watch_history)"
	// sseHeartbeat: an SSE watch with nothing to send writes a comment
	// this often, so proxies keep it open.
	sseHeartbeat = 15 * time.Second
)

// validateWatch checks a watch request.
func validateWatch(m *fencev1.WatchRequest) error {
	switch {
	case m.GetName() != "" && m.GetPrefix() != "":
		return fence.Invalid("name", "name or prefix, not both", m.GetName())
	case m.GetName() != "":
		return fence.ValidateName("name", m.GetName())
	case len(m.GetPrefix()) > fence.MaxNameBytes:
		return fence.Invalid("prefix", fmt.Sprintf("at most %d bytes", fence.MaxNameBytes), fmt.Sprintf("(%d bytes)", len(m.GetPrefix())))
	case !utf8.ValidString(m.GetPrefix()):
		return fence.Invalid("prefix", "valid UTF-8", "")
	case len(m.GetAfter()) > 64:
		return fence.Invalid("after", "a position a watch event gave: INDEX or INDEX.CMD.CHANGE (decimal)", fmt.Sprintf("(%d bytes)", len(m.GetAfter())))
	}
	return nil
}

// watchSession is one watch being served: its caller and its slots.
type watchSession struct {
	s       *Server
	ctx     context.Context // ends when the credentials no longer hold
	cancel  context.CancelCauseFunc
	ws      WatchStream
	id      identity // the caller (trusted with checking off)
	target  string   // the name or prefix watched (its read permission is judged again every second)
	release func()
	// Of the events the last next returned: what the watches of each
	// share (nil: its own), and whether it was redacted for this caller.
	shares   []EventShare
	redacted []bool
}

// startWatch judges and starts a watch: its permission, its slots, the
// node's watch. The caller serves it and calls end.
func (s *Server) startWatch(ctx context.Context, m *fencev1.WatchRequest) (*watchSession, error) {
	if s.deps.Watches == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server has no watches"))
	}
	if err := validateWatch(m); err != nil {
		return nil, err
	}
	target := m.GetName()
	if target == "" {
		target = m.GetPrefix()
	}
	id := identity{trusted: true}
	var principal string
	if s.deps.Auth != nil && s.deps.Auth.AuthEnabled() {
		actx, err := s.authorize(ctx, "Watch", state.PermRead, target)
		if err != nil {
			return nil, err
		}
		ctx = actx
		id, _ = ctx.Value(identityKey{}).(identity)
		principal = id.Name
	}
	release, err := s.principalWatches.take(principal, s.cfg.MaxWatchesPerPrincipal, "open watches", "max_watches_per_principal")
	if err != nil {
		s.metrics.watchRefusals.WithLabelValues("max_watches_per_principal").Inc()
		return nil, err
	}
	if n := s.watches.Add(1); n > int64(s.cfg.MaxWatches) {
		s.watches.Add(-1)
		release()
		s.metrics.watchRefusals.WithLabelValues("max_watches").Inc()
		return nil, &fence.ResourceExhaustedError{Limit: "open watches (config.max_watches)", Bound: fmt.Sprintf("at most %d", s.cfg.MaxWatches), Got: fmt.Sprint(n - 1)}
	}
	w := &watchSession{s: s, id: id, target: target}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	w.release = func() {
		w.cancel(nil)
		s.watches.Add(-1)
		release()
	}
	ws, err := s.deps.Watches(w.ctx, m)
	if err != nil {
		w.release()
		return nil, err
	}
	w.ws = ws
	if principal != "" {
		go w.watchCredentials()
	}
	return w, nil
}

func (w *watchSession) end() {
	w.ws.Close()
	w.release()
}

// watchCredentials ends the watch once its credentials no longer hold (as
// a session stream's, stream.go).
func (w *watchSession) watchCredentials() {
	t := time.NewTicker(credentialsRecheck)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
			id, err := w.s.identify(w.ctx, true)
			if err != nil && !errors.Is(err, fence.ErrUnavailable) {
				w.cancel(err)
				return
			}
			// The read permission too: a role's read revoked ends the
			// watch as a revoked token does (an outside test still got
			// grants 13 s after `fence role revoke ... read:`).
			if err == nil && !id.trusted && !id.Admin && !allows(id.perms, state.PermRead, w.target) {
				w.cancel(&fence.PermissionDeniedError{Principal: id.Name, What: state.PermRead.String(), Name: w.target})
				return
			}
		}
	}
}

// next returns the watch's next events, shown as the caller may see them;
// an error ends the watch (a cut is counted).
func (w *watchSession) next(ctx context.Context) ([]*fencev1.WatchEvent, error) {
	evs, err := w.ws.Next(ctx)
	sw, _ := w.ws.(SharedWatchStream)
	w.shares, w.redacted = w.shares[:0], w.redacted[:0]
	for i, e := range evs {
		var share EventShare
		if sw != nil {
			share = sw.Shared(i)
		}
		w.shares = append(w.shares, share)
		w.redacted = append(w.redacted, w.redact(e))
	}
	if err != nil && is(err, w.s.deps.Errors.WatchBehind) {
		w.s.metrics.watchCuts.WithLabelValues("behind").Inc()
		return evs, &fence.ResourceExhaustedError{Limit: watchHistoryLimit, Bound: "the node's --watch-history",
			Got: "the watch read more slowly than the changes came: resume after the last position received"}
	}
	if err != nil {
		if cause := context.Cause(w.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return evs, cause // the credentials no longer hold
		}
	}
	return evs, err
}

// redact blanks what only the lease's or waiter's own principal (or an
// admin) may see of a change: its request_id (a retry with it is answered
// with the saved lease) and its session id.
// It reports whether it did (the event's shared encodings then are the
// redacted ones).
func (w *watchSession) redact(e *fencev1.WatchEvent) bool {
	c := e.GetChange()
	if c == nil || w.id.trusted || w.id.Admin || (w.id.Name != "" && w.id.Name == c.GetPrincipal()) {
		return false
	}
	c.RequestId = ""
	c.Session = 0
	return true
}

// A watch form is one way an event is written, a slot pair of the
// change's EventShare (its redacted encoding in the second).
const (
	formSSE         = iota // the SSE data: encodeJSON of the event
	formConnectJSON        // a stream's JSON message (strictJSONCodec)
	formProto              // a stream's binary protobuf (sharedProtoCodec)
)

// encoded returns the i-th event of the last next in form f, made by enc
// once for every watch the change goes to: the first watch that needs it
// stores it in the change's share, redacted or not as it was shown to
// its caller, and the others write those bytes (docs/design.md, "Watch").
// Shares are per change, never per batch: each watch's batch is only the
// changes it may see.
func (w *watchSession) encoded(i, f int, e *fencev1.WatchEvent, enc func(proto.Message) []byte) []byte {
	var share EventShare
	if i < len(w.shares) {
		share = w.shares[i]
	}
	if share == nil {
		return enc(e)
	}
	slot := 2 * f
	if w.redacted[i] {
		slot++
	}
	if b := share.Load(slot); b != nil {
		return b
	}
	b := enc(e)
	share.Store(slot, b)
	return b
}

// watchStatePage is the time a watch's state may take per page sent, on
// top of the write timeout: the whole state (every page) must be written
// within WriteTimeout + pages × watchStatePage of its first page (a
// reader slower than about 256 locks a second on average is cut, reason
// "state"), so a client that keeps a write trickling cannot hold a
// watch in its state for ever.
var watchStatePage = time.Second

// watchDeadline gives the deadline of each write of a watch: WriteTimeout
// from the write's start and, while a state is being written, the state's
// own bound (watchStatePage).
type watchDeadline struct {
	timeout time.Duration
	inState bool      // a state's pages are being written
	start   time.Time // its first page's
	pages   int       // its pages written or being written
}

// before notes the events about to be written and returns the deadline
// of their write, and whether it is the state's bound.
func (d *watchDeadline) before(evs []*fencev1.WatchEvent) (time.Time, bool) {
	now := time.Now()
	for _, e := range evs {
		if st := e.GetState(); st != nil {
			if st.GetPage() == 0 || !d.inState {
				d.inState, d.start, d.pages = true, now, 0
			}
			d.pages++
		}
	}
	at := now.Add(d.timeout)
	if d.inState {
		if sa := d.start.Add(d.timeout + time.Duration(d.pages)*watchStatePage); sa.Before(at) {
			return sa, true
		}
	}
	return at, false
}

// after notes the events written: a state's last page ends its bound.
func (d *watchDeadline) after(evs []*fencev1.WatchEvent) {
	for _, e := range evs {
		if st := e.GetState(); st != nil && !st.GetMore() {
			d.inState = false
		}
	}
}

// sendFailed counts a watch cut because an event begun at start could not
// be written by its deadline at (err is the deadline's, or the write took
// that long): reason "state" when the deadline was the state's bound,
// else "send"; another failure is the client going away.
func (s *Server) sendFailed(start, at time.Time, ofState bool, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(at) || time.Since(start) >= s.cfg.WriteTimeout {
		reason := "send"
		if ofState {
			reason = "state"
		}
		s.metrics.watchCuts.WithLabelValues(reason).Inc()
	}
}

// Watch serves LockService.Watch.
func (h lockService) Watch(ctx context.Context, req *connect.Request[fencev1.WatchRequest], st *connect.ServerStream[fencev1.WatchEvent]) error {
	s := h.s
	conn := streamConnOf(ctx)
	w, err := s.startWatch(ctx, req.Msg)
	if err != nil {
		return s.connectError(ctx, watchProc, err)
	}
	defer w.end()
	conn.noReadDeadline()
	conn.watchHoldsConn(ctx)
	dl := &watchDeadline{timeout: s.cfg.WriteTimeout}
	for {
		evs, err := w.next(w.ctx)
		for i, e := range evs {
			start := time.Now()
			one := []*fencev1.WatchEvent{e}
			at, ofState := dl.before(one)
			conn.writeBy(at)
			// The codec writes the encoding the watches of the change
			// share (codec.go, sharedWatchEvent).
			if serr := st.Conn().Send(&sharedWatchEvent{w: w, i: i, msg: e}); serr != nil {
				s.sendFailed(start, at, ofState, serr)
				return connect.NewError(connect.CodeCanceled, serr)
			}
			conn.writeWithin(0)
			dl.after(one)
		}
		if err != nil {
			return s.connectError(ctx, watchProc, err)
		}
	}
}

// isWatchPath: the paths of a watch, which live as long as their client
// keeps them (limitWrites gives them a write deadline per event).
func isWatchPath(p string) bool { return p == watchProc || p == "/v1/watch" }

// sseWatch serves GET /v1/watch?prefix=P (or name=N; after=POS) as
// Server-Sent Events: an event "state" with the state, then one event
// "change" per change, each with id: its position (a browser's
// EventSource resumes after the last one by itself, sending it as
// Last-Event-ID), data: the event as the JSON contract writes a
// WatchEvent. A comment every sseHeartbeat keeps proxies from closing it.
// A refusal before the stream starts is the JSON error body of a unary
// call, with its HTTP status; an end of the stream after it started is an
// event "error" whose data is that body.
func (s *Server) sseWatch(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m := &fencev1.WatchRequest{Prefix: q.Get("prefix"), Name: q.Get("name"), After: q.Get("after")}
	if m.After == "" {
		m.After = strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	}
	for k := range q {
		if k != "prefix" && k != "name" && k != "after" {
			refuse(rw, r, apierr.ToConnect(fence.Invalid(k, "prefix, name or after: no other query parameter", "")))
			return
		}
	}
	ctx := r.Context()
	w, err := s.startWatch(ctx, m)
	if err != nil {
		var ce *connect.Error
		if errors.As(s.connectError(ctx, "/v1/watch", err), &ce) {
			refuse(rw, r, ce)
		}
		return
	}
	defer w.end()
	conn := streamConnOf(ctx)
	conn.noReadDeadline()
	h := rw.Header()
	// On HTTP/1.1 the connection carries only this watch while it lasts:
	// its slot of --max-conns goes back (the watch holds one of
	// --max-watches instead), and it is closed when the watch ends.
	conn.watchHoldsConn(ctx)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	rw.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(rw)
	dl := &watchDeadline{timeout: s.cfg.WriteTimeout}
	write := func(b []byte, evs []*fencev1.WatchEvent) bool {
		start := time.Now()
		at, ofState := dl.before(evs)
		conn.writeBy(at)
		_, err := rw.Write(b)
		if err == nil {
			err = rc.Flush()
		}
		conn.writeWithin(0)
		if err != nil {
			s.sendFailed(start, at, ofState, err)
			return false
		}
		dl.after(evs)
		return true
	}
	if !write([]byte(": fence watch\n\n"), nil) {
		return
	}
	// paging: the pages of a state are being sent; they (but the last)
	// and the changes between them carry no id, so that a browser
	// reconnecting meanwhile resumes from the last whole point, not from
	// the middle of a state (docs/api.md, "Watch").
	paging := false
	for {
		hctx, cancel := context.WithTimeout(w.ctx, sseHeartbeat)
		evs, err := w.next(hctx)
		cancel()
		var b []byte
		for i, e := range evs {
			kind := "change"
			if st := e.GetState(); st != nil {
				kind = "state"
				paging = st.GetMore()
			}
			data := w.encoded(i, formSSE, e, encodeJSON)
			if paging {
				b = fmt.Appendf(b, "event: %s\ndata: %s\n\n", kind, data)
			} else {
				b = fmt.Appendf(b, "id: %s\nevent: %s\ndata: %s\n\n", e.GetPosition(), kind, data)
			}
		}
		if len(b) > 0 && !write(b, evs) {
			return
		}
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) && w.ctx.Err() == nil:
			if !write([]byte(": heartbeat\n\n"), nil) {
				return
			}
		default:
			if w.ctx.Err() != nil && context.Cause(w.ctx) == nil || r.Context().Err() != nil {
				return // the client went away
			}
			var ce *connect.Error
			if !errors.As(s.connectError(ctx, "/v1/watch", err), &ce) {
				return
			}
			body, _ := jsonErrorBody(ce)
			write(fmt.Appendf(nil, "event: error\ndata: %s\n\n", body), nil)
			return
		}
	}
}
