package httpguard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// DefaultMaxBuffer is Options.MaxBuffer when it is 0: the largest response
// body the middleware holds back until the commit.
const DefaultMaxBuffer = 1 << 20

// ErrResponseTooLarge is what the recorder's Write returns once a handler's
// response body exceeds Options.MaxBuffer. The middleware then rolls back
// and answers 500.
var ErrResponseTooLarge = errors.New("httpguard: response body larger than Options.MaxBuffer")

// ErrHijackNotSupported: a fenced handler cannot take over the connection;
// its answer must wait for the commit.
var ErrHijackNotSupported = errors.New("httpguard: a fenced handler cannot hijack the connection")

// recorder buffers a handler's response until the guard transaction ends.
//
//   - 1xx informational answers (103 Early Hints, ...) are not final: they
//     go to the client at once, with the headers set so far, and the
//     handler's next status is the final one. They say nothing about the
//     write. 101 Switching Protocols counts as final (and non-2xx).
//   - The body is held, at most max bytes. A Write beyond that fails with
//     ErrResponseTooLarge and marks the response overflowed.
//   - Flush is a no-op: held output is sent after the commit, never before
//     (an uncommitted write must not look successful to the client).
//   - Hijack fails (ErrHijackNotSupported); Unwrap returns the underlying
//     writer so that http.ResponseController can set deadlines.
type recorder struct {
	w          http.ResponseWriter
	header     http.Header
	status     int
	wrote      bool
	body       bytes.Buffer
	max        int
	overflowed bool
}

func newRecorder(w http.ResponseWriter, max int) *recorder {
	return &recorder{w: w, header: make(http.Header), status: http.StatusOK, max: max}
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.wrote {
		return
	}
	if status >= 100 && status <= 199 && status != http.StatusSwitchingProtocols {
		r.interim(status)
		return
	}
	r.wrote = true
	r.status = status
}

// interim sends a 1xx answer with the headers set so far, leaving the
// underlying writer's header map as it was.
func (r *recorder) interim(status int) {
	h := r.w.Header()
	saved := h.Clone()
	for k, v := range r.header {
		h[k] = v
	}
	r.w.WriteHeader(status)
	for k := range h {
		delete(h, k)
	}
	for k, v := range saved {
		h[k] = v
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.overflowed || r.body.Len()+len(p) > r.max {
		r.overflowed = true
		return 0, fmt.Errorf("%w (%d bytes)", ErrResponseTooLarge, r.max)
	}
	return r.body.Write(p)
}

// Flush does nothing: see recorder.
func (r *recorder) Flush() {}

// Hijack refuses: see recorder.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, ErrHijackNotSupported
}

// Unwrap returns the underlying writer, for http.ResponseController.
// Writing to it directly bypasses the guard and sends uncommitted output.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// sendTo writes the buffered response to w.
func (r *recorder) sendTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
