package httpguard

import (
	"errors"
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
// Responses are buffered whole: the wrapped handlers should answer small
// bodies, and cannot stream (the writer is not an http.Flusher).
func Middleware(store Store, opts Options) func(http.Handler) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
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
			rec := newRecorder()
			committed := false
			defer func() {
				if !committed {
					if err := tx.Rollback(r.Context()); err != nil && !errors.Is(err, ErrTxDone) {
						log.WarnContext(r.Context(), "httpguard: rollback", "resource", f.Resource, "err", err)
					}
				}
			}()
			next.ServeHTTP(rec, r.WithContext(withFenced(r.Context(), f)))
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
