package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// storeMut is what a store reports of an applied (or replayed) write or add.
type storeMut struct {
	Value     int64  // the value after
	Version   uint64 // the version after
	LastToken uint64 // the last accepted token after
	Replayed  bool
}

// storeState is a resource as read.
type storeState struct {
	Value     int64
	Version   uint64
	LastToken uint64
}

// store is one place the workload's resources live. Every mutating method
// classifies its own error: the outcome is the store's knowledge of whether
// the operation was applied (see Outcome). lastToken is the newer token of
// a stale refusal, when the store says it.
type store interface {
	Name() string
	// Res is the resource name of sku-k in this store.
	Res(k int) string
	Fenced() bool
	Read(ctx context.Context, cl *client.Client, k int) (storeState, Outcome, error)
	// Write and Add send the lease's signed token (a guard with a key
	// set verifies its proof; the built-in store, whose resource
	// stock/sku-k is not named like its lock, is sent the number).
	Write(ctx context.Context, cl *client.Client, k int, st fence.SignedToken, value int64, opID string) (m storeMut, out Outcome, lastToken uint64, err error)
	Add(ctx context.Context, cl *client.Client, k int, st fence.SignedToken, delta int64, opID string) (m storeMut, out Outcome, lastToken uint64, err error)
	Close()
}

// fenceStore is the server's built-in store: resource stock/sku-k, reached
// through the worker's client of the lease (session or standalone).
type fenceStore struct{}

func (fenceStore) Name() string     { return StoreFence }
func (fenceStore) Res(k int) string { return fmt.Sprintf("stock/sku-%d", k) }
func (fenceStore) Fenced() bool     { return true }
func (fenceStore) Close()           {}
func lockName(k int) string         { return fmt.Sprintf("sku-%d", k) }
func pgResName(k int) string        { return lockName(k) }
func stateOf(r client.Resource) storeState {
	return storeState{Value: stockInt(r.Value), Version: r.Version, LastToken: uint64(r.LastToken)}
}

// stockInt parses a stock value; an empty (absent or deleted) value is 0. A
// value that is not a decimal integer cannot come from the workload; it is
// reported as -1<<62 so that a checker sees it as unexplained.
func stockInt(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -1 << 62
	}
	return n
}

func (s fenceStore) Read(ctx context.Context, cl *client.Client, k int) (storeState, Outcome, error) {
	r, err := cl.Read(ctx, s.Res(k))
	if err != nil {
		return storeState{}, classifyRead(err), err
	}
	return stateOf(r), OutcomeOK, nil
}

func (s fenceStore) Write(ctx context.Context, cl *client.Client, k int, st fence.SignedToken, value int64, opID string) (storeMut, Outcome, uint64, error) {
	r, err := cl.Write(ctx, s.Res(k), st.Token, []byte(strconv.FormatInt(value, 10)), client.OpID(opID))
	if err != nil {
		out, last := classifyMutation(err)
		return storeMut{}, out, last, err
	}
	return storeMut{Value: stockInt(r.Value), Version: r.Version, LastToken: uint64(r.LastToken), Replayed: r.Replayed}, OutcomeOK, 0, nil
}

func (s fenceStore) Add(ctx context.Context, cl *client.Client, k int, st fence.SignedToken, delta int64, opID string) (storeMut, Outcome, uint64, error) {
	r, err := cl.Add(ctx, s.Res(k), st.Token, delta, client.OpID(opID))
	if err != nil {
		out, last := classifyMutation(err)
		return storeMut{}, out, last, err
	}
	return storeMut{Value: r.Int, Version: r.Version, LastToken: uint64(r.LastToken), Replayed: r.Replayed}, OutcomeOK, 0, nil
}

// classifyMutation says what a Fence refusal of a write or add means:
//
//   - stale: the token is older than the resource's last (ErrStaleToken),
//     or the lease is not held (ErrNotHolder, ErrLeaseExpired): the server
//     refused it and applied nothing;
//   - fail: refused for another definite reason that applies nothing
//     (ErrInvalid, ErrOpConflict, ErrUnknownToken, ErrResourceExhausted,
//     ErrBusy);
//   - unknown: everything else: deadlines, lost connections, Unavailable,
//     a closed client, and ErrSessionExpired (a request resent on a
//     re-attached stream may have been applied by an earlier send before
//     the session ended). When unsure, unknown: calling an applied write
//     "fail" would make the checkers see a lost write that is not one.
//
// A refusal is taken at its word even when the client had retried (its
// retries carry the same op_id, and a server that keeps its op_ids replays
// an applied op instead of refusing it); a server that forgot an op_id is
// what checker 5 is there to catch.
func classifyMutation(err error) (Outcome, uint64) {
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		return OutcomeOK, 0
	case errors.As(err, &stale):
		return OutcomeStale, uint64(stale.LastAccepted)
	case errors.Is(err, fence.ErrSessionExpired), errors.Is(err, client.ErrLeaseLost):
		// ErrLeaseLost before ErrLeaseExpired: a *LostError wraps the
		// cause of a lost lease, which may be a LeaseExpiredError.
		return OutcomeUnknown, 0
	case errors.Is(err, fence.ErrStaleToken), errors.Is(err, fence.ErrNotHolder), errors.Is(err, fence.ErrLeaseExpired):
		return OutcomeStale, 0
	case errors.Is(err, fence.ErrInvalid), errors.Is(err, fence.ErrOpConflict), errors.Is(err, fence.ErrUnknownToken),
		errors.Is(err, fence.ErrResourceExhausted), errors.Is(err, fence.ErrBusy):
		return OutcomeFail, 0
	}
	return OutcomeUnknown, 0
}

// classifyAcquire: granted = ok; BUSY (held, or the wait ran out), a limit,
// or an invalid request = fail; anything else (deadline, lost connection,
// session expired with the request in flight) = unknown: the lock may have
// been granted (the client releases a session grant that comes after its
// caller stopped waiting; a standalone one expires by its TTL).
func classifyAcquire(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, fence.ErrSessionExpired), errors.Is(err, client.ErrLeaseLost):
		return OutcomeUnknown
	case errors.Is(err, fence.ErrBusy), errors.Is(err, fence.ErrResourceExhausted), errors.Is(err, fence.ErrInvalid),
		errors.Is(err, fence.ErrPermitsMismatch):
		return OutcomeFail
	}
	return OutcomeUnknown
}

// classifyRelease: released = ok (the client also returns nil when a retry
// after a lost reply hears "not holder": the first attempt released it);
// the server says the token does not hold the lock (not holder, expired,
// stale) = stale; an invalid request = fail; anything else, including a
// session that ended with the request in flight, = unknown.
func classifyRelease(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, fence.ErrSessionExpired), errors.Is(err, client.ErrLeaseLost):
		return OutcomeUnknown
	case errors.Is(err, fence.ErrNotHolder), errors.Is(err, fence.ErrLeaseExpired), errors.Is(err, fence.ErrStaleToken):
		return OutcomeStale
	case errors.Is(err, fence.ErrInvalid), errors.Is(err, fence.ErrUnknownToken):
		return OutcomeFail
	}
	return OutcomeUnknown
}

// classifyRead: a read changes nothing; a typed refusal is fail, and no
// answer is unknown (no result).
func classifyRead(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	if fence.ReasonOf(err) != "" && !errors.Is(err, fence.ErrSessionExpired) {
		return OutcomeFail
	}
	return OutcomeUnknown
}
