package state

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestBounds(t *testing.T) {
	ok := Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Second}
	with := func(f func(*Command)) Command { c := ok; f(&c); return c }
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name  string
		cmd   Command
		field string
		bound string
	}{
		{"empty name", with(func(c *Command) { c.Name = "" }), "name", "not empty"},
		{"name over 512 bytes", with(func(c *Command) { c.Name = long(513) }), "name", "at most 512 bytes"},
		{"name not UTF-8", with(func(c *Command) { c.Name = "\xff" }), "name", "valid UTF-8"},
		{"owner over 256 bytes", with(func(c *Command) { c.Owner = long(257) }), "owner", "at most 256 bytes"},
		{"ttl below 10ms", with(func(c *Command) { c.TTL = 9 * time.Millisecond }), "ttl", "at least 10ms"},
		{"ttl zero", with(func(c *Command) { c.TTL = 0 }), "ttl", "at least 10ms"},
		{"ttl above max", with(func(c *Command) { c.TTL = 25 * time.Hour }), "ttl", "at most 24h0m0s"},
		{"wait negative", with(func(c *Command) { c.Wait = -1; c.RequestID = "r" }), "wait", "at least 0s"},
		{"wait above 24h", with(func(c *Command) { c.Wait = 25 * time.Hour; c.RequestID = "r" }), "wait", "at most 24h0m0s"},
		{"lock_delay negative", with(func(c *Command) { c.LockDelay = -1 }), "lock_delay", "at least 0s"},
		{"lock_delay above 24h", with(func(c *Command) { c.LockDelay = 25 * time.Hour }), "lock_delay", "at most 24h0m0s"},
		{"request_id over 256 bytes", with(func(c *Command) { c.RequestID = long(257) }), "request_id", "at most 256 bytes"},
		{"renew token 0", Command{Op: OpRenew, Name: "x"}, "token", "at least 1"},
		{"renew ttl below min", Command{Op: OpRenew, Name: "x", Token: 1, TTL: time.Millisecond}, "ttl", "at least 10ms"},
		{"release token 0", Command{Op: OpRelease, Name: "x"}, "token", "at least 1"},
		{"release empty name", Command{Op: OpRelease, Token: 1}, "name", "not empty"},
		{"cancel empty request_id", Command{Op: OpCancelWait, Name: "x"}, "request_id", "not empty"},
		{"write token 0", Command{Op: OpWrite, Name: "s"}, "token", "at least 1"},
		{"write token above 2^53", Command{Op: OpWrite, Name: "s", Token: 1 << 53}, "token", "at most 9007199254740991"},
		{"write empty resource", Command{Op: OpWrite, Token: 1}, "resource", "not empty"},
		{"write value over 1 MiB", Command{Op: OpWrite, Name: "s", Token: 1, Value: make([]byte, fence.MaxValueBytes+1)}, "value", "at most 1048576 bytes"},
		{"write op_id over 256 bytes", Command{Op: OpWrite, Name: "s", Token: 1, OpID: long(257)}, "op_id", "at most 256 bytes"},
		{"add token 0", Command{Op: OpAdd, Name: "s", Delta: 1}, "token", "at least 1"},
		{"bump token 0", Command{Op: OpBumpToken}, "token", "at least 1"},
		{"unknown op", Command{Op: 0}, "op", "a known operation (1..23)"},
		{"unknown op 99", Command{Op: 99}, "op", "a known operation (1..23)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewWithConfig(DefaultConfig())
			mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
			mustOK(t, m, write(0, "s", 1, "v", "op"))
			var before bytes.Buffer
			if err := m.Snapshot(&before); err != nil {
				t.Fatal(err)
			}
			r := m.Apply(tc.cmd)
			e := errAs[*fence.InvalidError](t, r.Err)
			if e.Field != tc.field || e.Bound != tc.bound {
				t.Fatalf("field %q bound %q, want %q %q", e.Field, e.Bound, tc.field, tc.bound)
			}
			var after bytes.Buffer
			if err := m.Snapshot(&after); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before.Bytes(), after.Bytes()) {
				t.Fatal("a refused command changed the state")
			}
		})
	}
}

func TestConfiguredMaxTTL(t *testing.T) {
	m := NewWithConfig(Config{MaxTTL: time.Minute})
	e := errAs[*fence.InvalidError](t, m.Apply(acq(0, "x", "A", 2*time.Minute)).Err)
	if e.Field != "ttl" || e.Bound != "at most 1m0s" {
		t.Fatalf("%+v", e)
	}
}

func TestBumpToken(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpBumpToken, Token: 100})
	mustGrant(t, m, acq(0, "x", "A", time.Second), 100)
	mustOK(t, m, Command{Op: OpBumpToken, Token: 50}) // never lowers
	mustGrant(t, m, acq(0, "y", "A", time.Second), 101)
}

func TestServerTimeNeverGoesBack(t *testing.T) {
	m := New()
	mustOK(t, m, tick(at(10)))
	mustGrant(t, m, acq(at(3), "x", "A", time.Second), 1)
	if m.Now() != at(10) {
		t.Fatalf("now %d", m.Now())
	}
	if l := m.Lock("x", at(10.5)).Lease; l == nil || l.Remaining != 500*time.Millisecond {
		t.Fatalf("lease counted from the command's stale time: %+v", l)
	}
}
