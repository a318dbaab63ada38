package state

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fenceworks/fence/state/internal/statepb"
)

// busyMachine has every kind of state: held, queued, delayed and idle locks,
// remembered outcomes, op_ids and resources.
func busyMachine(t *testing.T) *Machine {
	t.Helper()
	m := New()
	mustOK(t, m, Command{Op: OpAcquire, Name: "held", Owner: "A", TTL: 10 * time.Second, RequestID: "r-held"})
	mustOK(t, m, waitAcq(0, "held", "B", time.Second, time.Minute, "r-wait"))
	mustOK(t, m, Command{Op: OpAcquire, Name: "delayed", Owner: "A", TTL: time.Second, LockDelay: time.Hour})
	mustOK(t, m, Command{Op: OpAcquire, Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"})
	mustOK(t, m, rel(0, "idle", 3))
	mustOK(t, m, write(0, "s", 3, "\xff binary", "op\xfe"))
	mustOK(t, m, add(0, "n", 3, 7, "op2"))
	mustOK(t, m, tick(at(2)))
	return m
}

func snapshotBytes(t *testing.T, m *Machine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSnapshotRestore(t *testing.T) {
	a := busyMachine(t)
	snap := snapshotBytes(t, a)
	if again := snapshotBytes(t, busyMachine(t)); !bytes.Equal(snap, again) {
		t.Fatal("the same state gave different snapshot bytes")
	}
	b := New()
	if err := b.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, snapshotBytes(t, b)) {
		t.Fatal("restore then snapshot differs")
	}
	if b.Now() != a.Now() || b.LastToken() != a.LastToken() {
		t.Fatal("time or counter lost")
	}
	da, _ := a.NextDeadline()
	db, _ := b.NextDeadline()
	if da != db {
		t.Fatalf("deadlines %d vs %d", da, db)
	}
	// Both machines must now behave the same.
	for _, c := range []Command{
		{Op: OpAcquire, Now: at(3), Name: "held", Owner: "A", TTL: 10 * time.Second, RequestID: "r-held"},
		{Op: OpAcquire, Now: at(3), Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"},
		write(at(3), "s", 3, "\xff binary", "op\xfe"),
		rel(at(3), "idle", 3),
		acq(at(3), "delayed", "C", time.Second),
		tick(at(12)),
		tick(at(4000)),
	} {
		ra, rb := a.Apply(c), b.Apply(c)
		if describe(ra) != describe(rb) {
			t.Fatalf("%+v: original %s, restored %s", c, describe(ra), describe(rb))
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("states diverged after the same commands")
	}
}

// TestRestoreRejectsGarbage: input that is not a consistent v1 snapshot is
// refused with ErrBadSnapshot and changes nothing.
func TestRestoreRejectsGarbage(t *testing.T) {
	good := snapshotBytes(t, busyMachine(t))
	// edit is good with its header and records changed by f.
	edit := func(f func(h *statepb.SnapshotHeader, recs []*statepb.SnapshotRecord) []*statepb.SnapshotRecord) []byte {
		h, recs := snapMessages(t, good)
		return encodeSnap(h, f(h, recs)...)
	}
	without := func(recs []*statepb.SnapshotRecord, drop func(*statepb.SnapshotRecord) bool) []*statepb.SnapshotRecord {
		var out []*statepb.SnapshotRecord
		for _, r := range recs {
			if !drop(r) {
				out = append(out, r)
			}
		}
		return out
	}
	cfg := DefaultConfig()
	msgs := splitSnap(t, good)
	headerWithUnknown := append(bytes.Clone(msgs[0]), 0xa0, 0x01, 1) // field 20
	recordWithUnknown := append(bytes.Clone(msgs[1]), 0xa0, 0x01, 1)
	for name, in := range map[string][]byte{
		"empty":           {},
		"not a snapshot":  []byte("garbage"),
		"the old JSON":    []byte(`{"format":"fence-state/1","now":0,"decided":0,"counter":0,"locks":null,"idle":null,"requests":null,"ops":null,"resources":null}`),
		"trailing length": append(bytes.Clone(good), 1),
		"trailing empty":  append(bytes.Clone(good), 0),
		"wrong format": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			h.Format = "fence-state/9"
			return r
		}),
		"no config": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			h.Config = nil
			return r
		}),
		"unknown in header": append(protowire.AppendBytes(nil, headerWithUnknown), good[len(protowire.AppendBytes(nil, msgs[0])):]...),
		"unknown in record": encodeSnapRaw(msgs[0], recordWithUnknown),
		"truncated":         good[:len(good)/2],
		"token > counter": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			h.Counter = 1
			return r
		}),
		"bad payload": encodeSnap(emptySnapHeader(&cfg), &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Op{Op: &statepb.Op{
			Resource: []byte("s"), OpId: []byte{0}, Payload: []byte{0}, Token: 1, Version: 1}}}),
		"idle not listed": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			return without(r, func(r *statepb.SnapshotRecord) bool { return r.GetIdle() != nil })
		}),
		"idle not a lock": encodeSnap(emptySnapHeader(&cfg), &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Idle{Idle: []byte("x")}}),
		"out of order": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			first := slices.IndexFunc(r, func(r *statepb.SnapshotRecord) bool { return r.GetResource() != nil })
			return slices.Concat([]*statepb.SnapshotRecord{r[first]}, r[:first], r[first+1:]) // the first resource before the locks
		}),
		"lock repeated": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			i := slices.IndexFunc(r, func(r *statepb.SnapshotRecord) bool { return r.GetLock() != nil })
			return slices.Insert(r, i+1, r[i])
		}),
		"resource repeated": edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
			i := slices.IndexFunc(r, func(r *statepb.SnapshotRecord) bool { return r.GetResource() != nil })
			return slices.Insert(r, i+1, r[i])
		}),
		"header not canonical": encodeSnapRaw(append(bytes.Clone(msgs[0]), 0x38, 0), msgs[1:]...), // configured: false, present
		"record not canonical": encodeSnapRaw(msgs[0], append(bytes.Clone(msgs[1]), msgs[1]...)),  // the lock twice in one record
	} {
		t.Run(name, func(t *testing.T) {
			m := busyMachine(t)
			if err := m.Restore(bytes.NewReader(in)); errors.Is(err, ErrBadCommand) {
				t.Fatalf("err %v is a command's", err)
			}
			before := snapshotBytes(t, m)
			err := m.Restore(bytes.NewReader(in))
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("err %v, want ErrBadSnapshot", err)
			}
			if !bytes.Equal(before, snapshotBytes(t, m)) {
				t.Fatal("failed restore changed the machine")
			}
		})
	}
	// A decoding refusal says which message and why.
	for name, want := range map[string]DecodeError{
		"wrong format":         {Snapshot: true, Message: 0, Reason: `format "fence-state/9", want "fence-state/2"`},
		"record not canonical": {Snapshot: true, Message: 1, Reason: "not in canonical encoding"},
		"trailing empty":       {Snapshot: true, Message: len(splitSnap(t, good)), Reason: "empty"},
	} {
		var in []byte
		switch name {
		case "wrong format":
			in = edit(func(h *statepb.SnapshotHeader, r []*statepb.SnapshotRecord) []*statepb.SnapshotRecord {
				h.Format = "fence-state/9"
				return r
			})
		case "record not canonical":
			in = encodeSnapRaw(msgs[0], append(bytes.Clone(msgs[1]), msgs[1]...))
		default:
			in = append(bytes.Clone(good), 0)
		}
		var de *DecodeError
		err := New().Restore(bytes.NewReader(in))
		if !errors.As(err, &de) || de.Snapshot != want.Snapshot || de.Message != want.Message || !strings.HasPrefix(de.Reason, want.Reason) {
			t.Errorf("%s: %#v (%v), want %+v", name, de, err, want)
		}
	}
}
