// Package fence is the vocabulary of Fence, a lease service whose every grant
// carries a monotonic fencing token.
//
// A worker that holds a 5-second lease does not stop at second 5: it can
// pause, wake after another worker took over, and overwrite the new owner's
// result. The cure is a fencing token — a number that strictly grows with each
// change of owner, sent with every protected write and compared atomically at
// the store with the last one accepted there.
//
// This package holds only the shared types: [Token], [Lease], the limits on
// input, the sentinel errors ([ErrBusy], [ErrStaleToken], [ErrNotHolder],
// [ErrLeaseExpired], [ErrUnknownToken], [ErrOpConflict], [ErrInvalid]) and the
// typed errors that carry their facts ([*BusyError], [*StaleTokenError], …).
// It has no dependencies, so guards for real stores (package guard/...) can
// import it without pulling in the server.
//
// Errors are values with facts:
//
//	if errors.Is(err, fence.ErrStaleToken) {
//		var stale *fence.StaleTokenError
//		errors.As(err, &stale)
//		log.Printf("refused: token %d, store has seen %d", stale.Token, stale.LastAccepted)
//	}
package fence
