package fence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// validator is any request's Validate.
type validator interface {
	Validate(fence.Limits, ...fence.FieldCheck) error
}

// orderCase is a request with several bad fields: Validate must name want
// (the first in the request's order) and its bound.
type orderCase struct {
	name  string
	req   validator
	want  string // the field named
	bound string // a substring of the bound
}

var limits = fence.Limits{MaxTTL: time.Hour}

var (
	long     = strings.Repeat("n", fence.MaxNameBytes+1)
	longID   = strings.Repeat("i", fence.MaxIDBytes+1)
	longOwn  = strings.Repeat("o", fence.MaxOwnerBytes+1)
	badSeq   = fence.SessionRef{Seq: 1} // seq without a session
	badAck   = fence.SessionRef{ID: 1, Seq: 2, Ack: 3}
	sess     = fence.SessionRef{ID: 7}
	tooLarge = make([]byte, fence.MaxValueBytes+1)
)

// orderCases walks each request's order one field at a time: each case
// breaks the field named and every field after it, so the first bad
// field is the one named.
var orderCases = []orderCase{
	{"acquire: session before name", fence.AcquireRequest{Session: badSeq, Name: "", TTL: time.Second}, "session.id", "when seq or ack is"},
	{"acquire: ack past seq", fence.AcquireRequest{Session: badAck, Name: "", TTL: time.Second}, "session.ack", "at most seq (2)"},
	{"acquire: name before owner", fence.AcquireRequest{Name: "", Owner: longOwn}, "name", "not empty"},
	{"acquire: owner before ttl", fence.AcquireRequest{Name: "a", Owner: longOwn}, "owner", "at most 256 bytes"},
	{"acquire: ttl absent, standalone", fence.AcquireRequest{Name: "a", Wait: -1}, "ttl", "set (between 10ms and 1h0m0s) unless the acquire is bound to a session"},
	{"acquire: ttl with a session", fence.AcquireRequest{Name: "a", Session: sess, TTL: time.Second, Wait: -1}, "ttl", "absent for a lease bound to a session"},
	{"acquire: ttl below the least", fence.AcquireRequest{Name: "a", TTL: time.Millisecond, Wait: -1}, "ttl", "at least 10ms"},
	{"acquire: ttl above the limit", fence.AcquireRequest{Name: "a", TTL: 2 * time.Hour, Wait: -1}, "ttl", "at most 1h0m0s"},
	{"acquire: wait before lock_delay", fence.AcquireRequest{Name: "a", TTL: time.Second, Wait: -1, LockDelay: -1}, "wait", "at least 0s"},
	{"acquire: wait above the largest", fence.AcquireRequest{Name: "a", TTL: time.Second, Wait: fence.MaxWait + 1}, "wait", "at most 24h0m0s"},
	{"acquire: lock_delay before request_id", fence.AcquireRequest{Name: "a", TTL: time.Second, LockDelay: fence.MaxLockDelay + 1, RequestID: longID}, "lock_delay", "at most 24h0m0s"},
	{"acquire: lock_delay negative", fence.AcquireRequest{Name: "a", TTL: time.Second, LockDelay: -1}, "lock_delay", "at least 0s"},
	{"acquire: request_id", fence.AcquireRequest{Name: "a", TTL: time.Second, RequestID: longID}, "request_id", "at most 256 bytes"},
	{"acquire: request_id not UTF-8", fence.AcquireRequest{Name: "a", TTL: time.Second, RequestID: "\xff"}, "request_id", "valid UTF-8"},

	{"renew: session before name", fence.RenewRequest{Session: badSeq}, "session.id", ""},
	{"renew: name before token", fence.RenewRequest{Name: long}, "name", "at most 512 bytes"},
	{"renew: token before ttl", fence.RenewRequest{Name: "a", TTL: time.Millisecond}, "token", "at least 1"},
	{"renew: ttl", fence.RenewRequest{Name: "a", Token: 1, TTL: 2 * time.Hour}, "ttl", "at most 1h0m0s"},

	{"release: session before name", fence.ReleaseRequest{Session: badAck}, "session.ack", ""},
	{"release: name before token", fence.ReleaseRequest{Name: "\xff"}, "name", "valid UTF-8"},
	{"release: token", fence.ReleaseRequest{Name: "a", Token: fence.MaxTokenJSONInt + 1}, "token", "at most 9007199254740991"},

	{"list: prefix before limit", fence.ListRequest{Prefix: long, After: long}, "prefix", "at most 512 bytes"},
	{"list: limit before after", fence.ListRequest{After: long}, "limit", "1 or more"},
	{"list: after", fence.ListRequest{Limit: 1, After: long}, "after", "at most 512 bytes"},

	{"write: session before resource", fence.WriteRequest{Session: badSeq, Value: tooLarge}, "session.id", ""},
	{"write: resource before token", fence.WriteRequest{Value: tooLarge}, "resource", "not empty"},
	{"write: token before value", fence.WriteRequest{Resource: "r", Value: tooLarge, OpID: longID}, "token", ""},
	{"write: value before op_id", fence.WriteRequest{Resource: "r", Token: 1, Value: tooLarge, OpID: longID}, "value", "at most 1048576 bytes"},
	{"write: op_id", fence.WriteRequest{Resource: "r", Token: 1, OpID: longID}, "op_id", "at most 256 bytes"},

	{"add: session before resource", fence.AddRequest{Session: badSeq}, "session.id", ""},
	{"add: resource before token", fence.AddRequest{OpID: longID}, "resource", ""},
	{"add: token before op_id", fence.AddRequest{Resource: "r", OpID: longID}, "token", ""},
	{"add: op_id", fence.AddRequest{Resource: "r", Token: 1, OpID: "\xff"}, "op_id", "valid UTF-8"},

	{"delete: session before resource", fence.DeleteRequest{Session: badSeq}, "session.id", ""},
	{"delete: resource before token", fence.DeleteRequest{OpID: longID}, "resource", ""},
	{"delete: token before op_id", fence.DeleteRequest{Resource: "r", OpID: longID}, "token", ""},
	{"delete: op_id", fence.DeleteRequest{Resource: "r", Token: 1, OpID: longID}, "op_id", ""},

	{"open: ttl absent before request_id", fence.OpenSessionRequest{RequestID: longID}, "ttl", "set (between 10ms and 1h0m0s)"},
	{"open: ttl above the limit", fence.OpenSessionRequest{TTL: 2 * time.Hour}, "ttl", "at most 1h0m0s"},
	// A request that may be a retry leaves the rules' bounds to the store
	// (after its id lookup), not the format's.
	{"open with request_id: ttl above the format", fence.OpenSessionRequest{TTL: fence.LongestMaxTTL + 1, RequestID: "r"}, "ttl", "at most " + fence.LongestMaxTTL.String()},
	{"acquire with request_id: ttl above the format", fence.AcquireRequest{Name: "a", TTL: fence.LongestMaxTTL + 1, RequestID: "r"}, "ttl", "at most " + fence.LongestMaxTTL.String()},
	{"acquire with request_id: lock_delay above the format", fence.AcquireRequest{Name: "a", TTL: time.Second, LockDelay: fence.MaxLockDelay + 1, RequestID: "r"}, "lock_delay", "at most " + fence.MaxLockDelay.String()},
	{"open: request_id", fence.OpenSessionRequest{TTL: time.Second, RequestID: longID}, "request_id", ""},

	{"keepalive: two sessions", fence.KeepAliveRequest{ID: 1, Session: fence.SessionRef{ID: 2, Seq: 1, Ack: 5}, TTL: time.Millisecond}, "session_ref.id", "0 or session (1)"},
	{"keepalive: ack past seq before ttl", fence.KeepAliveRequest{ID: 1, Session: fence.SessionRef{Seq: 1, Ack: 5}, TTL: time.Millisecond}, "session_ref.ack", "at most seq (1)"},
	{"keepalive: seq without a session", fence.KeepAliveRequest{Session: fence.SessionRef{Seq: 1}}, "session", "when seq or ack is"},
	{"keepalive: session before ttl", fence.KeepAliveRequest{TTL: time.Millisecond}, "session", "set (the id SessionService.Open returned)"},
	{"keepalive: ttl", fence.KeepAliveRequest{Session: fence.SessionRef{ID: 1}, TTL: time.Millisecond}, "ttl", "at least 10ms"},

	{"close: two sessions", fence.CloseSessionRequest{ID: 1, Session: fence.SessionRef{ID: 2}}, "session_ref.id", ""},
	{"close: session", fence.CloseSessionRequest{}, "session", "set (the id SessionService.Open returned)"},
}

// TestValidateOrder: each request names its first bad field, in its
// documented order, with the bound.
func TestValidateOrder(t *testing.T) {
	for _, c := range orderCases {
		err := c.req.Validate(limits)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%s: %v, want *fence.InvalidError", c.name, err)
			continue
		}
		if inv.Field != c.want || !strings.Contains(inv.Bound, c.bound) {
			t.Errorf("%s: refused %q (bound %q), want %q with a bound holding %q", c.name, inv.Field, inv.Bound, c.want, c.bound)
		}
	}
}

// TestValidateAccepts: good requests pass, at the bounds.
func TestValidateAccepts(t *testing.T) {
	for _, r := range []validator{
		fence.AcquireRequest{Name: "a", TTL: time.Hour, Wait: fence.MaxWait, LockDelay: fence.MaxLockDelay, RequestID: "r"},
		fence.AcquireRequest{Name: "a", TTL: fence.MinTTL},
		fence.AcquireRequest{Name: "a", Session: fence.SessionRef{ID: 1, Seq: 3, Ack: 3}},
		fence.RenewRequest{Name: "a", Token: 1},
		fence.ReleaseRequest{Name: "a", Token: fence.MaxTokenJSONInt},
		fence.ListRequest{Limit: 1},
		fence.WriteRequest{Resource: "r", Token: 1, Value: make([]byte, fence.MaxValueBytes)},
		fence.AddRequest{Resource: "r", Token: 1, Delta: -1},
		fence.DeleteRequest{Resource: "r", Token: 1},
		fence.OpenSessionRequest{TTL: time.Hour},
		// Above the rules' bounds but possibly a retry: the store judges
		// it after its id lookup.
		fence.AcquireRequest{Name: "a", TTL: 2 * time.Hour, LockDelay: fence.MaxLockDelay, RequestID: "r"},
		fence.AcquireRequest{Name: "a", LockDelay: fence.MaxLockDelay, Session: fence.SessionRef{ID: 1, Seq: 3, Ack: 3}},
		fence.OpenSessionRequest{TTL: 2 * time.Hour, RequestID: "r"},
		fence.KeepAliveRequest{ID: 1, Session: fence.SessionRef{ID: 1, Seq: 2, Ack: 1}},
		fence.KeepAliveRequest{Session: fence.SessionRef{ID: 1}},
		fence.CloseSessionRequest{ID: 1},
	} {
		if err := r.Validate(limits); err != nil {
			t.Errorf("%+v: %v, want accepted", r, err)
		}
	}
}

// TestValidateZeroLimits: the zero Limits (a client's) checks no upper
// TTL bound and states the range it does check.
func TestValidateZeroLimits(t *testing.T) {
	if err := (fence.AcquireRequest{Name: "a", TTL: fence.LongestMaxTTL * 2}).Validate(fence.Limits{}); err != nil {
		t.Errorf("a ttl past every store's bound: %v, want it left to the server", err)
	}
	err := (fence.OpenSessionRequest{}).Validate(fence.Limits{})
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || inv.Field != "ttl" || inv.Bound != "set (at least 10ms)" {
		t.Errorf("an open without a ttl: %v, want ttl refused as set (at least 10ms)", err)
	}
}

// TestValidateWireChecks: a wire check is judged in its field's place: it
// wins over the fields after it, not over those before, and one with no
// error skips the field's own check.
func TestValidateWireChecks(t *testing.T) {
	wireErr := fence.Invalid("ttl", "a valid duration", "")
	req := fence.AcquireRequest{Name: "a", TTL: time.Second, LockDelay: -1}
	if err := req.Validate(limits, fence.FieldCheck{Field: "ttl", Err: wireErr}); err != wireErr {
		t.Errorf("a wire check on ttl before a bad lock_delay: %v, want the wire check", err)
	}
	req.Name = ""
	var inv *fence.InvalidError
	if err := req.Validate(limits, fence.FieldCheck{Field: "ttl", Err: wireErr}); !errors.As(err, &inv) || inv.Field != "name" {
		t.Errorf("a wire check on ttl after a bad name: %v, want name", err)
	}
	bad := fence.AcquireRequest{Name: "a", Session: badSeq}
	if err := bad.Validate(limits, fence.FieldCheck{Field: "session_ref"}); !errors.As(err, &inv) || inv.Field != "ttl" {
		t.Errorf("the session binding judged by the transport: %v, want the next bad field (ttl)", err)
	}
}
