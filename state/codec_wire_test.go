package state

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// pbCommand is c as the protobuf runtime's message: the reference the
// hand codec is held to.
func pbCommand(c Command) *statepb.Command {
	p := &statepb.Command{Op: uint32(c.Op), Now: c.Now, Slack: uint64(c.Slack), Name: bs(c.Name), Owner: bs(c.Owner),
		Ttl: int64(c.TTL), Wait: int64(c.Wait), LockDelay: int64(c.LockDelay), RequestId: bs(c.RequestID), Token: uint64(c.Token),
		Value: c.Value, Delta: c.Delta, OpId: bs(c.OpID), Attempt: c.Attempt, Config: pbConfig(c.Config), Session: c.Session,
		Seq: c.Seq, Ack: c.Ack, ClusterId: bs(c.ClusterID), Principal: bs(c.Principal), Admin: c.Admin}
	for _, r := range c.Roles {
		p.Roles = append(p.Roles, []byte(r))
	}
	for _, q := range c.Perms {
		p.Perms = append(p.Perms, permBytes(q))
	}
	p.Quota = quotaPB(c.Quota)
	p.Mode, p.Permits = uint32(c.Mode), c.Permits
	for _, l := range c.Locks {
		p.Locks = append(p.Locks, &statepb.LockSpec{Name: bs(l.Name), Mode: uint32(l.Mode), Permits: l.Permits})
	}
	return p
}

// The hand-written command codec writes exactly the protobuf runtime's
// deterministic bytes of statepb.Command, for the golden commands and for
// random ones, and reads them back to the same command.
func TestWireCodecMatchesTheRuntime(t *testing.T) {
	check := func(t interface {
		Fatalf(string, ...any)
	}, c Command) {
		want, err := deterministic.Marshal(pbCommand(c))
		if err != nil {
			t.Fatalf("runtime marshal %+v: %v", c, err)
		}
		if got := appendCommand(nil, c); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nhand    %x\nruntime %x", c, got, want)
		}
		var back Command
		if err := decodeCommand(&back, append([]byte{CommandVersion}, want...)); err != nil {
			t.Fatalf("decode %+v: %v", c, err)
		}
		if again := appendCommand(nil, back); !bytes.Equal(again, want) {
			t.Fatalf("%+v read back as %+v", c, back)
		}
	}
	for _, c := range goldenCommands() {
		check(t, c)
	}
	rapid.Check(t, func(t *rapid.T) {
		i64 := rapid.Int64()
		str := rapid.StringN(0, 20, -1)
		c := Command{
			Op: Op(rapid.Uint8().Draw(t, "op")), Now: i64.Draw(t, "now"), Slack: time.Duration(rapid.Int64Min(0).Draw(t, "slack")),
			Name: str.Draw(t, "name"), Owner: str.Draw(t, "owner"), TTL: time.Duration(i64.Draw(t, "ttl")),
			Wait: time.Duration(i64.Draw(t, "wait")), LockDelay: time.Duration(i64.Draw(t, "lock_delay")),
			RequestID: str.Draw(t, "request_id"), Token: fence.Token(rapid.Uint64().Draw(t, "token")),
			Value: rapid.SliceOfN(rapid.Byte(), 0, 30).Draw(t, "value"), Delta: i64.Draw(t, "delta"), OpID: str.Draw(t, "op_id"),
			Attempt: rapid.Uint32().Draw(t, "attempt"), Session: rapid.Uint64().Draw(t, "session"), Seq: rapid.Uint64().Draw(t, "seq"),
			Ack: rapid.Uint64().Draw(t, "ack"), ClusterID: str.Draw(t, "cluster_id"),
			Principal: str.Draw(t, "principal"), Admin: rapid.Bool().Draw(t, "admin"),
			Roles: rapid.SliceOfN(str, 0, 3).Draw(t, "roles"),
		}
		for _, k := range rapid.SliceOfN(rapid.Uint8(), 0, 3).Draw(t, "perm_kinds") {
			c.Perms = append(c.Perms, Permission{Kind: PermKind(k), Prefix: str.Draw(t, "perm_prefix")})
		}
		if len(c.Roles) == 0 {
			c.Roles = nil
		}
		c.Mode, c.Permits = fence.Mode(rapid.Uint8().Draw(t, "mode")), rapid.Uint32().Draw(t, "permits")
		for range rapid.IntRange(0, 3).Draw(t, "locks") {
			c.Locks = append(c.Locks, fence.LockSpec{Name: str.Draw(t, "lock_name"), Mode: fence.Mode(rapid.Uint8().Draw(t, "lock_mode")),
				Permits: rapid.Uint32().Draw(t, "lock_permits")})
		}
		if rapid.Bool().Draw(t, "quota") {
			c.Quota = Quota{Sessions: int(i64.Draw(t, "q_sessions")), Waiters: int(i64.Draw(t, "q_waiters")),
				IDs: int(i64.Draw(t, "q_ids")), Conns: int(i64.Draw(t, "q_conns"))}
		}
		if len(c.Value) == 0 {
			c.Value = nil // what decode gives back for an absent value
		}
		if rapid.Bool().Draw(t, "config") {
			c.Config = Config{MaxTTL: time.Duration(i64.Draw(t, "max_ttl")), MaxOps: int(i64.Draw(t, "max_ops")),
				MaxRequests: int(i64.Draw(t, "max_requests")), IDRetention: time.Duration(i64.Draw(t, "id_retention")),
				MinIDRetention: time.Duration(i64.Draw(t, "min_id_retention")), MaxWaitersPerLock: int(i64.Draw(t, "mwpl")),
				MaxWaiters: int(i64.Draw(t, "mw")), MaxResources: int(i64.Draw(t, "mr")), MaxResourceBytes: i64.Draw(t, "mrb"),
				MaxLocks: int(i64.Draw(t, "ml")), MaxSessions: int(i64.Draw(t, "ms")), MaxSessionResults: int(i64.Draw(t, "msr")),
				MaxLockDelay: time.Duration(i64.Draw(t, "mld")), MaxSessionsPerPrincipal: int(i64.Draw(t, "msp")), MaxWaitersPerPrincipal: int(i64.Draw(t, "mwp")),
				MaxIDsPerPrincipal: int(i64.Draw(t, "mip"))}
		}
		check(t, c)
	})
}
