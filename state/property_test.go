package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"pgregory.net/rapid"
)

// genCommand draws a command over few names, owners, ids and tokens, so that
// collisions (busy locks, retries, stale tokens, conflicts) are common.
func genCommand(t *rapid.T, now int64) Command {
	c := Command{
		Now:   now,
		Slack: rapid.SampledFrom([]time.Duration{0, 0, 0, 250 * time.Millisecond, time.Second, 3 * time.Second}).Draw(t, "slack"),
		Name:  rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"),
		Owner: rapid.SampledFrom([]string{"A", "B"}).Draw(t, "owner"),
		Token: fence.Token(rapid.IntRange(1, 8).Draw(t, "token")),
	}
	switch rapid.IntRange(0, 11).Draw(t, "op") {
	case 0, 1, 2:
		c.Op = OpAcquire
		c.Token = 0
		c.TTL = rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second, 5 * time.Second}).Draw(t, "ttl")
		c.Wait = rapid.SampledFrom([]time.Duration{0, 0, time.Second, 3 * time.Second}).Draw(t, "wait")
		c.RequestID = rapid.SampledFrom([]string{"", "r1", "r2", "r3", "r4"}).Draw(t, "rid")
	case 3:
		c.Op = OpRenew
		c.Owner = ""
		c.TTL = rapid.SampledFrom([]time.Duration{0, time.Second, 3 * time.Second}).Draw(t, "ttl")
	case 4:
		c.Op, c.Owner = OpRelease, ""
	case 5, 6:
		c = Command{Op: OpTick, Now: now, Slack: c.Slack}
	case 9:
		c = Command{Op: OpCancelWait, Now: now, Slack: c.Slack, Name: c.Name,
			RequestID: rapid.SampledFrom([]string{"r1", "r2", "r3", "r4"}).Draw(t, "rid"),
			Attempt:   uint32(rapid.IntRange(0, 3).Draw(t, "attempt"))}
	case 10:
		c.Op, c.Owner, c.Name = OpDelete, "", "s"
		c.OpID = rapid.SampledFrom([]string{"", "o1", "o2"}).Draw(t, "op_id")
	case 7:
		c.Op, c.Owner, c.Name = OpWrite, "", "s"
		c.Value = []byte(rapid.SampledFrom([]string{"", "1", "7", "x"}).Draw(t, "value"))
		c.OpID = rapid.SampledFrom([]string{"", "o1", "o2"}).Draw(t, "op_id")
	default:
		c.Op, c.Owner, c.Name = OpAdd, "", "s"
		c.Delta = int64(rapid.IntRange(-3, 3).Draw(t, "delta"))
		c.OpID = rapid.SampledFrom([]string{"", "o1", "o2"}).Draw(t, "op_id")
	}
	return c
}

// TestMachineMatchesModel runs random command sequences against the machine
// and the reference model (commands carry random Slack): every result must
// agree, tokens strictly increase, a lock is never granted while an earlier
// lease on it is unexpired as of the decision time (max of Now - Slack: G3
// with the commit lag the slack stands for), and a snapshot restored into a
// fresh machine carries on identically. Reads agree with Apply: a lock reads
// free iff an acquire at the same decision time is granted.
func TestMachineMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, ref := NewWithConfig(uncapped()), newModel()
		var now, decided int64
		var lastGrant fence.Token
		leaseEnds := map[string]int64{}      // lock -> end of its current lease
		leaseTok := map[string]fence.Token{} // lock -> token of that lease
		var released fence.Token             // token released by this step
		grant := func(l *fence.Lease) {
			if l.Token <= lastGrant {
				t.Fatalf("token %d after %d", l.Token, lastGrant)
			}
			if leaseEnds[l.Name] > decided && leaseTok[l.Name] != released {
				t.Fatalf("lock %s granted at decision time %d while a lease runs to %d", l.Name, decided, leaseEnds[l.Name])
			}
			lastGrant = l.Token
			leaseEnds[l.Name] = now + int64(l.Remaining)
			leaseTok[l.Name] = l.Token
		}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			now += int64(rapid.IntRange(0, 12).Draw(t, "dt")) * int64(250*time.Millisecond)
			c := genCommand(t, now)
			// Reads judge as Apply does: when c's decision time is the
			// machine's, a plain acquire is granted iff the lock reads free.
			checkFree := c.Op == OpAcquire && c.Wait == 0 && c.RequestID == "" && now-int64(c.Slack) <= decided
			free := m.Lock(c.Name, now).Free
			// A cancel of the holding attempt releases its lease, including
			// a lease its own settle just granted the waiter.
			var cancelled fence.Token
			cancelReq := m.live[c.RequestID]
			decided = max(decided, now-int64(c.Slack))
			got, want := m.Apply(c), ref.apply(c)
			if r := cancelReq; c.Op == OpCancelWait && r != nil && r.name == c.Name && r.state == reqDone && r.outcome == outcomeReleased {
				cancelled = r.token
			}
			if checkFree && free != (got.Lease != nil) {
				t.Fatalf("%+v: lock read free=%v, acquire: %s", c, free, describe(got))
			}
			released = cancelled
			if c.Op == OpRelease && got.Err == nil {
				released = c.Token // a grant after it on this lock is a hand-on
			}
			if describe(got) != describe(want) {
				t.Fatalf("%+v\nmachine: %s\nmodel:   %s", c, describe(got), describe(want))
			}
			// Events from settling came before the command acted; a
			// release's hand-on came after (see released).
			for _, ev := range got.Events {
				if ev.Lease != nil {
					grant(ev.Lease)
				}
			}
			if got.Lease != nil && !got.Replayed && c.Op == OpAcquire {
				grant(got.Lease)
			}
			if got.Err == nil && c.Op == OpRenew {
				leaseEnds[c.Name] = now + int64(got.Lease.Remaining)
			}
			if released != 0 && leaseTok[c.Name] == released {
				leaseEnds[c.Name] = 0
			}
			if m.LastToken() != ref.counter {
				t.Fatalf("counter %d, model %d", m.LastToken(), ref.counter)
			}
			if w, q := m.Waiting(), len(m.Queued()); w != q {
				t.Fatalf("Waiting() = %d, but %d acquires are queued", w, q)
			}
			if rapid.IntRange(0, 9).Draw(t, "snapshot") == 0 {
				var a, b bytes.Buffer
				if err := m.Snapshot(&a); err != nil {
					t.Fatal(err)
				}
				restored := New()
				if err := restored.Restore(bytes.NewReader(a.Bytes())); err != nil {
					t.Fatal(err)
				}
				if err := restored.Snapshot(&b); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Fatalf("snapshot of the restored machine differs (%v)", err)
				}
				m = restored
			}
		}
	})
}
