package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// A saved result's refusal is written as one explicit record per error
// type (statepb.Refusal, a oneof), each field named: the snapshot bytes
// depend on these records only, never on the order of the fields of the
// public error types, so a change to package fence's structs cannot change
// what a snapshot decodes to. Strings are bytes: a refused command's name
// or id need not be UTF-8. Exactly one member is set (a record with none
// is refused; one with two does not decode canonically).

// snapErrorOf records err. An error of another type (none is returned by
// the machine) is kept as its message.
func snapErrorOf(err error) *statepb.Refusal {
	b := func(s string) []byte { return bs(s) }
	switch e := err.(type) {
	case *fence.BusyError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_Busy{Busy: &statepb.Busy{Name: b(e.Name), Holder: b(e.Holder), Token: uint64(e.Token),
			Remaining: int64(e.Remaining), Delayed: e.Delayed, Waited: e.Waited, Queued: uint32(e.Queued)}}}
	case *fence.StaleTokenError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_StaleToken{StaleToken: &statepb.StaleToken{Resource: b(e.Resource), Token: uint64(e.Token),
			LastAccepted: uint64(e.LastAccepted)}}}
	case *fence.NotHolderError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_NotHolder{NotHolder: &statepb.LockToken{Name: b(e.Name), Token: uint64(e.Token)}}}
	case *fence.LeaseExpiredError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_LeaseExpired{LeaseExpired: &statepb.LockToken{Name: b(e.Name), Token: uint64(e.Token)}}}
	case *fence.UnknownTokenError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_UnknownToken{UnknownToken: &statepb.UnknownToken{Token: uint64(e.Token), LastIssued: uint64(e.LastIssued)}}}
	case *fence.OpConflictError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_OpConflict{OpConflict: &statepb.OpConflict{Field: b(e.Field), Id: b(e.ID)}}}
	case *fence.InvalidError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_Invalid{Invalid: &statepb.Invalid{Field: b(e.Field), Bound: b(e.Bound), Value: b(e.Value)}}}
	case *fence.ResourceExhaustedError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_ResourceExhausted{ResourceExhausted: &statepb.ResourceExhausted{Limit: b(e.Limit), Bound: b(e.Bound), Got: b(e.Got)}}}
	case *fence.SessionExpiredError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_SessionExpired{SessionExpired: &statepb.SessionExpired{Session: e.Session}}}
	case *fence.PermitsMismatchError:
		return &statepb.Refusal{Refusal: &statepb.Refusal_PermitsMismatch{PermitsMismatch: &statepb.PermitsMismatch{Name: b(e.Name), Permits: e.Permits, Current: e.Current}}}
	}
	return &statepb.Refusal{Refusal: &statepb.Refusal_Untyped{Untyped: &statepb.Untyped{Message: b(err.Error())}}}
}

// refusalError decodes what snapErrorOf recorded, refusing a record with
// no member.
func refusalError(r *statepb.Refusal) (error, error) {
	switch x := r.GetRefusal().(type) {
	case *statepb.Refusal_Busy:
		e := x.Busy
		return &fence.BusyError{Name: string(e.Name), Holder: string(e.Holder), Token: fence.Token(e.Token), Remaining: time.Duration(e.Remaining),
			Delayed: e.Delayed, Waited: e.Waited, Queued: int(e.Queued)}, nil
	case *statepb.Refusal_StaleToken:
		e := x.StaleToken
		return &fence.StaleTokenError{Resource: string(e.Resource), Token: fence.Token(e.Token), LastAccepted: fence.Token(e.LastAccepted)}, nil
	case *statepb.Refusal_NotHolder:
		return &fence.NotHolderError{Name: string(x.NotHolder.Name), Token: fence.Token(x.NotHolder.Token)}, nil
	case *statepb.Refusal_LeaseExpired:
		return &fence.LeaseExpiredError{Name: string(x.LeaseExpired.Name), Token: fence.Token(x.LeaseExpired.Token)}, nil
	case *statepb.Refusal_UnknownToken:
		return &fence.UnknownTokenError{Token: fence.Token(x.UnknownToken.Token), LastIssued: fence.Token(x.UnknownToken.LastIssued)}, nil
	case *statepb.Refusal_OpConflict:
		return &fence.OpConflictError{Field: string(x.OpConflict.Field), ID: string(x.OpConflict.Id)}, nil
	case *statepb.Refusal_Invalid:
		e := x.Invalid
		return &fence.InvalidError{Field: string(e.Field), Bound: string(e.Bound), Value: string(e.Value)}, nil
	case *statepb.Refusal_ResourceExhausted:
		e := x.ResourceExhausted
		return &fence.ResourceExhaustedError{Limit: string(e.Limit), Bound: string(e.Bound), Got: string(e.Got)}, nil
	case *statepb.Refusal_SessionExpired:
		return &fence.SessionExpiredError{Session: x.SessionExpired.Session}, nil
	case *statepb.Refusal_PermitsMismatch:
		e := x.PermitsMismatch
		return &fence.PermitsMismatchError{Name: string(e.Name), Permits: e.Permits, Current: e.Current}, nil
	case *statepb.Refusal_Untyped:
		return errors.New(string(x.Untyped.Message)), nil
	}
	return nil, fmt.Errorf("refusal record with no member")
}
