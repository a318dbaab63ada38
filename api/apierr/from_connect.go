package apierr

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// FromConnect turns a *connect.Error carrying a fencev1.ErrorDetail back into
// the typed refusal of package fence: the result matches the sentinel with
// errors.Is, the typed error with errors.As, and still the *connect.Error
// with errors.As. Its message is the server's. Any other error is returned
// unchanged; FromConnect(nil) is nil.
func FromConnect(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if det, ok := v.(*fencev1.ErrorDetail); ok {
			if fe := FromDetail(det); fe != nil {
				return &remoteError{fence: fe, conn: ce, replayed: det.GetReplayed()}
			}
		}
	}
	return err
}

// FromDetail rebuilds the typed refusal described by d (nil if its reason is
// unknown).
func FromDetail(d *fencev1.ErrorDetail) error {
	switch fence.Reason(d.GetReason()) {
	case fence.ReasonBusy:
		return &fence.BusyError{
			Name: d.GetName(), Holder: d.GetHolder(), Token: fence.Token(d.GetHolderToken()),
			Remaining: d.GetRemaining().AsDuration(), Delayed: d.GetDelayed(), Waited: d.GetWaited(), Queued: int(d.GetQueued()),
		}
	case fence.ReasonStaleToken:
		return &fence.StaleTokenError{Resource: d.GetName(), Token: fence.Token(d.GetToken()), LastAccepted: fence.Token(d.GetLastAccepted())}
	case fence.ReasonNotHolder:
		return &fence.NotHolderError{Name: d.GetName(), Token: fence.Token(d.GetToken())}
	case fence.ReasonLeaseExpired:
		return &fence.LeaseExpiredError{Name: d.GetName(), Token: fence.Token(d.GetToken())}
	case fence.ReasonUnknownToken:
		return &fence.UnknownTokenError{Token: fence.Token(d.GetToken()), LastIssued: fence.Token(d.GetLastAccepted())}
	case fence.ReasonOpConflict:
		return &fence.OpConflictError{Field: d.GetField(), ID: d.GetId()}
	case fence.ReasonInvalid:
		return &fence.InvalidError{Field: d.GetField(), Bound: d.GetBound(), Value: d.GetGot()}
	case fence.ReasonResourceExhausted:
		return &fence.ResourceExhaustedError{Limit: d.GetLimit(), Bound: d.GetBound(), Got: d.GetGot()}
	case fence.ReasonSessionExpired:
		return &fence.SessionExpiredError{Session: d.GetSession()}
	case fence.ReasonPermissionDenied:
		return &fence.PermissionDeniedError{Principal: d.GetPrincipal(), What: d.GetPermission(), Name: d.GetName()}
	case fence.ReasonUnauthenticated:
		return &fence.UnauthenticatedError{Reason: d.GetGot()}
	case fence.ReasonForgedToken:
		return &fence.ForgedTokenError{Token: fence.Token(d.GetToken()), Name: d.GetName(), Reason: d.GetGot()}
	case fence.ReasonPermitsMismatch:
		return &fence.PermitsMismatchError{Name: d.GetName(), Permits: d.GetPermits(), Current: d.GetCurrentPermits()}
	}
	return nil
}

// remoteError is a refusal received from a server.
type remoteError struct {
	fence    error
	conn     *connect.Error
	replayed bool // the detail's replayed (IsReplayed)
}

func (e *remoteError) Error() string {
	if m := e.conn.Message(); m != "" {
		return m
	}
	return e.fence.Error()
}

func (e *remoteError) Unwrap() []error { return []error{e.fence, e.conn} }
