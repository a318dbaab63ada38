package server

import (
	"context"
	"net/http"
	"time"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A reply must be written within Config.WriteTimeout of when it is ready:
// a client that stops reading (its socket buffers fill, or its HTTP/2
// window stays shut) would otherwise hold its connection slot and a
// handler forever, and enough of them would keep every slot of MaxConns.
// http.Server.WriteTimeout cannot do this: it counts from the request, so
// it would cut a blocking acquire's reply after a long wait. So the
// deadline is set per request: at its start for every call but Acquire,
// and for Acquire when its outcome is known (replyReady), after the wait.
// Over HTTP/1.1 a missed deadline closes the connection; over HTTP/2 it
// resets the stream.
func limitWrites(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if isWatchPath(r.URL.Path) {
			// A watch lives as long as its client keeps it: each of its
			// events must be written within timeout (watch.go).
			_ = rc.SetWriteDeadline(time.Time{})
			c := &streamConn{rc: rc, body: r.Body, timeout: timeout, http1: r.ProtoMajor == 1, header: w.Header()}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), streamKey{}, c)))
			return
		}
		if r.URL.Path == fencev1connect.LockServiceAcquireProcedure {
			if r.ProtoMajor == 1 {
				// The connection's deadline from an earlier request.
				_ = rc.SetWriteDeadline(time.Time{})
			}
			r = takeTry(r) // wait.go
			r = r.WithContext(context.WithValue(r.Context(), replyKey{}, &replyDeadline{rc: rc, timeout: timeout}))
		} else {
			_ = rc.SetWriteDeadline(time.Now().Add(timeout))
		}
		next.ServeHTTP(w, r)
	})
}

type replyKey struct{}

type replyDeadline struct {
	rc      *http.ResponseController
	timeout time.Duration
}

// replyReady starts the write deadline of the reply to the request of ctx
// (a no-op outside limitWrites, e.g. with Handler mounted elsewhere).
func replyReady(ctx context.Context) {
	if d, ok := ctx.Value(replyKey{}).(*replyDeadline); ok {
		_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	}
}
