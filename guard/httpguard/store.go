package httpguard

import (
	"context"
	"errors"

	"github.com/fenceworks/fence"
)

// Store checks fencing tokens for the middleware, inside a transaction that
// the request's handler then writes in.
//
// Contract:
//   - Begin checks token against the last token accepted for resource. An
//     older token is refused with a *fence.StaleTokenError carrying both
//     tokens (and nothing is left open); an invalid argument with a
//     *fence.InvalidError; any other error means the store failed.
//   - An accepted Begin returns an open Tx. Until it ends, no other Tx on the
//     same resource may commit: a concurrent Begin on the resource either
//     waits for it to end (and then checks against the outcome) or its
//     commit fails. This is what makes the check and the handler's write one
//     atomic step.
//   - Commit makes the token advance and every write the handler made in the
//     Tx visible together; Rollback discards both. Exactly one of them is
//     called, once, by the middleware.
//   - Begin may be called concurrently from many goroutines; one Tx is used
//     by one request at a time.
type Store interface {
	Begin(ctx context.Context, resource string, token fence.Token) (Tx, error)
}

// Tx is an open guard transaction. pgx.Tx satisfies it.
type Tx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// ErrTxDone: Commit or Rollback was called on a Tx that already ended.
var ErrTxDone = errors.New("httpguard: transaction already ended")

type fencedKey struct{}

// FromContext returns what the middleware accepted for this request: the
// resource, the token, the op_id and the open Tx to write in.
func FromContext(ctx context.Context) (Fenced, bool) {
	f, ok := ctx.Value(fencedKey{}).(Fenced)
	return f, ok
}

func withFenced(ctx context.Context, f Fenced) context.Context {
	return context.WithValue(ctx, fencedKey{}, f)
}
