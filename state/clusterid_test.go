package state

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The first OpConfig carrying a cluster id records it; a later one never
// changes it (its rules still apply); it survives a snapshot; a command
// carrying one encodes as version 4 and decodes to itself.
func TestClusterIDRecordedOnceAndKept(t *testing.T) {
	m := New()
	if m.ClusterID() != "" {
		t.Fatalf("a new machine has cluster id %q", m.ClusterID())
	}
	cfg := DefaultConfig()
	mustOK(t, m, Command{Op: OpConfig, Now: sec, Config: cfg, ClusterID: "first-id"})
	if m.ClusterID() != "first-id" {
		t.Fatalf("cluster id %q, want first-id", m.ClusterID())
	}
	cfg2 := cfg
	cfg2.MaxOps = cfg.MaxOps + 1
	mustOK(t, m, Command{Op: OpConfig, Now: 2 * sec, Config: cfg2, ClusterID: "second-id"})
	if m.ClusterID() != "first-id" || m.Config() != cfg2 {
		t.Fatalf("after a second id: cluster id %q, config %+v; want first-id and the new rules", m.ClusterID(), m.Config())
	}
	mustOK(t, m, Command{Op: OpConfig, Now: 3 * sec, Config: cfg})
	if m.ClusterID() != "first-id" {
		t.Fatalf("an OpConfig without an id changed it to %q", m.ClusterID())
	}
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	if h, _ := snapMessages(t, b.Bytes()); string(h.ClusterId) != "first-id" {
		t.Fatalf("snapshot has no cluster id: %v", h)
	}
	r := New()
	if err := r.Restore(bytes.NewReader(b.Bytes())); err != nil || r.ClusterID() != "first-id" {
		t.Fatalf("restored: %q, %v", r.ClusterID(), err)
	}

	c := Command{Op: OpConfig, Now: 5, Config: cfg, ClusterID: "first-id"}
	enc, err := c.MarshalBinary()
	if err != nil {
		t.Fatalf("encoded %v, %v", enc, err)
	}
	var d Command
	if err := d.UnmarshalBinary(enc); err != nil || d.ClusterID != "first-id" || d.Config != cfg {
		t.Fatalf("decoded %+v, %v", d, err)
	}
}

// A cluster id on any other op, or not a valid id, is refused and changes
// nothing (an OpConfig with a bad id applies no rules either); a machine
// without one writes none.
func TestClusterIDRefusals(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	var inv *fence.InvalidError
	r := m.Apply(Command{Op: OpAcquire, Now: sec, Name: "a", Owner: "o", TTL: time.Second, ClusterID: "x"})
	if !errors.As(r.Err, &inv) || inv.Field != "cluster_id" || m.LastToken() != 0 {
		t.Fatalf("an acquire with a cluster id: %+v", r)
	}
	cfg := DefaultConfig()
	cfg.MaxOps++
	for _, id := range []string{"has space", strings.Repeat("a", MaxClusterIDBytes+1), "é"} {
		r = m.Apply(Command{Op: OpConfig, Now: sec, Config: cfg, ClusterID: id})
		if !errors.As(r.Err, &inv) || m.ClusterID() != "" || m.Config() == cfg {
			t.Fatalf("OpConfig with cluster id %q: %+v, id %q", id, r, m.ClusterID())
		}
	}
	var b bytes.Buffer
	m.Snapshot(&b)
	if strings.Contains(b.String(), "cluster_id") {
		t.Fatalf("a machine without an id writes one: %s", b.String())
	}
}

// A restore gives the machine a new, valid cluster id.
func TestSetRestoredClusterID(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: sec, Config: DefaultConfig(), ClusterID: "old"})
	if err := m.SetRestoredClusterID("bad id"); err == nil || m.ClusterID() != "old" {
		t.Fatalf("a bad id: %v, id %q", err, m.ClusterID())
	}
	if err := m.SetRestoredClusterID("new"); err != nil || m.ClusterID() != "new" {
		t.Fatalf("SetRestoredClusterID: %v, id %q", err, m.ClusterID())
	}
}
