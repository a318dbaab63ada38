package state

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence/state/internal/statepb"
)

// The hand-encoded idle record is byte for byte what the protobuf runtime
// writes for SnapshotRecord{idle: name}, length prefix included.
func TestIdleRecordBytes(t *testing.T) {
	fd := (&statepb.SnapshotRecord{}).ProtoReflect().Descriptor().Fields().ByName("idle")
	if fd == nil || fd.Number() != protoreflect.FieldNumber(idleField) {
		t.Fatalf("SnapshotRecord.idle is field %v, idleField is %d", fd, idleField)
	}
	for _, name := range []string{"a", "sku/42", strings.Repeat("n", 200), strings.Repeat("é", 256)} {
		var hand, lib bytes.Buffer
		h := &snapStream{w: &hand}
		h.idle(name)
		h.flush()
		l := &snapStream{w: &lib}
		l.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Idle{Idle: []byte(name)}})
		l.flush()
		if h.err != nil || l.err != nil || !bytes.Equal(hand.Bytes(), lib.Bytes()) {
			t.Fatalf("%q: hand %x (%v), runtime %x (%v)", name, hand.Bytes(), h.err, lib.Bytes(), l.err)
		}
		if _, n := protowire.ConsumeVarint(hand.Bytes()); n <= 0 {
			t.Fatalf("%q: no length prefix", name)
		}
	}
}

// A free lock's hand-encoded record is byte for byte the runtime's.
func TestFreeLockRecordBytes(t *testing.T) {
	fd := (&statepb.SnapshotRecord{}).ProtoReflect().Descriptor().Fields().ByName("lock")
	if fd == nil || fd.Number() != protoreflect.FieldNumber(lockField) {
		t.Fatalf("SnapshotRecord.lock is field %v, lockField is %d", fd, lockField)
	}
	for _, l := range []snapLock{
		{Name: "a"},
		{Name: "sku/42", LastToken: 7, LastOwner: "worker-1", LastEnd: 2, FreedAt: 1e9, IdleSince: 2e9},
		{Name: strings.Repeat("n", 512), LastToken: 1 << 60, LastOwner: strings.Repeat("o", 256), LastEnd: 1, FreedAt: -5, DelayUntil: 3e9, IdleSince: 1},
	} {
		var hand, lib bytes.Buffer
		h := &snapStream{w: &hand}
		h.freeLock(&l)
		h.flush()
		r := &snapStream{w: &lib}
		r.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Lock{Lock: pbLock(&l)}})
		r.flush()
		if h.err != nil || r.err != nil || !bytes.Equal(hand.Bytes(), lib.Bytes()) {
			t.Fatalf("%+v: hand %x (%v), runtime %x (%v)", l, hand.Bytes(), h.err, lib.Bytes(), r.err)
		}
	}
}
