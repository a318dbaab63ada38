package client_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// tap is an http.RoundTripper (HTTP/2, cleartext for http://, as the
// session's stream needs) for client.WithHTTPClient that sees every
// message the client sends and can hold back or drop chosen replies, at
// the message level:
//
//   - On the session's stream (SessionService/Stream, Connect protocol) it
//     decodes every SessionRequest as the transport takes it from the
//     client, notes when (seen: a reading of the test's clock taken after
//     the client sent it, and before the server can have it), and asks
//     streamRule what to do with its reply. A held reply is delivered when
//     its gate closes, after the replies that passed meanwhile (replies
//     out of order); a dropped one never is.
//   - For a unary call it notes when the request was seen, forwards it,
//     reads the whole reply (the server has answered), and asks unaryRule
//     for a gate to wait on before the client gets the reply.
//
// Every change (a request seen, a reply held, passed, dropped, released)
// wakes waiters of wait, so tests wait on these events, not on sleeps.
type tap struct {
	rt   http.RoundTripper
	stop chan struct{} // closed at cleanup: every held reply is let go

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every event
	streams int
	reqs    []tapReq
	replies []tapReply
	unary   []tapUnary
	// streamRule decides, when a stream request is seen, what happens to
	// its reply (nil: it passes); unaryRule gives the gate a unary reply
	// waits for (nil: none). Both run under mu.
	streamRule func(r *tapReq) replyAction
	unaryRule  func(u *tapUnary) <-chan struct{}
}

// replyAction is what happens to the reply of a stream request.
type replyAction struct {
	gate <-chan struct{} // non-nil: held until it closes
	drop bool            // thrown away
}

// tapReq is one SessionRequest the client sent.
type tapReq struct {
	stream int // 1, 2, ...: the stream it went on
	n      int // its index in tap.reqs
	msg    *fencev1.SessionRequest
	seen   time.Time
}

// tapReply is one SessionReply the server sent.
type tapReply struct {
	stream    int
	msg       *fencev1.SessionReply
	at        time.Time // when the tap read it from the server
	held      bool
	dropped   bool
	delivered time.Time // when it was handed to the client (zero: not yet)
}

// tapUnary is one unary call.
type tapUnary struct {
	method   string
	n        int       // 1, 2, ...: its number among calls of method
	seen     time.Time // when the tap got the request, before forwarding it
	answered time.Time // when the tap had the server's whole reply
	released time.Time // when the tap handed it to the client
}

func newTap(t *testing.T) *tap {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var ps http.Protocols
	ps.SetHTTP2(true)
	ps.SetUnencryptedHTTP2(true)
	tr.Protocols = &ps
	tp := &tap{rt: tr, stop: make(chan struct{}), changed: make(chan struct{})}
	t.Cleanup(func() { close(tp.stop); tr.CloseIdleConnections() })
	return tp
}

func (tp *tap) client() *http.Client { return &http.Client{Transport: tp} }

// notifyLocked wakes the waiters (tp.mu held).
func (tp *tap) notifyLocked() {
	close(tp.changed)
	tp.changed = make(chan struct{})
}

// wait waits until cond is true, failing the test if ctx ends first.
// cond runs without the tap's lock (it may call the tap's readers); it is
// checked again after every event.
func (tp *tap) wait(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for {
		tp.mu.Lock()
		ch := tp.changed
		tp.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

func (tp *tap) setStreamRule(f func(r *tapReq) replyAction) {
	tp.mu.Lock()
	tp.streamRule = f
	tp.mu.Unlock()
}

func (tp *tap) setUnaryRule(f func(u *tapUnary) <-chan struct{}) {
	tp.mu.Lock()
	tp.unaryRule = f
	tp.mu.Unlock()
}

// findReq returns the first stream request that cond picks (run under the
// tap's lock), or nil.
func (tp *tap) findReq(cond func(r *tapReq) bool) *tapReq {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i := range tp.reqs {
		if cond(&tp.reqs[i]) {
			r := tp.reqs[i]
			return &r
		}
	}
	return nil
}

// replyTo returns the reply to request r, if the tap has read it.
func (tp *tap) replyToLocked(r *tapReq) *tapReply {
	for i := range tp.replies {
		if p := &tp.replies[i]; p.stream == r.stream && p.msg.GetCall() == r.msg.GetCall() {
			return p
		}
	}
	return nil
}

func (tp *tap) replyTo(r *tapReq) (tapReply, bool) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if p := tp.replyToLocked(r); p != nil {
		return *p, true
	}
	return tapReply{}, false
}

func (tp *tap) unaryCall(method string, n int) (tapUnary, bool) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, u := range tp.unary {
		if u.method == method && u.n == n {
			return u, true
		}
	}
	return tapUnary{}, false
}

func (tp *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
	if strings.HasSuffix(req.URL.Path, "/fence.v1.SessionService/Stream") {
		return tp.roundTripStream(req)
	}
	return tp.roundTripUnary(req, method)
}

func (tp *tap) roundTripUnary(req *http.Request, method string) (*http.Response, error) {
	tp.mu.Lock()
	n := 1
	for _, u := range tp.unary {
		if u.method == method {
			n++
		}
	}
	tp.unary = append(tp.unary, tapUnary{method: method, n: n, seen: time.Now()})
	idx := len(tp.unary) - 1
	tp.notifyLocked()
	tp.mu.Unlock()

	resp, err := tp.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))

	tp.mu.Lock()
	tp.unary[idx].answered = time.Now()
	var gate <-chan struct{}
	if tp.unaryRule != nil {
		u := tp.unary[idx]
		gate = tp.unaryRule(&u)
	}
	tp.notifyLocked()
	tp.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-tp.stop:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	tp.mu.Lock()
	tp.unary[idx].released = time.Now()
	tp.notifyLocked()
	tp.mu.Unlock()
	return resp, nil
}

func (tp *tap) roundTripStream(req *http.Request) (*http.Response, error) {
	tp.mu.Lock()
	tp.streams++
	st := &tapStream{tp: tp, id: tp.streams, actions: map[uint64]replyAction{}}
	tp.notifyLocked()
	tp.mu.Unlock()
	out := req.Clone(req.Context())
	out.Body = &tapReqBody{src: req.Body, st: st}
	resp, err := tp.rt.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	body := &tapRespBody{src: resp.Body, st: st, closed: make(chan struct{})}
	body.cond = sync.NewCond(&body.mu)
	go body.pump()
	resp.Body = body
	return resp, nil
}

// tapStream is one stream through the tap.
type tapStream struct {
	tp      *tap
	id      int
	actions map[uint64]replyAction // by call, decided when the request was seen
}

// tapReqBody is the request side of a stream: it passes the client's bytes
// on unchanged and decodes each message as its last byte goes by.
type tapReqBody struct {
	src io.ReadCloser
	st  *tapStream
	buf []byte
}

func (b *tapReqBody) Read(p []byte) (int, error) {
	n, err := b.src.Read(p)
	if n > 0 {
		b.buf = append(b.buf, p[:n]...)
		for {
			flags, payload, rest, ok := envelope(b.buf)
			if !ok {
				break
			}
			b.buf = rest
			if flags&2 != 0 {
				continue // end of stream
			}
			msg := &fencev1.SessionRequest{}
			if err := decodeEnvelope(flags, payload, msg); err != nil {
				panic(fmt.Sprintf("tap: a stream request it cannot decode: %v", err))
			}
			b.st.seenRequest(msg)
		}
	}
	return n, err
}

func (b *tapReqBody) Close() error { return b.src.Close() }

func (st *tapStream) seenRequest(msg *fencev1.SessionRequest) {
	tp := st.tp
	tp.mu.Lock()
	defer tp.mu.Unlock()
	r := tapReq{stream: st.id, n: len(tp.reqs), msg: msg, seen: time.Now()}
	tp.reqs = append(tp.reqs, r)
	if tp.streamRule != nil {
		if a := tp.streamRule(&r); a.gate != nil || a.drop {
			st.actions[msg.GetCall()] = a
		}
	}
	tp.notifyLocked()
}

// tapRespBody is the reply side of a stream: pump reads the server's
// messages and appends each to buf at once, when its gate closes, or
// never; Read serves buf.
type tapRespBody struct {
	src io.ReadCloser
	st  *tapStream

	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	err    error
	closed chan struct{}
	isDone bool
}

func (b *tapRespBody) pump() {
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(b.src, hdr); err != nil {
			b.fail(err)
			return
		}
		raw := make([]byte, 5+binary.BigEndian.Uint32(hdr[1:]))
		copy(raw, hdr)
		if _, err := io.ReadFull(b.src, raw[5:]); err != nil {
			b.fail(err)
			return
		}
		if hdr[0]&2 != 0 { // end of stream: in order, after what passed
			b.deliver(raw)
			continue
		}
		msg := &fencev1.SessionReply{}
		if err := decodeEnvelope(hdr[0], raw[5:], msg); err != nil {
			b.fail(fmt.Errorf("tap: a stream reply it cannot decode: %w", err))
			return
		}
		tp := b.st.tp
		tp.mu.Lock()
		a := b.st.actions[msg.GetCall()]
		delete(b.st.actions, msg.GetCall())
		tp.replies = append(tp.replies, tapReply{stream: b.st.id, msg: msg, at: time.Now(), held: a.gate != nil, dropped: a.drop})
		idx := len(tp.replies) - 1
		tp.notifyLocked()
		tp.mu.Unlock()
		switch {
		case a.drop:
		case a.gate != nil:
			go func() {
				select {
				case <-a.gate:
				case <-b.closed:
					return
				case <-tp.stop:
				}
				b.deliver(raw)
				tp.delivered(idx)
			}()
		default:
			b.deliver(raw)
			tp.delivered(idx)
		}
	}
}

func (tp *tap) delivered(idx int) {
	tp.mu.Lock()
	tp.replies[idx].delivered = time.Now()
	tp.notifyLocked()
	tp.mu.Unlock()
}

func (b *tapRespBody) deliver(raw []byte) {
	b.mu.Lock()
	b.buf = append(b.buf, raw...)
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *tapRespBody) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *tapRespBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 && b.err == nil && !b.isDone {
		b.cond.Wait()
	}
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	if b.isDone {
		return 0, io.ErrClosedPipe
	}
	return 0, b.err
}

func (b *tapRespBody) Close() error {
	b.mu.Lock()
	if !b.isDone {
		b.isDone = true
		close(b.closed)
	}
	b.cond.Broadcast()
	b.mu.Unlock()
	return b.src.Close()
}

// envelope splits the first Connect envelope (flags, 4-byte big-endian
// length, payload) off buf, if buf holds all of it.
func envelope(buf []byte) (flags byte, payload, rest []byte, ok bool) {
	if len(buf) < 5 {
		return 0, nil, buf, false
	}
	n := int(binary.BigEndian.Uint32(buf[1:5]))
	if len(buf) < 5+n {
		return 0, nil, buf, false
	}
	return buf[0], buf[5 : 5+n], buf[5+n:], true
}

// decodeEnvelope unmarshals a Connect message (flag 1: gzip-compressed).
func decodeEnvelope(flags byte, payload []byte, msg proto.Message) error {
	if flags&1 != 0 {
		zr, err := gzip.NewReader(bytes.NewReader(payload))
		if err != nil {
			return err
		}
		if payload, err = io.ReadAll(zr); err != nil {
			return err
		}
	}
	return proto.Unmarshal(payload, msg)
}
