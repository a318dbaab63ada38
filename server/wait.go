package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A waiting acquire's handler is bounded on the server, whatever the client
// sent: no handler is left waiting forever, and none answers after its
// client has given up and retried.
const (
	// replyMargin is kept between the end of a wait and the client's own
	// deadline (Connect-Timeout-Ms, grpc-timeout): the proposal commits,
	// the machine ends the wait and the answer (the grant or BUSY) travels
	// back within it. A client whose deadline leaves no more than this
	// gets a try instead of a wait.
	replyMargin = time.Second
	// handlerMargin is how much longer than its wait a waiting handler may
	// run: the machine ends a wait by itself at its deadline; past this the
	// handler gives up (its wait is withdrawn like any abandoned one).
	handlerMargin = 5 * time.Second
)

// boundWait returns the context to apply in, the wait to propose, and the
// context's cancel. A wait longer than the client's deadline allows (its
// budget less replyMargin) is shortened, so the client hears the grant or
// BUSY (waited) before it gives up instead of a grant it never sees. The
// context ends handlerMargin after the wait even when the client set no
// deadline.
//
// A client deadline that leaves replyMargin or less (Connect-Timeout-Ms:
// 100) makes the acquire a try: granted at once or BUSY. The try is applied
// in a context without the client's deadline (bounded by handlerMargin), so
// the client hears the machine's answer, never a bare deadline_exceeded
// because the commit took longer than its budget on a loaded machine.
func boundWait(ctx context.Context, wait time.Duration) (context.Context, time.Duration, context.CancelFunc) {
	if ctx.Value(tryKey{}) != nil {
		// The client's deadline left no more than replyMargin (takeTry).
		ctx, cancel := context.WithTimeout(ctx, handlerMargin)
		return ctx, 0, cancel
	}
	if dl, ok := ctx.Deadline(); ok {
		budget := time.Until(dl)
		if budget <= replyMargin {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handlerMargin)
			return ctx, 0, cancel
		}
		wait = min(wait, budget-replyMargin)
	}
	ctx, cancel := context.WithTimeout(ctx, wait+handlerMargin)
	return ctx, wait, cancel
}

type tryKey struct{}

// takeTry makes an acquire whose client deadline leaves no more than
// replyMargin a try before Connect sees the deadline: the deadline header
// is taken off the request and its context marked (boundWait reads the
// mark). Connect checks the deadline once more before it calls the
// handler, and on a loaded machine a deadline of 1ms has often passed by
// then: the client got deadline_exceeded instead of the machine's answer.
// A deadline already past (grpc-timeout 0n) and a malformed header are
// left to Connect and to timeoutError.
func takeTry(r *http.Request) *http.Request {
	h := r.Header
	key, d := "Connect-Timeout-Ms", time.Duration(0)
	if strings.HasPrefix(h.Get("Content-Type"), "application/grpc") {
		key = "Grpc-Timeout"
		if v := h.Get(key); validGRPCTimeout(v) {
			d = grpcTimeout(v)
		}
	} else if v := h.Get(key); validConnectTimeout(v) {
		ms, _ := strconv.ParseInt(v, 10, 64)
		d = time.Duration(ms) * time.Millisecond
	}
	if d <= 0 || d > replyMargin {
		return r
	}
	h.Del(key)
	return r.WithContext(context.WithValue(r.Context(), tryKey{}, true))
}

// grpcTimeout is the duration of a valid grpc-timeout value, capped at
// an hour (only small ones matter here).
func grpcTimeout(v string) time.Duration {
	n, _ := strconv.ParseInt(v[:len(v)-1], 10, 64)
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[v[len(v)-1]]
	if n > int64(time.Hour/unit) {
		return time.Hour
	}
	return time.Duration(n) * unit
}
