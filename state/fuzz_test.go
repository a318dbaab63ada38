package state

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
)

// Fuzz targets of the state machine's decoding (FuzzDecodeCommand, in
// codec_test.go, fuzzes command bytes; its seeds are in
// testdata/fuzz/FuzzDecodeCommand):
//
//   - FuzzCommandEncode: the other direction. Any command the codec
//     encodes decodes to the same command; applied to a machine in every
//     kind of state it never panics, the decoded command does exactly what
//     the original does, and the machine's snapshot afterwards restores to
//     the same state.
//   - FuzzRestore: Restore from arbitrary bytes never panics; a refusal is
//     ErrBadSnapshot and leaves the machine as it was; an accepted snapshot
//     gives a consistent state: its own snapshot restores to the same
//     bytes, and the two machines then answer the same commands alike.
//
// Run: go test -run '^$' -fuzz '^FuzzRestore$' -fuzztime 3m -parallel 1 ./state

// fuzzMachine has locks held standalone and on a session, a waiter on each
// kind, a delayed and an idle lock, remembered request_ids, op_ids and
// session results, and resources (one deleted). Its session is id 1.
func fuzzMachine() *Machine {
	m := NewWithConfig(DefaultConfig())
	for _, c := range []Command{
		{Op: OpAcquire, Now: 1, Name: "held", Owner: "A", TTL: 10 * time.Second, RequestID: "r-held"},
		{Op: OpAcquire, Now: 1, Name: "held", Owner: "B", TTL: time.Second, Wait: time.Minute, RequestID: "r-wait"},
		{Op: OpAcquire, Now: 1, Name: "delayed", Owner: "A", TTL: time.Second, LockDelay: time.Hour},
		{Op: OpAcquire, Now: 1, Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"},
		{Op: OpRelease, Now: 1, Name: "idle", Token: 3},
		{Op: OpWrite, Now: 1, Name: "s", Token: 3, Value: []byte("\xff binary"), OpID: "op\xfe"},
		{Op: OpAdd, Now: 1, Name: "n", Token: 3, Delta: 7, OpID: "op2"},
		{Op: OpWrite, Now: 1, Name: "gone", Token: 3, Value: []byte("x")},
		{Op: OpDelete, Now: 1, Name: "gone", Token: 3, OpID: "del"},
		{Op: OpSessionOpen, Now: 2, TTL: 30 * time.Second, RequestID: "open-1"},
		{Op: OpAcquire, Now: 2, Name: "bound", Owner: "S", Session: 1, Seq: 1},
		{Op: OpAcquire, Now: 2, Name: "held", Owner: "S", Wait: time.Minute, Session: 1, Seq: 2},
		{Op: OpAdd, Now: 2, Name: "n", Token: 4, Delta: 1, Session: 1, Seq: 3},
		{Op: OpTick, Now: 3},
	} {
		if r := m.Apply(c); r.Err != nil {
			panic(r.Err)
		}
	}
	return m
}

// fuzzSnapshot is m's snapshot (a bytes.Buffer never fails).
func fuzzSnapshot(m *Machine) []byte {
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// checkSnapshotRestores fails t unless m's snapshot restores into a fresh
// machine whose own snapshot is the same bytes; it returns that machine.
func checkSnapshotRestores(t *testing.T, m *Machine) *Machine {
	t.Helper()
	snap := fuzzSnapshot(m)
	again := New()
	if err := again.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("a machine's own snapshot does not restore: %v\n%s", err, snap)
	}
	if got := fuzzSnapshot(again); !bytes.Equal(got, snap) {
		t.Fatalf("snapshot, restore, snapshot changed the bytes:\n%s\n%s", snap, got)
	}
	return again
}

// satAdd is a+b, saturated at math.MaxInt64 (b >= 0).
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// probes are commands that touch what m holds: its locks (acquire, renew,
// release with their last token), its waiters (cancel), its resources
// (write, add, delete with the counter), its sessions (keepalive, a bound
// acquire, a seq retry, close), then time passing until everything ends.
func probes(m *Machine) []Command {
	now := m.Now()
	var cs []Command
	for i, l := range m.Locks("", now) {
		if i == 4 {
			break
		}
		cs = append(cs,
			Command{Op: OpAcquire, Now: now, Name: l.Name, Owner: "fuzz", TTL: time.Second, Wait: time.Second, RequestID: "fuzz-" + l.Name},
			Command{Op: OpRenew, Now: now, Name: l.Name, Token: l.LastToken},
			Command{Op: OpRelease, Now: now, Name: l.Name, Token: l.LastToken})
	}
	for i, q := range m.Queued() {
		if i == 4 {
			break
		}
		cs = append(cs, Command{Op: OpCancelWait, Now: now, Name: q.Name, RequestID: q.RequestID, Attempt: q.Attempt})
	}
	names := make([]string, 0, len(m.resources))
	for name := range m.resources {
		names = append(names, name)
	}
	sort.Strings(names)
	tok := m.LastToken()
	for i, name := range names {
		if i == 4 {
			break
		}
		cs = append(cs,
			Command{Op: OpWrite, Now: now, Name: name, Token: tok, Value: []byte("1"), OpID: "fuzz-w"},
			Command{Op: OpAdd, Now: now, Name: name, Token: tok, Delta: 1},
			Command{Op: OpDelete, Now: now, Name: name, Token: tok})
	}
	ids := make([]uint64, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if i == 3 {
			break
		}
		cs = append(cs,
			Command{Op: OpSessionKeepAlive, Now: now, Session: id},
			Command{Op: OpAcquire, Now: now, Name: "fuzz-bound", Owner: "S", Session: id, Seq: math.MaxUint64 - 1},
			Command{Op: OpAcquire, Now: now, Name: "fuzz-bound", Owner: "S", Session: id, Seq: math.MaxUint64 - 1},
			Command{Op: OpSessionClose, Now: now, Session: id})
	}
	return append(cs,
		Command{Op: OpAcquire, Now: now, Name: "fuzz-new", Owner: "fuzz", TTL: time.Second},
		Command{Op: OpSessionOpen, Now: now, TTL: time.Second},
		Command{Op: OpTick, Now: satAdd(now, int64(time.Hour))},
		Command{Op: OpTick, Now: satAdd(now, int64(1000*time.Hour))})
}

// checkSameBehaviour applies the probes of a to a and b alike and fails t
// if any result, or the final snapshot, differs.
func checkSameBehaviour(t *testing.T, a, b *Machine) {
	t.Helper()
	for _, c := range probes(a) {
		ra, rb := a.Apply(c), b.Apply(c)
		if describe(ra) != describe(rb) {
			t.Fatalf("%+v: %s, but %s on the restored copy", c, describe(ra), describe(rb))
		}
	}
	if sa, sb := fuzzSnapshot(a), fuzzSnapshot(b); !bytes.Equal(sa, sb) {
		t.Fatalf("the same commands left different states:\n%s\n%s", sa, sb)
	}
}

func FuzzCommandEncode(f *testing.F) {
	for _, c := range codecSamples {
		f.Add(uint8(c.Op), c.Now, int64(c.Slack), c.Name, c.Owner, int64(c.TTL), int64(c.Wait), int64(c.LockDelay), c.RequestID,
			uint64(c.Token), c.Value, c.Delta, c.OpID, c.Attempt, int64(c.Config.MaxTTL), int64(c.Config.MaxOps), c.Session, c.Seq, c.Ack)
	}
	f.Fuzz(func(t *testing.T, op uint8, now, slack int64, name, owner string, ttl, wait, lockDelay int64, requestID string,
		token uint64, value []byte, delta int64, opID string, attempt uint32, maxTTL, maxOps int64, session, seq, ack uint64) {
		c := Command{Op: Op(op), Now: now, Slack: time.Duration(slack), Name: name, Owner: owner, TTL: time.Duration(ttl), Wait: time.Duration(wait),
			LockDelay: time.Duration(lockDelay), RequestID: requestID, Token: fence.Token(token), Value: value, Delta: delta, OpID: opID,
			Attempt: attempt, Session: session, Seq: seq, Ack: ack}
		if maxTTL != 0 || maxOps != 0 {
			c.Config = DefaultConfig()
			c.Config.MaxTTL, c.Config.MaxOps = time.Duration(maxTTL), int(maxOps)
		}
		b, err := c.MarshalBinary()
		if slack < 0 {
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("negative slack: %x, %v", b, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%+v does not encode: %v", c, err)
		}
		var d Command
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v encodes as %x, which does not decode: %v", c, b, err)
		}
		if !sameCommand(c, d) || !bytes.Equal(c.Value, d.Value) {
			t.Fatalf("round trip: %+v became %+v", c, d)
		}
		// Applied, the decoded command does what the original does, and
		// the state it leaves snapshots and restores.
		m1, m2 := fuzzMachine(), fuzzMachine()
		if r1, r2 := m1.Apply(c), m2.Apply(d); describe(r1) != describe(r2) {
			t.Fatalf("%+v: %s; decoded: %s", c, describe(r1), describe(r2))
		}
		checkSameBehaviour(t, m1, checkSnapshotRestores(t, m1))
	})
}

func FuzzRestore(f *testing.F) {
	f.Add(fuzzSnapshot(fuzzMachine()))
	f.Add(encodeSnap(emptySnapHeader(nil)))
	cfg := DefaultConfig()
	f.Add(encodeSnap(emptySnapHeader(&cfg)))
	f.Fuzz(checkRestore)
}

// checkRestore restores snap into a busy machine: a refusal must be
// ErrBadSnapshot and change nothing; an accepted snapshot must give a
// state whose own snapshot restores to the same bytes and behaves alike.
func checkRestore(t *testing.T, snap []byte) {
	t.Helper()
	m := fuzzMachine()
	before := fuzzSnapshot(m)
	if err := m.Restore(bytes.NewReader(snap)); err != nil {
		if !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("err %v, want ErrBadSnapshot", err)
		}
		if !bytes.Equal(before, fuzzSnapshot(m)) {
			t.Fatal("a refused restore changed the machine")
		}
		return
	}
	checkSameBehaviour(t, m, checkSnapshotRestores(t, m))
}

// FuzzRestoreFields reaches the checks past decoding: it edits up to
// three fields of a real snapshot (with and without sessions) and restores
// the result with checkRestore. A field is picked by its index among the
// scalar fields, set or not, of the header and records (in field number
// order, elements of a list in order); the value says how to change it: a
// number becomes v>>2, moves by a small step, becomes an extreme, or goes
// away; a bool flips or goes away; bytes become another name of the
// snapshot, doubled, or go away.
func FuzzRestoreFields(f *testing.F) {
	bases := restoreBases()
	for i := range bases {
		f.Add(uint8(i), uint16(0), int64(1), uint16(0), int64(1), uint16(0), int64(1)) // unchanged
	}
	f.Fuzz(func(t *testing.T, base uint8, p1 uint16, v1 int64, p2 uint16, v2 int64, p3 uint16, v3 int64) {
		h, recs := snapMessages(t, bases[int(base)%len(bases)])
		for _, e := range [...]struct {
			p uint16
			v int64
		}{{p1, v1}, {p2, v2}, {p3, v3}} {
			var leaves []pbLeaf
			pbLeaves(h.ProtoReflect(), &leaves)
			for _, r := range recs {
				pbLeaves(r.ProtoReflect(), &leaves)
			}
			editLeaf(leaves[int(e.p)%len(leaves)], e.v)
		}
		checkRestore(t, encodeSnap(h, recs...))
	})
}

// restoreBases are real snapshots: fuzzMachine's (with sessions), and a
// state without sessions.
func restoreBases() [][]byte {
	cfg := DefaultConfig()
	cfg.MaxSessions, cfg.MaxSessionResults = 0, 0
	m := NewWithConfig(cfg)
	for _, c := range []Command{
		{Op: OpAcquire, Now: 1, Name: "held", Owner: "A", TTL: 10 * time.Second, RequestID: "r-held"},
		{Op: OpAcquire, Now: 1, Name: "held", Owner: "B", TTL: time.Second, Wait: time.Minute, RequestID: "r-wait"},
		{Op: OpAcquire, Now: 1, Name: "delayed", Owner: "A", TTL: time.Second, LockDelay: time.Hour},
		{Op: OpAcquire, Now: 1, Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"},
		{Op: OpRelease, Now: 1, Name: "idle", Token: 3},
		{Op: OpWrite, Now: 1, Name: "s", Token: 3, Value: []byte("9"), OpID: "w"},
		{Op: OpAdd, Now: 1, Name: "n", Token: 3, Delta: 2, OpID: "a"},
		{Op: OpDelete, Now: 1, Name: "s", Token: 3},
		{Op: OpTick, Now: 2},
	} {
		if r := m.Apply(c); r.Err != nil {
			panic(r.Err)
		}
	}
	out := [][]byte{fuzzSnapshot(fuzzMachine()), fuzzSnapshot(m)}
	for _, b := range out {
		if err := New().Restore(bytes.NewReader(b)); err != nil {
			panic(fmt.Sprintf("base snapshot does not restore: %v\n%s", err, b))
		}
	}
	return out
}

// pbLeaf is one scalar field of a message, or one element of a list of
// scalars.
type pbLeaf struct {
	m    protoreflect.Message
	fd   protoreflect.FieldDescriptor
	list protoreflect.List // nil: the field itself
	i    int
}

// pbLeaves appends m's scalar fields, set or not (a oneof member only when
// set), and those of the messages it holds, in field number order.
func pbLeaves(m protoreflect.Message, out *[]pbLeaf) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !m.Has(fd) {
			continue
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := m.Get(fd).List()
			for j := range l.Len() {
				pbLeaves(l.Get(j).Message(), out)
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range l.Len() {
				*out = append(*out, pbLeaf{m: m, fd: fd, list: l, i: j})
			}
		case fd.Message() != nil:
			if m.Has(fd) {
				pbLeaves(m.Get(fd).Message(), out)
			}
		default:
			*out = append(*out, pbLeaf{m: m, fd: fd})
		}
	}
}

// fuzzNames are the names a bytes field may take.
var fuzzNames = []string{"", "held", "idle", "delayed", "bound", "s", "n", "gone", "\x00s1.1", "r-held", "fence-state/2"}

// editLeaf changes the scalar l as v says (see FuzzRestoreFields).
func editLeaf(l pbLeaf, v int64) {
	get := func() protoreflect.Value {
		if l.list != nil {
			return l.list.Get(l.i)
		}
		return l.m.Get(l.fd)
	}
	set := func(val protoreflect.Value, remove bool) {
		switch {
		case l.list != nil && remove:
			l.list.Set(l.i, protoreflect.ValueOfBytes(nil)) // an element is never removed, only emptied
		case l.list != nil:
			l.list.Set(l.i, val)
		case remove:
			l.m.Clear(l.fd)
		default:
			l.m.Set(l.fd, val)
		}
	}
	num := func(n int64) protoreflect.Value {
		switch l.fd.Kind() {
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			return protoreflect.ValueOfUint64(uint64(n))
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			return protoreflect.ValueOfUint32(uint32(n))
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
			return protoreflect.ValueOfInt32(int32(n))
		}
		return protoreflect.ValueOfInt64(n)
	}
	mode, x := v&3, v>>2
	old := get()
	switch l.fd.Kind() {
	case protoreflect.BoolKind:
		set(protoreflect.ValueOfBool(!old.Bool()), mode == 3)
	case protoreflect.BytesKind, protoreflect.StringKind:
		var b []byte
		switch mode {
		case 0, 1:
			b = []byte(fuzzNames[uint64(x)%uint64(len(fuzzNames))])
		case 2:
			if l.fd.Kind() == protoreflect.StringKind {
				b = []byte(old.String() + old.String())
			} else {
				b = append(bytes.Clone(old.Bytes()), old.Bytes()...)
			}
		}
		if l.fd.Kind() == protoreflect.StringKind {
			set(protoreflect.ValueOfString(string(b)), mode == 3)
		} else {
			set(protoreflect.ValueOfBytes(b), mode == 3)
		}
	default:
		var n int64
		switch l.fd.Kind() {
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			n = int64(old.Uint())
		default:
			n = old.Int()
		}
		extremes := []int64{0, -1, 1, math.MaxInt64, math.MinInt64, -1 /* as unsigned: MaxUint64 */, 1 << 32}
		switch mode {
		case 0:
			set(num(x), false)
		case 1:
			set(num(n+x%8), false)
		case 2:
			set(num(extremes[uint64(x)%uint64(len(extremes))]), false)
		default:
			set(protoreflect.Value{}, true)
		}
	}
}

// Regression (FuzzCommandEncode/068bf1095689ccfc): a session's saved result
// keeps the refused command's name as it came. The JSON snapshot wrote it
// as a string, which turns a name that is not UTF-8 into U+FFFD, and a
// retry of the seq then got its saved refusal on the machine that applied
// the log but OP_CONFLICT on one restored from the snapshot (replicas
// diverged). Names are bytes in the records.
func TestSavedNameNotUTF8SurvivesRestore(t *testing.T) {
	m := fuzzMachine()
	retries := []Command{
		{Op: OpSessionKeepAlive, Now: 4, Name: "\xbf", TTL: 71, Session: 1, Seq: 98},
		{Op: OpAcquire, Now: 4, Name: "\xff", Owner: "S", Session: 1, Seq: 99},
	}
	for _, c := range retries {
		if r := m.Apply(c); !errors.Is(r.Err, fence.ErrInvalid) {
			t.Fatalf("%+v: %s, want INVALID_ARGUMENT", c, describe(r))
		}
	}
	_, recs := snapMessages(t, fuzzSnapshot(m))
	names := map[string]bool{}
	for _, r := range recs {
		for _, sv := range r.GetSession().GetResults() {
			names[string(sv.Name)] = true
		}
	}
	if !names["\xbf"] || !names["\xff"] {
		t.Fatalf("the names are not written as they came: %v", names)
	}
	n := checkSnapshotRestores(t, m)
	for _, c := range retries {
		ra, rb := m.Apply(c), n.Apply(c)
		if !ra.Replayed || !errors.Is(ra.Err, fence.ErrInvalid) || describe(ra) != describe(rb) {
			t.Fatalf("retry of %+v: %s; restored: %s", c, describe(ra), describe(rb))
		}
	}
}
