package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/testutil"
)

func openRules(t *testing.T, dir string, rules state.Config) *Node {
	t.Helper()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(), Rules: rules})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// Fault 1: the rules are in the log, not in the flags. A restart with a
// lower MaxTTL replays the log as it was decided: the 2h lease granted
// under MaxTTL 24h is still held with its token, the counter does not fall
// back; only later acquires see the new bound.
func TestLowerMaxTTLAfterRestartKeepsLeases(t *testing.T) {
	dir := t.TempDir()
	n := openRules(t, dir, withMaxTTL(24*time.Hour))
	if got := n.Rules().MaxTTL; got != 24*time.Hour {
		t.Fatalf("recorded MaxTTL = %s, want the configured 24h", got)
	}
	a := mustApply(t, n, acquire("a", 2*time.Hour)).Lease
	b := mustApply(t, n, acquire("b", time.Minute)).Lease
	if a.Token != 1 || b.Token != 2 {
		t.Fatalf("tokens %d, %d; want 1, 2", a.Token, b.Token)
	}
	n.Close()

	n = openRules(t, dir, withMaxTTL(time.Hour))
	if got := n.Rules().MaxTTL; got != time.Hour {
		t.Fatalf("recorded MaxTTL after restart = %s, want the new 1h", got)
	}
	ctx := context.Background()
	for _, want := range []*fence.Lease{a, b} {
		li, err := n.Lock(ctx, want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if li.Lease == nil || li.Lease.Token != want.Token {
			t.Fatalf("lock %s after restart = %+v, want held with token %d", want.Name, li, want.Token)
		}
	}
	if c := mustApply(t, n, acquire("c", time.Minute)).Lease; c.Token != 3 {
		t.Fatalf("next grant = %d, want 3", c.Token)
	}
	res, err := n.Apply(ctx, acquire("d", 2*time.Hour))
	var inv *fence.InvalidError
	if err != nil || !errors.As(res.Err, &inv) || inv.Field != "ttl" {
		t.Fatalf("2h acquire under MaxTTL 1h = %+v, %v; want invalid ttl", res, err)
	}
}

// A node refuses to open with rules out of bounds, naming the field.
func TestInvalidRulesRefused(t *testing.T) {
	_, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), Rules: state.Config{MaxTTL: fence.LongestMaxTTL + time.Hour}})
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || inv.Field != "config.max_ttl" {
		t.Fatalf("Open with MaxTTL over fence.LongestMaxTTL = %v, want invalid config.max_ttl", err)
	}
}

// configEntries counts the OpConfig commands in the log from index from.
func configEntries(t *testing.T, n *Node, from uint64) int {
	t.Helper()
	last, err := n.log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for i := from; i <= last; i++ {
		var l raft.Log
		if err := n.log.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := decodeEntry(l.Data)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		for _, cmd := range cmds {
			if cmd.Op == state.OpConfig {
				k++
			}
		}
	}
	return k
}

// The first start records the rules (one OpConfig); a restart with the
// same rules proposes none; a restart with other rules proposes one.
func TestRulesProposedOnlyWhenTheyDiffer(t *testing.T) {
	dir := t.TempDir()
	n := openRules(t, dir, state.Config{})
	if got := n.Rules(); got != state.DefaultConfig() {
		t.Fatalf("recorded rules = %+v, want state.DefaultConfig()", got)
	}
	if k := configEntries(t, n, 1); k != 1 {
		t.Fatalf("%d OpConfig entries after the first start, want 1", k)
	}
	from := n.raft.LastIndex() + 1
	n.Close()
	n = openRules(t, dir, state.Config{})
	if k := configEntries(t, n, from); k != 0 {
		t.Fatalf("%d OpConfig entries after a restart with the same rules, want 0", k)
	}
	from = n.raft.LastIndex() + 1
	n.Close()
	n = openRules(t, dir, func() state.Config { c := state.DefaultConfig(); c.MaxWaitersPerLock = 7; return c }())
	if k := configEntries(t, n, from); k != 1 {
		t.Fatalf("%d OpConfig entries after a restart with other rules, want 1", k)
	}
	if got := n.Rules().MaxWaitersPerLock; got != 7 {
		t.Fatalf("recorded MaxWaitersPerLock = %d, want 7", got)
	}
}

func withMaxTTL(d time.Duration) state.Config {
	c := state.DefaultConfig()
	c.MaxTTL = d
	return c
}

// The zero Rules are state.DefaultConfig; in other Rules a zero cap means
// no cap, as in state.Config (fence serve's "0: no cap").
func TestRulesDefaults(t *testing.T) {
	if got := withDefaultRules(state.Config{}); got != state.DefaultConfig() {
		t.Fatalf("zero rules = %+v, want DefaultConfig", got)
	}
	got := withDefaultRules(state.Config{MaxTTL: time.Hour})
	if got.MaxTTL != time.Hour || got.MaxOps != state.DefaultConfig().MaxOps || got.MaxWaitersPerLock != 0 {
		t.Fatalf("rules with only MaxTTL = %+v, want MaxTTL 1h, default id memory, no waiter cap", got)
	}
	if c := (Config{MaxTTL: time.Hour}).withDefaults(); c.Rules.MaxTTL != time.Hour || c.Rules.MaxWaitersPerLock != state.DefaultConfig().MaxWaitersPerLock {
		t.Fatalf("Config.MaxTTL alone gives rules %+v, want DefaultConfig with MaxTTL 1h", c.Rules)
	}
}

// A log that never recorded rules gets an OpConfig even when the operator's
// rules equal the machine's initial ones (state.DefaultConfig): the log,
// not a constant of the binary, holds the rules in force.
func TestRulesRecordedEvenWhenEqualToInitial(t *testing.T) {
	dir := t.TempDir()
	n := openRules(t, dir, state.DefaultConfig())
	if k := configEntries(t, n, 1); k != 1 {
		t.Fatalf("%d OpConfig entries after a first start with DefaultConfig rules, want 1", k)
	}
	var configured bool
	n.fsm.read(func(m *state.Machine) { configured = m.Configured() })
	if !configured {
		t.Fatal("machine not configured after the first start: the log holds no rules")
	}
}

// The log says what happens to the rules: a fresh data dir records them
// ("recording the configured rules", not "the recorded ones differ": none
// are recorded); a restart with the same rules says nothing; with other
// rules, "proposing the configured rules: the recorded ones differ".
func TestRulesLogLines(t *testing.T) {
	dir := t.TempDir()
	open := func(rules state.Config) string {
		t.Helper()
		var buf testutil.Buffer
		n, err := Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&buf, nil)), Rules: rules})
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		n.Close()
		return buf.String()
	}
	const recording, differ = `msg="recording the configured rules"`, "the recorded ones differ"
	if log := open(state.Config{}); !strings.Contains(log, recording) || strings.Contains(log, differ) {
		t.Fatalf("a fresh data dir's log: want %q and not %q:\n%s", recording, differ, log)
	}
	if log := open(state.Config{}); strings.Contains(log, recording) || strings.Contains(log, differ) {
		t.Fatalf("a restart with the same rules logs a rules line:\n%s", log)
	}
	if log := open(withMaxTTL(time.Hour)); strings.Contains(log, recording) || !strings.Contains(log, differ) {
		t.Fatalf("a restart with other rules: want %q and not %q:\n%s", differ, recording, log)
	}
}
