package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// TestWireChecks: what only the wire form of a request can say (a ttl
// given as 0, a duration that is not valid, a page_token or page_size) is
// refused in its field's place of the request's Validate order, with the
// field and bound the API has always named.
func TestWireChecks(t *testing.T) {
	const max = time.Hour
	lim := fence.Limits{MaxTTL: max}
	zero := durationpb.New(0)
	broken := &durationpb.Duration{Seconds: 1, Nanos: -1}
	standalone := binding{}
	bound := binding{session: 7, seq: 1}
	cases := []struct {
		name         string
		err          error
		field, bound string
		value        string
	}{
		{"acquire ttl given as 0", validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: zero}, standalone, max, lim), "ttl", "at least 10ms", "0s"},
		{"acquire ttl absent", validateAcquire(&fencev1.AcquireRequest{Name: "a"}, standalone, max, lim), "ttl", "set (between 10ms and 1h0m0s) unless", ""},
		{"acquire ttl not a valid duration", validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: broken}, standalone, max, lim), "ttl", "a valid duration", ""},
		{"name before a broken ttl", validateAcquire(&fencev1.AcquireRequest{Ttl: broken}, standalone, max, lim), "name", "not empty", ""},
		{"session acquire with ttl given as 0", validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: zero}, bound, max, lim), "ttl", "absent for a lease bound to a session", "0s"},
		{"session acquire with a broken ttl", validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: broken}, bound, max, lim), "ttl", "absent for a lease bound to a session", ""},
		{"wait broken before lock_delay", validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: durationpb.New(time.Second), Wait: broken, LockDelay: durationpb.New(-time.Second)}, standalone, max, lim), "wait", "a valid duration", ""},
		{"lock_delay broken", validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: durationpb.New(time.Second), LockDelay: broken}, standalone, max, lim), "lock_delay", "a valid duration", ""},
		{"renew ttl given as 0", func() error {
			r, w := renewRequest(&fencev1.RenewRequest{Name: "a", Token: 1, Ttl: zero}, standalone, max)
			return r.Validate(lim, w...)
		}(), "ttl", "at least 10ms", "0s"},
		{"open ttl given as 0", func() error {
			r, w := openRequest(&fencev1.OpenSessionRequest{Ttl: zero}, max)
			return r.Validate(lim, w...)
		}(), "ttl", "at least 10ms", "0s"},
		{"open ttl absent", func() error {
			r, w := openRequest(&fencev1.OpenSessionRequest{}, max)
			return r.Validate(lim, w...)
		}(), "ttl", "set (between 10ms and 1h0m0s)", ""},
		{"keepalive ttl given as 0", func() error {
			r, w := keepAliveRequest(&fencev1.KeepAliveRequest{Ttl: zero}, binding{session: 3}, max)
			return r.Validate(lim, w...)
		}(), "ttl", "at least 10ms", "0s"},
		{"list prefix before page_size", func() error {
			r, w := listRequest(&fencev1.ListRequest{Prefix: strings.Repeat("p", fence.MaxNameBytes+1), PageSize: MaxPageSize + 1})
			return r.Validate(lim, w...)
		}(), "prefix", "at most 512 bytes", ""},
		{"list page_size before page_token", func() error {
			r, w := listRequest(&fencev1.ListRequest{PageSize: MaxPageSize + 1, PageToken: "not a token"})
			return r.Validate(lim, w...)
		}(), "page_size", "at most 10000", ""},
		{"list page_token", func() error {
			r, w := listRequest(&fencev1.ListRequest{PageToken: "not a token"})
			return r.Validate(lim, w...)
		}(), "page_token", "next_page_token of an earlier List", ""},
	}
	for _, c := range cases {
		var inv *fence.InvalidError
		if !errors.As(c.err, &inv) || inv.Field != c.field || !strings.Contains(inv.Bound, c.bound) || (c.value != "" && inv.Value != c.value) {
			t.Errorf("%s: %v, want %s refused (%q, value %q)", c.name, c.err, c.field, c.bound, c.value)
		}
	}
}

// TestWireChecksLeaveBindingToTheTransport: a request's session binding
// is judged where the transport judges it (withRef; a stream after the
// op's fields), not again by Validate.
func TestWireChecksLeaveBindingToTheTransport(t *testing.T) {
	err := validateAcquire(&fencev1.AcquireRequest{Name: "a", Ttl: durationpb.New(time.Second)}, binding{seq: 1}, time.Hour, fence.Limits{MaxTTL: time.Hour})
	if err != nil {
		t.Errorf("a request whose binding the transport judged: %v, want its fields judged only", err)
	}
	if _, err := refBinding(&fencev1.SessionRef{Seq: 1}); err == nil || err.(*fence.InvalidError).Field != "session.id" {
		t.Errorf("refBinding of seq without a session: %v, want session.id refused", err)
	}
}

func validateAcquire(m *fencev1.AcquireRequest, b binding, max time.Duration, lim fence.Limits) error {
	r, w := acquireRequest(m, b, max)
	return r.Validate(lim, w...)
}
