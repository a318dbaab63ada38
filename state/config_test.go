package state

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// Fault 1 (G1 broken by a flag): A holds "a" with a 2h TTL (token 1), B
// holds "b" (token 2); the operator lowers the largest TTL to 1h. The
// lowered bound is an OpConfig in the log: the held lease stays, the counter
// does not move, and only later acquires see the new bound.
func TestLoweredMaxTTLKeepsAcknowledgedLeases(t *testing.T) {
	cfg := DefaultConfig()
	log := []Command{
		{Op: OpConfig, Now: at(0), Config: cfg},
		acq(at(1), "a", "A", 2*time.Hour),
		acq(at(2), "b", "B", time.Minute),
	}
	lower := cfg
	lower.MaxTTL = time.Hour
	log = append(log, Command{Op: OpConfig, Now: at(3), Config: lower})

	m := New()
	for _, c := range log {
		mustOK(t, m, c)
	}
	if m.Config() != lower {
		t.Fatalf("config %+v, want %+v", m.Config(), lower)
	}
	if li := m.Lock("a", at(3)); li.Lease == nil || li.Lease.Token != 1 || li.Lease.TTL != 2*time.Hour {
		t.Fatalf("a after the lower bound: %+v", li)
	}
	if li := m.Lock("b", at(3)); li.Lease == nil || li.Lease.Token != 2 {
		t.Fatalf("b after the lower bound: %+v", li)
	}
	if m.LastToken() != 2 {
		t.Fatalf("counter %d, want 2", m.LastToken())
	}
	e := errAs[*fence.InvalidError](t, m.Apply(acq(at(4), "c", "C", 2*time.Hour)).Err)
	if e.Field != "ttl" || e.Bound != "at most 1h0m0s" {
		t.Fatalf("refusal %+v, want ttl at most 1h", e)
	}
	// A's 2h lease keeps its remaining time, but a renewal is cut to the
	// new bound, even one asking for the lease's own TTL (TTL 0): else a
	// lease granted under the old bound would be renewed above the new
	// one forever. Asking for more than the bound is refused.
	if li := m.Lock("a", at(5)); li.Lease.Remaining != 2*time.Hour-4*time.Second {
		t.Fatalf("a before its renewal: %+v", li.Lease)
	}
	if r := mustOK(t, m, renew(at(5), "a", 1, 0)); r.Lease.TTL != time.Hour || r.Lease.Remaining != time.Hour {
		t.Fatalf("renew with TTL 0 above the lowered bound: %+v, want TTL and remaining 1h", r.Lease)
	}
	errAs[*fence.InvalidError](t, m.Apply(renew(at(5), "a", 1, 90*time.Minute)).Err)
	if r := mustOK(t, m, renew(at(5), "a", 1, 0)); r.Lease.TTL != time.Hour {
		t.Fatalf("second renewal: %+v", r.Lease)
	}
	mustOK(t, m, tick(at(5)+int64(time.Hour)))
	if li := m.Lock("a", at(5)+int64(time.Hour)); li.Lease != nil {
		t.Fatalf("a renewed past the lowered bound: %+v", li.Lease)
	}
	mustGrant(t, m, acq(at(6), "c", "C", time.Hour), 3)
	log = append(log, renew(at(5), "a", 1, 0))

	// Replaying the same log gives the same state whatever a process was
	// started with: the machine's decisions depend only on the log.
	want := snapshotBytes(t, replay(t, New(), log))
	for _, start := range []Config{{MaxTTL: time.Hour}, {MaxTTL: 30 * time.Minute, MaxOps: 3}, {MaxTTL: 48 * time.Hour}, DefaultConfig()} {
		got := snapshotBytes(t, replay(t, NewWithConfig(start), log))
		if !bytes.Equal(got, want) {
			t.Fatalf("replay from %+v differs:\n%s\n%s", start, got, want)
		}
	}
}

func replay(t *testing.T, m *Machine, log []Command) *Machine {
	t.Helper()
	for _, c := range log {
		mustOK(t, m, c)
	}
	return m
}

func TestOpConfigRefusesNonsense(t *testing.T) {
	ok := DefaultConfig()
	cases := []struct {
		field string
		f     func(*Config)
	}{
		{"config.max_ttl", func(c *Config) { c.MaxTTL = 0 }},
		{"config.max_ttl", func(c *Config) { c.MaxTTL = fence.LongestMaxTTL + 1 }},
		{"config.max_ops", func(c *Config) { c.MaxOps = 0 }},
		{"config.max_ops", func(c *Config) { c.MaxOps = MaxIDMemory + 1 }},
		{"config.max_requests", func(c *Config) { c.MaxRequests = -1 }},
		{"config.id_retention", func(c *Config) { c.IDRetention = time.Millisecond }},
		{"config.id_retention", func(c *Config) { c.IDRetention = LongestRetention + 1 }},
		{"config.min_id_retention", func(c *Config) { c.MinIDRetention = -1 }},
		{"config.min_id_retention", func(c *Config) { c.MinIDRetention = c.IDRetention + 1 }},
		{"config.max_waiters_per_lock", func(c *Config) { c.MaxWaitersPerLock = -1 }},
		{"config.max_waiters", func(c *Config) { c.MaxWaiters = -1 }},
		{"config.max_resources", func(c *Config) { c.MaxResources = -1 }},
		{"config.max_resource_bytes", func(c *Config) { c.MaxResourceBytes = -1 }},
		{"config.max_locks", func(c *Config) { c.MaxLocks = -1 }},
		{"config.max_lock_delay", func(c *Config) { c.MaxLockDelay = -1 }},
		{"config.max_lock_delay", func(c *Config) { c.MaxLockDelay = fence.MaxLockDelay + 1 }},
	}
	for _, tc := range cases {
		c := ok
		tc.f(&c)
		m := New()
		before := snapshotBytes(t, m)
		r := m.Apply(Command{Op: OpConfig, Config: c})
		e := errAs[*fence.InvalidError](t, r.Err)
		if e.Field != tc.field || e.Bound == "" || !errors.Is(c.Validate(), fence.ErrInvalid) {
			t.Errorf("%+v: %+v, want field %s", c, e, tc.field)
		}
		if !bytes.Equal(before, snapshotBytes(t, m)) || m.Config() != DefaultConfig() {
			t.Errorf("%s: a refused OpConfig changed the machine", tc.field)
		}
	}
	for _, c := range []Config{DefaultConfig(), uncapped()} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// The config is in the snapshot; a snapshot without a valid config, or of
// another format, is refused.
func TestSnapshotCarriesConfig(t *testing.T) {
	m := New()
	c := DefaultConfig()
	c.MaxTTL, c.MaxLockDelay = time.Hour, 90*time.Second
	mustOK(t, m, Command{Op: OpConfig, Config: c})
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	n := NewWithConfig(Config{MaxTTL: 48 * time.Hour})
	if err := n.Restore(&b); err != nil {
		t.Fatal(err)
	}
	if n.Config() != c {
		t.Fatalf("restored config %+v, want %+v", n.Config(), c)
	}
	old := Config{MaxTTL: time.Minute, MaxOps: 1, MaxRequests: 1, IDRetention: time.Second}
	for name, h := range map[string]*statepb.SnapshotHeader{
		"invalid config": emptySnapHeader(&Config{MaxTTL: 1}),
		"no config":      emptySnapHeader(nil),
		"format 3":       {Format: "fence-state/3", Config: configPB(old)},
		"max_ttl 0":      emptySnapHeader(&Config{MaxOps: 1, MaxRequests: 1, IDRetention: time.Second}),
	} {
		if err := New().Restore(bytes.NewReader(encodeSnap(h))); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v, want ErrBadSnapshot", name, err)
		}
	}
	if err := New().Restore(bytes.NewReader(encodeSnap(emptySnapHeader(&old)))); err != nil {
		t.Fatalf("the same header with a valid config: %v", err)
	}
}

// WithRequiredFrom takes exactly the four fields that cannot be zero from
// its argument, and only where they are zero: a set field and a zero cap
// ("no cap") are kept.
func TestWithRequiredFrom(t *testing.T) {
	d := DefaultConfig()
	if got, want := (Config{}).WithRequiredFrom(d), (Config{MaxTTL: d.MaxTTL, MaxOps: d.MaxOps, MaxRequests: d.MaxRequests, IDRetention: d.IDRetention}); got != want {
		t.Fatalf("zero config = %+v, want %+v", got, want)
	}
	set := Config{MaxTTL: time.Hour, MaxOps: 7, MaxRequests: 8, IDRetention: time.Minute, MaxLocks: 3}
	if got := set.WithRequiredFrom(d); got != set {
		t.Fatalf("set config = %+v, want it unchanged", got)
	}
	if got := (Config{}).withDefaults(); got != (Config{}).WithRequiredFrom(d) {
		t.Fatalf("withDefaults of the zero config = %+v", got)
	}
	if got := NewWithConfig(Config{}).Config(); got != (Config{}).WithRequiredFrom(d) {
		t.Fatalf("NewWithConfig of the zero config: %+v", got)
	}
}
