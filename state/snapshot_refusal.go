package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
)

// A saved result's refusal is written as one explicit record per error
// type, each field named: the snapshot bytes depend on these records only,
// never on the order of the fields of the public error types, so a change
// to package fence's structs cannot change what a snapshot decodes to.
// Strings are written as bytes: a refused command's name or id need not be
// UTF-8. Exactly one member of snapError is set.

type snapError struct {
	Busy              *snapBusy              `json:"busy,omitempty"`
	StaleToken        *snapStaleToken        `json:"stale_token,omitempty"`
	NotHolder         *snapLockToken         `json:"not_holder,omitempty"`
	LeaseExpired      *snapLockToken         `json:"lease_expired,omitempty"`
	UnknownToken      *snapUnknownToken      `json:"unknown_token,omitempty"`
	OpConflict        *snapOpConflict        `json:"op_conflict,omitempty"`
	Invalid           *snapInvalid           `json:"invalid,omitempty"`
	ResourceExhausted *snapResourceExhausted `json:"resource_exhausted,omitempty"`
	SessionExpired    *snapSessionExpired    `json:"session_expired,omitempty"`
	Untyped           *snapUntyped           `json:"untyped,omitempty"` // an error of no type above: its message
}

type snapBusy struct {
	Name      []byte      `json:"name"`
	Holder    []byte      `json:"holder"`
	Token     fence.Token `json:"token"`
	Remaining int64       `json:"remaining"` // ns
	Delayed   bool        `json:"delayed"`
	Waited    bool        `json:"waited"`
}

type snapStaleToken struct {
	Resource     []byte      `json:"resource"`
	Token        fence.Token `json:"token"`
	LastAccepted fence.Token `json:"last_accepted"`
}

// snapLockToken records a NotHolderError or a LeaseExpiredError.
type snapLockToken struct {
	Name  []byte      `json:"name"`
	Token fence.Token `json:"token"`
}

type snapUnknownToken struct {
	Token      fence.Token `json:"token"`
	LastIssued fence.Token `json:"last_issued"`
}

type snapOpConflict struct {
	Field []byte `json:"field"`
	ID    []byte `json:"id"`
}

type snapInvalid struct {
	Field []byte `json:"field"`
	Bound []byte `json:"bound"`
	Value []byte `json:"value"`
}

type snapResourceExhausted struct {
	Limit []byte `json:"limit"`
	Bound []byte `json:"bound"`
	Got   []byte `json:"got"`
}

type snapSessionExpired struct {
	Session uint64 `json:"session"`
}

type snapUntyped struct {
	Message []byte `json:"message"`
}

// snapErrorOf records err. An error of another type (none is returned by
// the machine) is kept as its message.
func snapErrorOf(err error) *snapError {
	b := func(s string) []byte { return []byte(s) }
	switch e := err.(type) {
	case *fence.BusyError:
		return &snapError{Busy: &snapBusy{Name: b(e.Name), Holder: b(e.Holder), Token: e.Token, Remaining: int64(e.Remaining), Delayed: e.Delayed, Waited: e.Waited}}
	case *fence.StaleTokenError:
		return &snapError{StaleToken: &snapStaleToken{Resource: b(e.Resource), Token: e.Token, LastAccepted: e.LastAccepted}}
	case *fence.NotHolderError:
		return &snapError{NotHolder: &snapLockToken{Name: b(e.Name), Token: e.Token}}
	case *fence.LeaseExpiredError:
		return &snapError{LeaseExpired: &snapLockToken{Name: b(e.Name), Token: e.Token}}
	case *fence.UnknownTokenError:
		return &snapError{UnknownToken: &snapUnknownToken{Token: e.Token, LastIssued: e.LastIssued}}
	case *fence.OpConflictError:
		return &snapError{OpConflict: &snapOpConflict{Field: b(e.Field), ID: b(e.ID)}}
	case *fence.InvalidError:
		return &snapError{Invalid: &snapInvalid{Field: b(e.Field), Bound: b(e.Bound), Value: b(e.Value)}}
	case *fence.ResourceExhaustedError:
		return &snapError{ResourceExhausted: &snapResourceExhausted{Limit: b(e.Limit), Bound: b(e.Bound), Got: b(e.Got)}}
	case *fence.SessionExpiredError:
		return &snapError{SessionExpired: &snapSessionExpired{Session: e.Session}}
	}
	return &snapError{Untyped: &snapUntyped{Message: b(err.Error())}}
}

// error decodes what snapErrorOf recorded, refusing a record with no
// member or more than one.
func (s *snapError) error() (error, error) {
	var out []error
	if r := s.Busy; r != nil {
		out = append(out, &fence.BusyError{Name: string(r.Name), Holder: string(r.Holder), Token: r.Token, Remaining: time.Duration(r.Remaining), Delayed: r.Delayed, Waited: r.Waited})
	}
	if r := s.StaleToken; r != nil {
		out = append(out, &fence.StaleTokenError{Resource: string(r.Resource), Token: r.Token, LastAccepted: r.LastAccepted})
	}
	if r := s.NotHolder; r != nil {
		out = append(out, &fence.NotHolderError{Name: string(r.Name), Token: r.Token})
	}
	if r := s.LeaseExpired; r != nil {
		out = append(out, &fence.LeaseExpiredError{Name: string(r.Name), Token: r.Token})
	}
	if r := s.UnknownToken; r != nil {
		out = append(out, &fence.UnknownTokenError{Token: r.Token, LastIssued: r.LastIssued})
	}
	if r := s.OpConflict; r != nil {
		out = append(out, &fence.OpConflictError{Field: string(r.Field), ID: string(r.ID)})
	}
	if r := s.Invalid; r != nil {
		out = append(out, &fence.InvalidError{Field: string(r.Field), Bound: string(r.Bound), Value: string(r.Value)})
	}
	if r := s.ResourceExhausted; r != nil {
		out = append(out, &fence.ResourceExhaustedError{Limit: string(r.Limit), Bound: string(r.Bound), Got: string(r.Got)})
	}
	if r := s.SessionExpired; r != nil {
		out = append(out, &fence.SessionExpiredError{Session: r.Session})
	}
	if r := s.Untyped; r != nil {
		out = append(out, errors.New(string(r.Message)))
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("refusal record with %d members, want 1", len(out))
	}
	return out[0], nil
}
