package apierr

import (
	"context"
	"errors"

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
	case fence.ReasonStaleToken, fence.ReasonNotHolder, fence.ReasonLeaseExpired, fence.ReasonUnknownToken, fence.ReasonSessionExpired:
		return connect.CodeFailedPrecondition
	case fence.ReasonOpConflict:
		return connect.CodeAlreadyExists
	case fence.ReasonInvalid:
		return connect.CodeInvalidArgument
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
	if errors.As(err, &ce) {
		return ce
	}
	reason := fence.ReasonOf(err)
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
	return ce
}

// Detail describes a Fence refusal as a fencev1.ErrorDetail (nil if err is
// not one).
func Detail(err error) *fencev1.ErrorDetail {
	reason := fence.ReasonOf(err)
	if reason == "" {
		return nil
	}
	d := &fencev1.ErrorDetail{Reason: string(reason)}
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
	)
	switch {
	case errors.As(err, &busy):
		d.Name, d.Holder, d.HolderToken = busy.Name, busy.Holder, uint64(busy.Token)
		d.Remaining = durationpb.New(busy.Remaining)
		d.Delayed, d.Waited = busy.Delayed, busy.Waited
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
	}
	return d
}
