package httpguard

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/fenceworks/fence"
)

// Options configure the middleware. The zero value is ready to use.
type Options struct {
	// Resource, if set, names the resource a request writes, decided by the
	// server (from its path, say) instead of trusted from the client. The
	// Fence-Resource header is then optional and, when sent, must match.
	Resource func(*http.Request) string
	// Logger receives store and commit failures (default slog.Default()).
	// Their details are not sent to the client.
	Logger *slog.Logger
	// MaxBuffer bounds the response body a handler may write: it is held
	// in memory until the commit (default DefaultMaxBuffer, 1 MiB; negative
	// panics in Middleware). A handler that writes more gets
	// ErrResponseTooLarge from Write, its transaction is rolled back, and
	// the client gets 500 — fenced answers are not streamed, because
	// nothing may reach the client before the write is committed.
	MaxBuffer int
}

// Middleware fences the handlers it wraps with store. For each request it:
//
//  1. reads Fence-Token, Fence-Resource and Fence-Op-Id; a missing or
//     malformed header gets 400 and a JSON body naming it;
//  2. begins a guard transaction with store.Begin; a stale token gets 409
//     and a JSON body with both tokens, and the handler is not called;
//  3. calls the handler with the accepted Fenced (and its Tx) in the request
//     context, buffering the response;
//  4. commits if the handler answered 2xx, else rolls back (also on panic),
//     and only then sends the buffered response — or a 500 if the commit
//     failed, so that a client never sees success for a write that was not
//     committed.
//
// Responses are held whole until the commit, at most Options.MaxBuffer
// bytes. 1xx informational answers (103 Early Hints) are not final: they
// reach the client at once and the handler's next status decides. The
// writer is an http.Flusher whose Flush does nothing (held output is sent
// after the commit, never before); it cannot be hijacked; Unwrap gives
// http.ResponseController the underlying writer (for deadlines — writing to
// it directly would bypass the guard).
func Middleware(store Store, opts Options) func(http.Handler) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	maxBuffer := opts.MaxBuffer
	switch {
	case maxBuffer < 0:
		panic(fmt.Sprintf("httpguard: Options.MaxBuffer %d is negative", maxBuffer))
	case maxBuffer == 0:
		maxBuffer = DefaultMaxBuffer
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, err := parseHeaders(r.Header, opts.Resource, r)
			if err != nil {
				writeRefusal(w, err)
				return
			}
			tx, err := store.Begin(r.Context(), f.Resource, f.Token)
			if err != nil {
				var retry *RetryableError
				switch {
				case errors.As(err, &retry):
					log.WarnContext(r.Context(), "httpguard: begin: transient, answered 503", "resource", f.Resource, "token", uint64(f.Token), "err", err)
				case fence.ReasonOf(err) == "":
					log.ErrorContext(r.Context(), "httpguard: begin", "resource", f.Resource, "token", uint64(f.Token), "err", err)
				}
				writeRefusal(w, err)
				return
			}
			f.Tx = tx
			rec := newRecorder(w, maxBuffer)
			committed := false
			defer func() {
				if !committed {
					if err := tx.Rollback(r.Context()); err != nil && !errors.Is(err, ErrTxDone) {
						log.WarnContext(r.Context(), "httpguard: rollback", "resource", f.Resource, "err", err)
					}
				}
			}()
			next.ServeHTTP(rec, r.WithContext(withFenced(r.Context(), f)))
			if rec.overflowed {
				log.ErrorContext(r.Context(), "httpguard: response larger than MaxBuffer, rolled back", "resource", f.Resource, "token", uint64(f.Token), "max_buffer", maxBuffer)
				writeRefusal(w, errTooLarge)
				return // rolled back by the deferred call
			}
			if rec.status < 200 || rec.status > 299 {
				rec.sendTo(w)
				return // rolled back by the deferred call
			}
			committed = true
			if err := tx.Commit(r.Context()); err != nil {
				log.ErrorContext(r.Context(), "httpguard: commit", "resource", f.Resource, "token", uint64(f.Token), "err", err)
				var retry *RetryableError
				if errors.As(err, &retry) {
					writeRefusal(w, err) // 503: the store aborted the transaction, nothing was applied
				} else {
					writeRefusal(w, errCommit)
				}
				return
			}
			rec.sendTo(w)
		})
	}
}
