package state

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

const sec = int64(time.Second)

// at is server time t seconds.
func at(t float64) int64 { return int64(t * float64(time.Second)) }

func acq(now int64, name, owner string, ttl time.Duration) Command {
	return Command{Op: OpAcquire, Now: now, Name: name, Owner: owner, TTL: ttl}
}

func waitAcq(now int64, name, owner string, ttl, wait time.Duration, rid string) Command {
	return Command{Op: OpAcquire, Now: now, Name: name, Owner: owner, TTL: ttl, Wait: wait, RequestID: rid}
}

func renew(now int64, name string, tok fence.Token, ttl time.Duration) Command {
	return Command{Op: OpRenew, Now: now, Name: name, Token: tok, TTL: ttl}
}

func rel(now int64, name string, tok fence.Token) Command {
	return Command{Op: OpRelease, Now: now, Name: name, Token: tok}
}

func tick(now int64) Command { return Command{Op: OpTick, Now: now} }

func write(now int64, res string, tok fence.Token, v, op string) Command {
	return Command{Op: OpWrite, Now: now, Name: res, Token: tok, Value: []byte(v), OpID: op}
}

func add(now int64, res string, tok fence.Token, d int64, op string) Command {
	return Command{Op: OpAdd, Now: now, Name: res, Token: tok, Delta: d, OpID: op}
}

// mustGrant applies c and fails unless it granted a lease with token want.
func mustGrant(t *testing.T, m *Machine, c Command, want fence.Token) *fence.Lease {
	t.Helper()
	r := m.Apply(c)
	if r.Err != nil || r.Lease == nil {
		t.Fatalf("%+v: want a grant, got err=%v queued=%v", c, r.Err, r.Queued)
	}
	if r.Lease.Token != want {
		t.Fatalf("%+v: token %d, want %d", c, r.Lease.Token, want)
	}
	return r.Lease
}

// mustOK applies c and fails on an error.
func mustOK(t *testing.T, m *Machine, c Command) Result {
	t.Helper()
	r := m.Apply(c)
	if r.Err != nil {
		t.Fatalf("%+v: %v", c, r.Err)
	}
	return r
}

// errAs fails unless err is an E and returns it.
func errAs[E error](t *testing.T, err error) E {
	t.Helper()
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want %T", err, err, e)
	}
	return e
}

// describe renders a result for comparison (errors by message, leases by
// value).
func describe(r Result) string {
	s := fmt.Sprintf("err=%v queued=%v replayed=%v add=%d attempt=%d", r.Err, r.Queued, r.Replayed, r.AddValue, r.Attempt)
	if r.Lease != nil {
		s += fmt.Sprintf(" lease=%+v", *r.Lease)
	}
	if r.Resource != nil {
		s += fmt.Sprintf(" resource=%q/%q/%d/%d/deleted=%v", r.Resource.Resource, r.Resource.Value, r.Resource.LastToken, r.Resource.Version, r.Resource.Deleted)
	}
	if r.Session != nil {
		s += fmt.Sprintf(" session=%+v", *r.Session)
	}
	for _, e := range r.Events {
		s += fmt.Sprintf(" event=%s#%d/%v", e.RequestID, e.Attempt, e.Err)
		if e.Lease != nil {
			s += fmt.Sprintf("/%+v", *e.Lease)
		}
	}
	return s
}

// uncapped is a rule set with no caps, ids forgotten by count at any age
// (MinIDRetention 0) and the largest MaxTTL: what the reference model
// implements.
func uncapped() Config {
	return Config{MaxTTL: fence.LongestMaxTTL, MaxOps: 100_000, MaxRequests: 100_000, IDRetention: 24 * time.Hour}
}

// only is l's one holder, nil when it has none or several.
func (l *lockEntry) only() *grant {
	if len(l.holders) == 1 {
		return l.holders[0]
	}
	return nil
}
