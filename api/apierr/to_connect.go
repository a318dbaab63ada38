package apierr

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// CodeOf is the Connect code for a Fence reason ("" maps to Unknown).
func CodeOf(r fence.Reason) connect.Code {
	switch r {
	case fence.ReasonBusy, fence.ReasonResourceExhausted:
		// Told apart by the detail's reason.
		return connect.CodeResourceExhausted
	case fence.ReasonStaleToken, fence.ReasonNotHolder, fence.ReasonLeaseExpired, fence.ReasonUnknownToken, fence.ReasonSessionExpired, fence.ReasonForgedToken,
		fence.ReasonPermitsMismatch:
		return connect.CodeFailedPrecondition
	case fence.ReasonOpConflict:
		return connect.CodeAlreadyExists
	case fence.ReasonInvalid:
		return connect.CodeInvalidArgument
	case fence.ReasonPermissionDenied:
		return connect.CodePermissionDenied
	case fence.ReasonUnauthenticated:
		return connect.CodeUnauthenticated
	}
	return connect.CodeUnknown
}

// ToConnect turns err into a *connect.Error. A Fence refusal gets the code of
// its reason, its own message (e.g. "token 1 is older than accepted token 2")
// and one fencev1.ErrorDetail; a context error gets Canceled or
// DeadlineExceeded; a *connect.Error is returned as is; anything else is
// Internal. ToConnect(nil) is nil.
func ToConnect(err error) *connect.Error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	reason := fence.ReasonOf(err)
	if errors.As(err, &ce) {
		if reason != "" && connect.IsWireError(ce) {
			// A refusal received from another server (a follower passing
			// on its leader's answer): the same code, message and details,
			// in an error of this server's, whose metadata Connect sends
			// (it sends none of a wire error's).
			wire := ce
			ce = connect.NewError(wire.Code(), err)
			for _, d := range wire.Details() {
				ce.AddDetail(d)
			}
		}
		if reason != "" {
			SetHeaders(ce.Meta(), err)
		}
		return ce
	}
	if reason == "" {
		switch {
		case errors.Is(err, context.Canceled):
			return connect.NewError(connect.CodeCanceled, err)
		case errors.Is(err, context.DeadlineExceeded):
			return connect.NewError(connect.CodeDeadlineExceeded, err)
		}
		return connect.NewError(connect.CodeInternal, err)
	}
	ce = connect.NewError(CodeOf(reason), err)
	if d, derr := connect.NewErrorDetail(Detail(err)); derr == nil {
		ce.AddDetail(d)
	}
	SetHeaders(ce.Meta(), err)
	return ce
}

// The response headers of a refusal (the JSON contract, docs/api.md). In
// the Connect protocol they are HTTP response headers; in gRPC and
// gRPC-Web, trailers (metadata).
const (
	// HeaderReason is the refusal's reason: STALE_TOKEN, BUSY, ...
	HeaderReason = "Fence-Reason"
	// HeaderLastToken is the last accepted token of a STALE_TOKEN refusal
	// (UNKNOWN_TOKEN: the last token issued), a decimal integer.
	HeaderLastToken = "Fence-Last-Token"
	// HeaderRetryAfter is BUSY's wait before a retry: whole seconds, at
	// least 1 (the holder's remaining TTL or the lock-delay, rounded up).
	HeaderRetryAfter = "Retry-After"
)

// SetHeaders sets the refusal headers of err in h (nothing when err is
// not a refusal): Fence-Reason always, Fence-Last-Token when the last
// accepted token is one of its facts, Retry-After on BUSY.
func SetHeaders(h http.Header, err error) {
	reason := fence.ReasonOf(err)
	if reason == "" {
		return
	}
	h.Set(HeaderReason, string(reason))
	if last := LastToken(err); last != 0 {
		h.Set(HeaderLastToken, strconv.FormatUint(last, 10))
	}
	var busy *fence.BusyError
	if errors.As(err, &busy) {
		h.Set(HeaderRetryAfter, strconv.FormatInt(RetryAfter(busy.Remaining), 10))
	}
}

// LastToken is the last accepted token a refusal reports (STALE_TOKEN; the
// last issued one for UNKNOWN_TOKEN), or 0.
func LastToken(err error) uint64 {
	var (
		stale   *fence.StaleTokenError
		unknown *fence.UnknownTokenError
	)
	switch {
	case errors.As(err, &stale):
		return uint64(stale.LastAccepted)
	case errors.As(err, &unknown):
		return uint64(unknown.LastIssued)
	}
	return 0
}

// RetryAfter is the Retry-After of a BUSY whose lock is free again in
// remaining: whole seconds rounded up, at least 1.
func RetryAfter(remaining time.Duration) int64 {
	s := int64((remaining + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Detail describes a Fence refusal as a fencev1.ErrorDetail (nil if err is
// not one); replayed is IsReplayed(err).
func Detail(err error) *fencev1.ErrorDetail {
	reason := fence.ReasonOf(err)
	if reason == "" {
		return nil
	}
	d := &fencev1.ErrorDetail{Reason: string(reason), Replayed: IsReplayed(err)}
	var (
		busy     *fence.BusyError
		stale    *fence.StaleTokenError
		holder   *fence.NotHolderError
		expired  *fence.LeaseExpiredError
		unknown  *fence.UnknownTokenError
		conflict *fence.OpConflictError
		invalid  *fence.InvalidError
		limit    *fence.ResourceExhaustedError
		session  *fence.SessionExpiredError
		denied   *fence.PermissionDeniedError
		unauth   *fence.UnauthenticatedError
		forged   *fence.ForgedTokenError
		permits  *fence.PermitsMismatchError
	)
	switch {
	case errors.As(err, &busy):
		d.Name, d.Holder, d.HolderToken = busy.Name, busy.Holder, uint64(busy.Token)
		d.Remaining = durationpb.New(busy.Remaining)
		d.Delayed, d.Waited, d.Queued = busy.Delayed, busy.Waited, uint32(busy.Queued)
	case errors.As(err, &stale):
		d.Name, d.Token, d.LastAccepted = stale.Resource, uint64(stale.Token), uint64(stale.LastAccepted)
	case errors.As(err, &holder):
		d.Name, d.Token = holder.Name, uint64(holder.Token)
	case errors.As(err, &expired):
		d.Name, d.Token = expired.Name, uint64(expired.Token)
	case errors.As(err, &unknown):
		d.Token, d.LastAccepted = uint64(unknown.Token), uint64(unknown.LastIssued)
	case errors.As(err, &conflict):
		d.Field, d.Id = conflict.Field, conflict.ID
	case errors.As(err, &invalid):
		d.Field, d.Bound, d.Got = invalid.Field, invalid.Bound, invalid.Value
	case errors.As(err, &limit):
		d.Limit, d.Bound, d.Got = limit.Limit, limit.Bound, limit.Got
	case errors.As(err, &session):
		d.Session = session.Session
	case errors.As(err, &denied):
		d.Principal, d.Permission, d.Name = denied.Principal, denied.What, denied.Name
	case errors.As(err, &unauth):
		d.Got = unauth.Reason
	case errors.As(err, &forged):
		d.Token, d.Name, d.Got = uint64(forged.Token), forged.Name, forged.Reason
	case errors.As(err, &permits):
		d.Name, d.Permits, d.CurrentPermits = permits.Name, permits.Permits, permits.Current
	}
	return d
}
