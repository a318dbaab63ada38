package httpguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
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
	// MaxBody bounds the request body of a request with a Fence-Op-Id when
	// the store is an OpStore: the middleware reads it whole, to tell a
	// retry from another request under the same op_id (default
	// DefaultMaxBody, 1 MiB; negative panics in Middleware). A larger body
	// gets 413 and a JSON body naming the bound.
	MaxBody int

	// KeySet is the Fence cluster's public signing keys (`fence keys
	// --json` or GET /v1/keys, read with fence.ParseKeySet). With a key set
	// the middleware verifies the proof of every Fence-Token before it
	// begins the store's transaction: a token without a proof, or whose
	// proof does not hold for the resource's lock under a key of this
	// cluster (tampered, another lock's or another cluster's, made up), gets
	// 409 FORGED_TOKEN, the handler is not called and the store is not
	// touched. Without one (the default) any number is compared, and a
	// made-up token such as 2^53-1 is accepted and then refuses every
	// honest owner.
	KeySet *fence.KeySet
	// KeySource, instead of KeySet, returns the current key set for every
	// request (reload it after a `fence keys rotate` or a restore). A nil
	// result answers 500 and changes nothing. Setting both panics in
	// Middleware.
	KeySource func() *fence.KeySet
	// LockFor names the lock whose proofs a resource accepts (default: the
	// lock of the resource's own name).
	// It must be one-to-one (injective): two resources mapped to one lock
	// let whoever holds that lock write both, so a lease on one is a lease
	// on the other. "stock/"+strings.TrimPrefix(r, "sku-") is not: it
	// sends both "sku-42" and "42" to "stock/42". Map only the names you
	// mean and return "" for any other (a resource no lock protects: every
	// proof is refused); see docs/guards.md.
	LockFor func(resource string) string
	// AllowUnsigned accepts a bare decimal Fence-Token even with a key set,
	// while clients move to signed tokens. It reopens the hole: a made-up
	// unsigned token is compared, and a large one poisons the resource.
	// Signed tokens are still verified.
	AllowUnsigned bool
}

// Middleware fences the handlers it wraps with store. For each request it:
//
//  1. reads Fence-Token, Fence-Resource and Fence-Op-Id; a missing or
//     malformed header gets 400 and a JSON body naming it; with a key set
//     (Options.KeySet) a token whose proof does not hold gets 409
//     FORGED_TOKEN and nothing else happens;
//  2. begins a guard transaction with store.Begin; a stale token gets 409
//     and a JSON body with both tokens, and the handler is not called.
//     With a Fence-Op-Id and an OpStore it calls BeginOp instead: an op
//     applied before is answered with its saved answer (header
//     Fence-Replayed: true) without calling the handler — also when a newer
//     token has been accepted since — and the same op_id with another
//     method, URI or body gets 409 OP_CONFLICT;
//  3. calls the handler with the accepted Fenced (and its Tx) in the request
//     context, buffering the response;
//  4. commits if the handler answered 2xx (saving the answer first, for an
//     op), else rolls back (also on panic), and only then sends the
//     buffered response — or a 500 if the commit failed (503 with
//     Retry-After for a RetryableError), so that a client never sees
//     success for a write that was not committed.
//
// Responses are held whole until the commit, at most Options.MaxBuffer
// bytes. 1xx informational answers (103 Early Hints) are not final: they
// reach the client at once and the handler's next status decides. The
// writer is an http.Flusher whose Flush does nothing (held output is sent
// after the commit, never before); it cannot be hijacked; Unwrap gives
// http.ResponseController the underlying writer (for deadlines — writing to
// it directly would bypass the guard).
//
// A Store that is not an OpStore passes Fence-Op-Id to the handler
// (Fenced.OpID) and remembers nothing: a retry after a newer token is then
// refused as stale.
func Middleware(store Store, opts Options) func(http.Handler) http.Handler {
	m := &middleware{store: store, log: opts.Logger, resourceOf: opts.Resource,
		maxBuffer: bound("MaxBuffer", opts.MaxBuffer, DefaultMaxBuffer), maxBody: bound("MaxBody", opts.MaxBody, DefaultMaxBody)}
	if m.log == nil {
		m.log = slog.Default()
	}
	keys, err := proof.New(proof.Config{KeySet: opts.KeySet, KeySource: opts.KeySource, LockFor: opts.LockFor, AllowUnsigned: opts.AllowUnsigned})
	if err != nil {
		panic("httpguard: Options: " + err.Error())
	}
	m.keys = keys
	m.opStore, _ = store.(OpStore)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

func bound(name string, v, def int) int {
	switch {
	case v < 0:
		panic(fmt.Sprintf("httpguard: Options.%s %d is negative", name, v))
	case v == 0:
		return def
	}
	return v
}

type middleware struct {
	store              Store
	opStore            OpStore // store, if it remembers ops
	log                *slog.Logger
	resourceOf         func(*http.Request) string
	maxBuffer, maxBody int
	keys               *proof.Verifier
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx := r.Context()
	f, err := parseHeaders(r.Header, m.resourceOf, r)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	if err := m.keys.Verify(f.Resource, f.SignedToken); err != nil {
		if fence.ReasonOf(err) == "" {
			m.log.ErrorContext(ctx, "httpguard: verifying the token", "resource", f.Resource, "token", uint64(f.Token), "err", err)
		}
		writeRefusal(w, err)
		return
	}
	var (
		tx   Tx
		opTx OpTx
	)
	if f.OpID != "" && m.opStore != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(m.maxBody)+1))
		if err != nil {
			writeRefusal(w, fence.Invalid("body", "readable", err.Error()))
			return
		}
		if len(body) > m.maxBody {
			writeRefusal(w, &bodyTooLargeError{max: m.maxBody})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		op := Op{Resource: f.Resource, Token: f.Token, ID: f.OpID, Payload: opPayload(r, body)}
		var (
			saved    []byte
			replayed bool
		)
		opTx, saved, replayed, err = m.opStore.BeginOp(ctx, op)
		switch {
		case err != nil:
			m.beginFailed(ctx, w, f, err)
			return
		case replayed:
			if err := replay(w, saved); err != nil {
				m.log.ErrorContext(ctx, "httpguard: replay", "resource", f.Resource, "op_id", f.OpID, "err", err)
				writeRefusal(w, err)
			}
			return
		}
		tx = opTx
	} else {
		if tx, err = m.store.Begin(ctx, f.Resource, f.Token); err != nil {
			m.beginFailed(ctx, w, f, err)
			return
		}
	}
	f.Tx = tx
	rec := newRecorder(w, m.maxBuffer)
	committed := false
	defer func() {
		if !committed {
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, ErrTxDone) {
				m.log.WarnContext(ctx, "httpguard: rollback", "resource", f.Resource, "err", err)
			}
		}
	}()
	next.ServeHTTP(rec, r.WithContext(withFenced(ctx, f)))
	if rec.overflowed {
		m.log.ErrorContext(ctx, "httpguard: response larger than MaxBuffer, rolled back", "resource", f.Resource, "token", uint64(f.Token), "max_buffer", m.maxBuffer)
		writeRefusal(w, errTooLarge)
		return // rolled back by the deferred call
	}
	if rec.status < 200 || rec.status > 299 {
		rec.sendTo(w)
		return // rolled back by the deferred call
	}
	if opTx != nil {
		a, err := rec.answer()
		if err == nil {
			err = opTx.SaveOp(ctx, a)
		}
		if err != nil {
			m.log.ErrorContext(ctx, "httpguard: saving the op's answer, rolled back", "resource", f.Resource, "op_id", f.OpID, "err", err)
			writeRefusal(w, err)
			return // rolled back by the deferred call
		}
	}
	committed = true
	if err := tx.Commit(ctx); err != nil {
		m.log.ErrorContext(ctx, "httpguard: commit", "resource", f.Resource, "token", uint64(f.Token), "err", err)
		var retry *RetryableError
		if errors.As(err, &retry) {
			writeRefusal(w, err) // 503: the store aborted the transaction, nothing was applied
		} else {
			writeRefusal(w, errCommit)
		}
		return
	}
	rec.sendTo(w)
}

// beginFailed answers a refused or failed Begin/BeginOp.
func (m *middleware) beginFailed(ctx context.Context, w http.ResponseWriter, f Fenced, err error) {
	var retry *RetryableError
	switch {
	case errors.As(err, &retry):
		m.log.WarnContext(ctx, "httpguard: begin: transient, answered 503", "resource", f.Resource, "token", uint64(f.Token), "err", err)
	case fence.ReasonOf(err) == "":
		m.log.ErrorContext(ctx, "httpguard: begin", "resource", f.Resource, "token", uint64(f.Token), "err", err)
	}
	writeRefusal(w, err)
}

// bodyTooLargeError is a request body over Options.MaxBody: 413.
type bodyTooLargeError struct{ max int }

func (e *bodyTooLargeError) Error() string {
	return "request body larger than " + strconv.Itoa(e.max) + " bytes (Options.MaxBody)"
}
