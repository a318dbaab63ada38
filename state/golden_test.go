package state

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// goldenCommands are one command of every op, and together every field of
// Command and of Config, at values that need several bytes.
func goldenCommands() []Command {
	all := Config{MaxTTL: time.Hour, MaxOps: 1000, MaxRequests: 2000, IDRetention: 24 * time.Hour, MinIDRetention: 3 * time.Minute,
		MaxWaitersPerLock: 16, MaxWaiters: 100, MaxResources: 50, MaxResourceBytes: 1 << 20, MaxLocks: 500, MaxSessions: 40, MaxSessionResults: 64}
	return []Command{
		{Op: OpAcquire, Now: 12345, Slack: 3 * time.Millisecond, Name: "sku-42", Owner: "worker-1", TTL: 5 * time.Second, Wait: time.Minute, LockDelay: time.Second, RequestID: "r-1"},
		{Op: OpAcquire, Now: 1, Name: "s-lock", Owner: "S", Wait: time.Second, Session: 7, Seq: 300, Ack: 299},
		{Op: OpRenew, Now: 2, Name: "sku-42", Token: 1 << 40, TTL: 10 * time.Second},
		{Op: OpRelease, Now: 3, Name: "sku-42", Token: math.MaxUint64},
		{Op: OpCancelWait, Now: 4, Name: "sku-42", RequestID: "\xff\x00", Attempt: math.MaxUint32},
		{Op: OpTick, Now: -1},
		{Op: OpWrite, Now: 5, Name: "stock", Token: 2, Value: []byte("8\x00\xff"), OpID: "op-w"},
		{Op: OpAdd, Now: 6, Name: "n", Token: 2, Delta: math.MinInt64, OpID: "op-a"},
		{Op: OpBumpToken, Now: 7, Token: 1 << 53},
		{Op: OpConfig, Now: 8, Config: all, ClusterID: "6ba7b810-9dad-11d1-80b4-00c04fd430c8"},
		{Op: OpDelete, Now: 9, Name: "stock", Token: 3, OpID: "op-d"},
		{Op: OpSessionOpen, Now: 10, TTL: 10 * time.Second, RequestID: "open-1"},
		{Op: OpSessionKeepAlive, Now: 11, Session: 1, TTL: time.Minute},
		{Op: OpSessionClose, Now: 12, Session: math.MaxUint64, Seq: 3, Ack: 2},
		// Authentication (ops 14..19, fields 20..23): appended, so the
		// lines above are the bytes they always were.
		{Op: OpAuthBootstrap, Now: 13, Name: "0123456789abcdef", Value: bytes.Repeat([]byte{0xab}, 32), Attempt: 1},
		{Op: OpAuthEnable, Now: 14, Delta: 1, Principal: "token:0123456789abcdef", Admin: true},
		{Op: OpTokenCreate, Now: 15, Name: "fedcba9876543210", Value: bytes.Repeat([]byte{0xcd}, 32), Owner: "billing", Roles: []string{"app", "ops"}, TTL: time.Hour, Admin: true},
		{Op: OpTokenRevoke, Now: 16, Name: "fedcba9876543210", Admin: true},
		{Op: OpRoleGrant, Now: 17, Name: "app", Perms: []Permission{{PermLock, "jobs/"}, {PermRead, ""}}, Admin: true},
		{Op: OpRoleRevoke, Now: 18, Name: "app", Perms: []Permission{{PermRead, ""}}, Admin: true},
		{Op: OpAcquire, Now: 19, Name: "jobs/x", Owner: "w", TTL: time.Second, Principal: "token:fedcba9876543210"},
		{Op: OpRoleBind, Now: 20, Name: "app", Owner: "spiffe://example.org/worker", Delta: 1, Admin: true},
	}
}

// TestCommandsGolden pins the v1 command encoding: every command of
// goldenCommands, encoded, is compared byte for byte with
// testdata/commands.golden (one "op<TAB>hex" line each), and each line
// decodes back to its command. A changed encoding fails here: a log
// written by a released binary must decode to the same commands.
func TestCommandsGolden(t *testing.T) {
	var b strings.Builder
	cmds := goldenCommands()
	for _, c := range cmds {
		enc, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		fmt.Fprintf(&b, "%d\t%s\n", c.Op, hex.EncodeToString(enc))
	}
	golden(t, "commands.golden", []byte(b.String()))

	lines := strings.Split(strings.TrimSuffix(readGolden(t, "commands.golden"), "\n"), "\n")
	if len(lines) != len(cmds) {
		t.Fatalf("%d golden lines, want %d", len(lines), len(cmds))
	}
	ops := map[Op]bool{}
	for i, line := range lines {
		_, h, _ := strings.Cut(line, "\t")
		enc, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		var d Command
		if err := d.UnmarshalBinary(enc); err != nil || !sameCommand(d, cmds[i]) || !bytes.Equal(d.Value, cmds[i].Value) {
			t.Fatalf("line %d decodes to %+v (%v), want %+v", i+1, d, err, cmds[i])
		}
		ops[d.Op] = true
	}
	for op := OpAcquire; op <= OpRoleBind; op++ {
		if !ops[op] {
			t.Errorf("op %d has no golden command", op)
		}
	}
}

// goldenMachine has something in every part of a snapshot: a held lock
// with a waiter, a delayed lock, an idle tombstone, remembered request and
// op ids, live and deleted resources, a session holding a lease with saved
// results (a grant, a refusal and an add), recorded rules with a lowered
// minimum retention still held, a cluster id and some slack.
func goldenMachine(t *testing.T) *Machine {
	m := New()
	cfg := DefaultConfig()
	cfg.MinIDRetention = time.Minute
	for _, c := range []Command{
		{Op: OpConfig, Now: sec, Config: DefaultConfig(), ClusterID: "golden-cluster"},
		{Op: OpConfig, Now: sec, Config: cfg},
		{Op: OpAcquire, Now: 2 * sec, Name: "held", Owner: "A", TTL: time.Minute, RequestID: "r-held"},
		{Op: OpAcquire, Now: 2 * sec, Name: "held", Owner: "B", TTL: time.Second, Wait: time.Minute, RequestID: "r-wait"},
		{Op: OpAcquire, Now: 2 * sec, Name: "delayed", Owner: "A", TTL: time.Second, LockDelay: time.Hour},
		{Op: OpAcquire, Now: 2 * sec, Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"},
		{Op: OpRelease, Now: 2 * sec, Name: "idle", Token: 3},
		{Op: OpWrite, Now: 2 * sec, Name: "s", Token: 1, Value: []byte("9"), OpID: "w"},
		{Op: OpAdd, Now: 2 * sec, Name: "n", Token: 1, Delta: 2, OpID: "a"},
		{Op: OpWrite, Now: 2 * sec, Name: "gone", Token: 1, Value: []byte("x")},
		{Op: OpDelete, Now: 2 * sec, Name: "gone", Token: 1, OpID: "d"},
		{Op: OpSessionOpen, Now: 3 * sec, TTL: 10 * time.Second, RequestID: "open-1"},
		{Op: OpAcquire, Now: 3 * sec, Name: "s-lock", Owner: "S", Session: 1, Seq: 1},
		{Op: OpAcquire, Now: 3 * sec, Name: "held", Owner: "S", Session: 1, Seq: 2},
		{Op: OpAdd, Now: 3 * sec, Name: "n", Token: 4, Delta: 1, Session: 1, Seq: 3},
		{Op: OpTick, Now: 4 * sec, Slack: time.Millisecond},
	} {
		if r := m.Apply(c); r.Err != nil && c.Seq != 2 {
			t.Fatalf("%+v: %v", c, r.Err)
		}
	}
	return m
}

// TestSnapshotGolden pins the v1 snapshot bytes: goldenMachine's snapshot
// is compared byte for byte with testdata/snapshot.golden (one line per
// message: its kind and its length-prefixed bytes in hex), and that file
// restores to a machine that writes it again and answers as the original
// (a saved refusal replays with every field).
func TestSnapshotGolden(t *testing.T) {
	m := goldenMachine(t)
	got := snapshotBytes(t, m)
	h, recs := snapMessages(t, got)
	has := map[string]bool{"cluster id": string(h.ClusterId) == "golden-cluster", "keep_min": h.KeepMin != 0}
	for _, r := range recs {
		if l := r.GetLock(); len(l.GetQueue()) > 0 {
			has["queue"] = true
		}
		if r.GetResource().GetDeleted() {
			has["deleted"] = true
		}
		for _, sv := range r.GetSession().GetResults() {
			if sv.Err.GetBusy() != nil {
				has["busy refusal"] = true
			}
		}
	}
	for _, part := range []string{"cluster id", "keep_min", "queue", "deleted", "busy refusal"} {
		if !has[part] {
			t.Fatalf("goldenMachine's snapshot has no %s: %v %v", part, h, recs)
		}
	}
	golden(t, "snapshot.golden", []byte(snapHex(t, got)))

	n := New()
	if err := n.Restore(bytes.NewReader(snapFromHex(t, readGolden(t, "snapshot.golden")))); err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, n); !bytes.Equal(again, got) {
		t.Fatalf("restored golden snapshot writes\n%s\nwant\n%s", snapHex(t, again), snapHex(t, got))
	}
	retry := Command{Op: OpAcquire, Now: 4 * sec, Name: "held", Owner: "S", Session: 1, Seq: 2}
	a, b := m.Apply(retry), n.Apply(retry)
	var busy *fence.BusyError
	if describe(a) != describe(b) || !b.Replayed || !asBusy(b.Err, &busy) || busy.Name != "held" || busy.Holder != "A" || busy.Token != 1 {
		t.Fatalf("saved refusal after restore: %s, want %s (BusyError on held by A, token 1)", describe(b), describe(a))
	}
}

func asBusy(err error, out **fence.BusyError) bool {
	b, ok := err.(*fence.BusyError)
	*out = b
	return ok
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := readTestdata(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
