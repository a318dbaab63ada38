package apierr

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
)

// Every refusal survives the round trip to a Connect error and back: same
// sentinel, same facts, the server's message, and the connect code.
func TestRoundTrip(t *testing.T) {
	cases := []struct {
		err      error
		sentinel error
		code     connect.Code
	}{
		{&fence.BusyError{Name: "l", Holder: "a", Token: 3, Remaining: 2 * time.Second, Waited: true}, fence.ErrBusy, connect.CodeResourceExhausted},
		{&fence.BusyError{Name: "l", Remaining: time.Second, Delayed: true}, fence.ErrBusy, connect.CodeResourceExhausted},
		{&fence.StaleTokenError{Resource: "r", Token: 1, LastAccepted: 2}, fence.ErrStaleToken, connect.CodeFailedPrecondition},
		{&fence.NotHolderError{Name: "l", Token: 4}, fence.ErrNotHolder, connect.CodeFailedPrecondition},
		{&fence.LeaseExpiredError{Name: "l", Token: 4}, fence.ErrLeaseExpired, connect.CodeFailedPrecondition},
		{&fence.UnknownTokenError{Token: 9, LastIssued: 5}, fence.ErrUnknownToken, connect.CodeFailedPrecondition},
		{&fence.OpConflictError{Field: "op_id", ID: "x"}, fence.ErrOpConflict, connect.CodeAlreadyExists},
		{&fence.InvalidError{Field: "ttl", Bound: "at least 10ms"}, fence.ErrInvalid, connect.CodeInvalidArgument},
		{&fence.InvalidError{Field: "ttl", Bound: "at least 10ms", Value: "1ms"}, fence.ErrInvalid, connect.CodeInvalidArgument},
		{&fence.ResourceExhaustedError{Limit: `waiters on lock "x"`, Bound: "at most 1024", Got: "1024"}, fence.ErrResourceExhausted, connect.CodeResourceExhausted},
		{&fence.ResourceExhaustedError{Limit: "remembered op_ids", Bound: "at most 1000000"}, fence.ErrResourceExhausted, connect.CodeResourceExhausted},
		{&fence.SessionExpiredError{Session: 7}, fence.ErrSessionExpired, connect.CodeFailedPrecondition},
		{&fence.PermitsMismatchError{Name: "exchange", Permits: 3, Current: 4}, fence.ErrPermitsMismatch, connect.CodeFailedPrecondition},
	}
	for _, tc := range cases {
		ce := ToConnect(tc.err)
		if ce.Code() != tc.code || ce.Message() != tc.err.Error() || len(ce.Details()) != 1 {
			t.Fatalf("ToConnect(%v) = %v (%d details)", tc.err, ce, len(ce.Details()))
		}
		back := FromConnect(ce)
		if !errors.Is(back, tc.sentinel) || back.Error() != tc.err.Error() {
			t.Fatalf("FromConnect(%v) = %v, want %v", ce, back, tc.err)
		}
		var got *connect.Error
		if !errors.As(back, &got) || got.Code() != tc.code {
			t.Fatalf("FromConnect result does not carry the connect error")
		}
		if d, want := Detail(back), Detail(tc.err); d.String() != want.String() {
			t.Fatalf("facts changed: %v, want %v", d, want)
		}
		var pm *fence.PermitsMismatchError
		if want, ok := tc.err.(*fence.PermitsMismatchError); ok && (!errors.As(back, &pm) || *pm != *want) {
			t.Fatalf("FromConnect(%v) = %#v, want %#v", ce, pm, want)
		}
	}
}

func TestNonRefusals(t *testing.T) {
	if ToConnect(nil) != nil || FromConnect(nil) != nil {
		t.Fatal("nil must map to nil")
	}
	plain := errors.New("boom")
	if c := ToConnect(plain).Code(); c != connect.CodeInternal {
		t.Fatalf("plain error code = %v, want internal", c)
	}
	ce := connect.NewError(connect.CodeUnavailable, plain)
	if FromConnect(ce) != error(ce) {
		t.Fatal("a connect error without a Fence detail must come back unchanged")
	}
}

// RESOURCE_EXHAUSTED and BUSY share a code; the reason tells them apart, so
// neither comes back as the other, and the limit's facts survive errors.As.
func TestResourceExhaustedIsNotBusy(t *testing.T) {
	sent := &fence.ResourceExhaustedError{Limit: "fenced resources", Bound: "at most 100000", Got: "100000"}
	back := FromConnect(ToConnect(sent))
	var got *fence.ResourceExhaustedError
	if !errors.As(back, &got) || *got != *sent {
		t.Fatalf("round trip = %#v, want %#v", got, sent)
	}
	if errors.Is(back, fence.ErrBusy) || fence.ReasonOf(back) != fence.ReasonResourceExhausted {
		t.Fatalf("%v: reason %q, busy %t; want RESOURCE_EXHAUSTED and not BUSY", back, fence.ReasonOf(back), errors.Is(back, fence.ErrBusy))
	}
	busy := FromConnect(ToConnect(&fence.BusyError{Name: "l", Holder: "a", Token: 1}))
	if errors.Is(busy, fence.ErrResourceExhausted) {
		t.Fatalf("BUSY came back as resource exhausted: %v", busy)
	}
}

// A page token comes back as the name it was made from; anything else is
// refused.
func TestPageToken(t *testing.T) {
	for _, name := range []string{"a", "jobs/42", "ünï"} {
		if got, ok := DecodePageToken(EncodePageToken(name)); !ok || got != name {
			t.Fatalf("round trip of %q = %q, %t", name, got, ok)
		}
	}
	if EncodePageToken("") != "" {
		t.Fatal("no next page must be the empty token")
	}
	if got, ok := DecodePageToken(""); !ok || got != "" {
		t.Fatal("the empty token is the first page")
	}
	for _, bad := range []string{"a", "!!", EncodePageToken("x")[1:], "AQ"} {
		if _, ok := DecodePageToken(bad); ok {
			t.Errorf("DecodePageToken(%q) accepted", bad)
		}
	}
}

// Every refusal carries its headers (the JSON contract): Fence-Reason,
// Fence-Last-Token when the last accepted token is a fact, Retry-After on
// BUSY — also a refusal a follower passes on from its leader (a wire
// error, whose own metadata Connect does not send).
func TestRefusalHeaders(t *testing.T) {
	cases := []struct {
		err                    error
		reason, last, retryAft string
	}{
		{&fence.StaleTokenError{Resource: "r", Token: 99, LastAccepted: 100}, "STALE_TOKEN", "100", ""},
		{&fence.UnknownTokenError{Token: 9, LastIssued: 5}, "UNKNOWN_TOKEN", "5", ""},
		{&fence.BusyError{Name: "l", Holder: "a", Token: 3, Remaining: 2500 * time.Millisecond}, "BUSY", "", "3"},
		{&fence.BusyError{Name: "l", Delayed: true}, "BUSY", "", "1"},
		{&fence.NotHolderError{Name: "l", Token: 4}, "NOT_HOLDER", "", ""},
		{&fence.InvalidError{Field: "ttl", Bound: "at least 10ms"}, "INVALID_ARGUMENT", "", ""},
	}
	for _, tc := range cases {
		local := ToConnect(tc.err)
		// As a client receives it, then passed on by a server.
		wire := connect.NewWireError(local.Code(), errors.New(local.Message()))
		for _, d := range local.Details() {
			wire.AddDetail(d)
		}
		passed := ToConnect(FromConnect(wire))
		for _, ce := range []*connect.Error{local, passed} {
			m := ce.Meta()
			if m.Get("Fence-Reason") != tc.reason || m.Get("Fence-Last-Token") != tc.last || m.Get("Retry-After") != tc.retryAft {
				t.Errorf("%v: meta %v; want reason %s, last token %q, Retry-After %q", tc.err, m, tc.reason, tc.last, tc.retryAft)
			}
			if connect.IsWireError(ce) || ce.Code() != local.Code() || ce.Message() != local.Message() || len(ce.Details()) != 1 {
				t.Errorf("%v passed on as %v (wire %t, %d details)", tc.err, ce, connect.IsWireError(ce), len(ce.Details()))
			}
		}
	}
}
