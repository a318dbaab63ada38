package state

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"pgregory.net/rapid"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// genSnapOp draws an op record's values: each field absent (zero) or
// not, of any length or value, in both formats' shapes and mixed.
func genSnapOp(t *rapid.T) snapOp {
	bs := func(name string, max int) []byte {
		if rapid.Bool().Draw(t, name+"?") {
			return nil
		}
		return rapid.SliceOfN(rapid.Byte(), 0, max).Draw(t, name)
	}
	i64 := func(name string) int64 {
		return rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(-200, 200), rapid.Int64()).Draw(t, name)
	}
	u64 := func(name string) uint64 {
		return rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64Range(0, 300), rapid.Uint64()).Draw(t, name)
	}
	return snapOp{Key: bs("key", 20), Resource: string(bs("resource", 200)), OpID: bs("op_id", 40), At: i64("at"), Payload: bs("payload", 20),
		Token: fence.Token(u64("token")), Version: u64("version"), AddValue: i64("add_value"), Principal: string(bs("principal", 300))}
}

// The hand-encoded op record is byte for byte what the protobuf runtime
// writes for SnapshotRecord{op: pbOp(o)}, length prefix included.
func TestOpRecordBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := genSnapOp(t)
		var hand, lib bytes.Buffer
		h := &snapStream{w: &hand}
		h.op(&o)
		h.flush()
		l := &snapStream{w: &lib}
		l.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Op{Op: pbOp(&o)}})
		l.flush()
		if h.err != nil || l.err != nil || !bytes.Equal(hand.Bytes(), lib.Bytes()) {
			t.Fatalf("%+v:\nhand    %x (%v)\nruntime %x (%v)", o, hand.Bytes(), h.err, lib.Bytes(), l.err)
		}
	})
}

// opRecordMsg is o's record without its length prefix.
func opRecordMsg(o *snapOp) []byte {
	var b bytes.Buffer
	s := &snapStream{w: &b}
	s.op(o)
	s.flush()
	_, k := protowire.ConsumeVarint(b.Bytes())
	return b.Bytes()[k:]
}

// snapOfRecords is a snapshot of an empty machine of format f followed by
// the records msgs (each given its length prefix).
func snapOfRecords(f string, msgs ...[]byte) []byte {
	d := &snapDoc{Format: f, Config: new(DefaultConfig())}
	var b bytes.Buffer
	if _, err := writeSnapDoc(&b, d); err != nil {
		panic(err)
	}
	out := b.Bytes()
	for _, m := range msgs {
		out = append(protowire.AppendVarint(out, uint64(len(m))), m...)
	}
	return out
}

// sameDecoding fails unless decoding b reading op records by hand and
// by the protobuf runtime alone have the same outcome: the same records,
// or the same error.
func sameDecoding(t interface {
	Helper()
	Fatalf(string, ...any)
}, b []byte) error {
	t.Helper()
	fast, ferr := decodeSnapshotWith(b, true)
	slow, serr := decodeSnapshotWith(b, false)
	if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
		t.Fatalf("%x:\nhand    %v\nruntime %v", b, ferr, serr)
	}
	if ferr == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%x:\nhand    %+v\nruntime %+v", b, fast.OpRecords, slow.OpRecords)
	}
	return ferr
}

// The hand decoder of op records agrees with the protobuf runtime on
// canonical records (accepted, the same values, without the runtime)
// and on records bent every way a byte string can be: unknown fields,
// wrong wire types, fields out of order or repeated, zero values
// present, longer varints, lengths past the end, truncation, other
// records around them.
func TestOpRecordDecoding(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := rapid.SampledFrom([]string{snapshotFormat, snapshotFormatV1}).Draw(t, "format")
		var msgs [][]byte
		for range rapid.IntRange(1, 4).Draw(t, "records") {
			o := genSnapOp(t)
			m := opRecordMsg(&o)
			if _, ok := readOpRecord(m); !ok {
				t.Fatalf("canonical record %x of %+v not read by hand", m, o)
			}
			for range rapid.IntRange(0, 3).Draw(t, "bends") {
				m = bend(t, m)
			}
			msgs = append(msgs, m)
		}
		if rapid.Bool().Draw(t, "idle after") {
			msgs = append(msgs, []byte{byte(protowire.EncodeTag(idleField, protowire.BytesType)), 1, 'x'})
		}
		b := snapOfRecords(f, msgs...)
		if rapid.IntRange(0, 5).Draw(t, "truncate?") == 0 {
			b = b[:rapid.IntRange(0, len(b)).Draw(t, "truncate")]
		}
		sameDecoding(t, b)
	})
}

// bend changes a record's bytes in one of the ways a decoder must judge.
func bend(t *rapid.T, m []byte) []byte {
	m = bytes.Clone(m)
	switch rapid.IntRange(0, 7).Draw(t, "bend") {
	case 0: // a byte changed
		if len(m) > 0 {
			m[rapid.IntRange(0, len(m)-1).Draw(t, "at")] = rapid.Byte().Draw(t, "byte")
		}
	case 1: // a byte inserted
		i := rapid.IntRange(0, len(m)).Draw(t, "at")
		m = append(m[:i], append([]byte{rapid.Byte().Draw(t, "byte")}, m[i:]...)...)
	case 2: // a byte removed
		if len(m) > 0 {
			i := rapid.IntRange(0, len(m)-1).Draw(t, "at")
			m = append(m[:i], m[i+1:]...)
		}
	case 3: // a field appended inside the op: any number, any wire type, any value
		num := protowire.Number(rapid.IntRange(1, 20).Draw(t, "num"))
		var f []byte
		if rapid.Bool().Draw(t, "bytes?") {
			f = protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "v"))
		} else {
			f = protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), rapid.Uint64Range(0, 300).Draw(t, "v"))
		}
		m = rewrapOp(m, f, rapid.Bool().Draw(t, "front"))
	case 4: // the op's length written one byte longer
		if len(m) > 1 && m[0] == byte(protowire.EncodeTag(opField, protowire.BytesType)) {
			n, k := protowire.ConsumeVarint(m[1:])
			if k > 0 && k < 10 {
				longer := protowire.AppendVarint(nil, n)
				longer[len(longer)-1] |= 0x80
				longer = append(longer, 0)
				m = append(append([]byte{m[0]}, longer...), m[1+k:]...)
			}
		}
	case 5: // another member of the record's oneof appended
		m = append(m, byte(protowire.EncodeTag(idleField, protowire.BytesType)), 1, 'x')
	case 6: // the record cut short
		m = m[:rapid.IntRange(0, len(m)).Draw(t, "cut")]
	case 7: // the op's fields doubled (each then repeated)
		if len(m) > 1 && m[0] == byte(protowire.EncodeTag(opField, protowire.BytesType)) {
			if _, k := protowire.ConsumeVarint(m[1:]); k > 0 {
				in := m[1+k:]
				m = rewrapOp(m, in, false)
			}
		}
	}
	return m
}

// rewrapOp adds field bytes f to the op in record m, before or after its
// fields, fixing the op's length (m is returned with f appended when it
// is not an op record).
func rewrapOp(m, f []byte, front bool) []byte {
	if len(m) < 1 || m[0] != byte(protowire.EncodeTag(opField, protowire.BytesType)) {
		return append(m, f...)
	}
	n, k := protowire.ConsumeVarint(m[1:])
	if k < 0 || n > uint64(len(m)-1-k) {
		return append(m, f...)
	}
	in := bytes.Clone(m[1+k : 1+k+int(n)])
	if front {
		in = append(bytes.Clone(f), in...)
	} else {
		in = append(in, f...)
	}
	return protowire.AppendBytes([]byte{m[0]}, in)
}

// Each way an op record can be other than canonical is left to the
// runtime by the hand decoder and refused by both alike.
func TestOpRecordRefusals(t *testing.T) {
	o := snapOp{Key: bytes.Repeat([]byte{7}, 16), At: 5, Payload: bytes.Repeat([]byte{9}, 12), Version: 3, AddValue: -2, Principal: "alice"}
	m := opRecordMsg(&o)
	tag := byte(protowire.EncodeTag(opField, protowire.BytesType))
	vt := func(num protowire.Number) byte { return byte(protowire.EncodeTag(num, protowire.VarintType)) }
	bt := func(num protowire.Number) byte { return byte(protowire.EncodeTag(num, protowire.BytesType)) }
	at, payload := []byte{vt(opAt), 10}, append([]byte{bt(opPayload), 12}, o.Payload...)
	version, add := []byte{vt(opVersion), 3}, []byte{vt(opAddValue), 3}
	principal, key := append([]byte{bt(opPrincipal), 5}, "alice"...), append([]byte{bt(opKeyField), 16}, o.Key...)
	op := func(fields ...[]byte) []byte { return protowire.AppendBytes([]byte{tag}, bytes.Join(fields, nil)) }
	if !bytes.Equal(op(at, payload, version, add, principal, key), m) {
		t.Fatalf("record %x, built %x", m, op(at, payload, version, add, principal, key))
	}
	fields := m[2:] // a one-byte length
	for name, bad := range map[string][]byte{
		"unknown field 10":       op(at, payload, version, add, principal, key, []byte{vt(10), 1}),
		"unknown field 10 first": op([]byte{vt(10), 1}, at, payload, version, add, principal, key),
		"add_value as bytes":     op(at, payload, version, []byte{bt(opAddValue), 3}, principal, key),
		"at as bytes":            op([]byte{bt(opAt), 1, 10}, payload, version, add, principal, key),
		"key as varint":          op(at, payload, version, add, principal, []byte{vt(opKeyField), 2, 'a', 'b'}),
		"token 0 present":        op(at, payload, []byte{vt(opToken), 0}, version, add, principal, key),
		"empty resource present": op([]byte{bt(opResource), 0}, at, payload, version, add, principal, key),
		"at repeated":            op(at, at, payload, version, add, principal, key),
		"at out of order":        op(payload, at, version, add, principal, key),
		"a longer version":       op(at, payload, []byte{vt(opVersion), 0x83, 0}, add, principal, key),
		"a longer at tag":        op([]byte{vt(opAt) | 0x80, 0, 10}, payload, version, add, principal, key),
		"a longer length":        op(at, payload, version, add, append([]byte{bt(opPrincipal), 0x85, 0}, "alice"...), key),
		"a longer op length":     append([]byte{tag, byte(len(fields)) | 0x80, 0}, fields...),
		"op length past the end": append([]byte{tag, byte(len(fields) + 1)}, fields...),
		"op length short":        append([]byte{tag, byte(len(fields) - 1)}, fields...),
		"truncated":              m[:len(m)-1],
		"two members":            append(bytes.Clone(m), bt(idleField), 1, 'x'),
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := readOpRecord(bad); ok {
				t.Fatalf("%x read by hand", bad)
			}
			if err := sameDecoding(t, snapOfRecords(snapshotFormat, bad)); err == nil {
				t.Fatalf("%x accepted", bad)
			}
		})
	}
	if got, ok := readOpRecord(m); !ok || !reflect.DeepEqual(got, o) {
		t.Fatalf("readOpRecord(%x) = %+v, %v; want %+v", m, got, ok, o)
	}
	if !strings.Contains(sameDecodingErr(t, snapOfRecords(snapshotFormat, m, []byte{bt(idleField), 1, 'x'})), "after a later kind") {
		t.Fatal("an idle record after an op accepted")
	}
	resource := []byte{bt(5), 3, bt(1), 1, 'r'} // SnapshotRecord{resource: {name: "r"}}
	if !strings.Contains(sameDecodingErr(t, snapOfRecords(snapshotFormat, resource, m)), "after a later kind") {
		t.Fatal("an op record after a resource accepted")
	}
}

func sameDecodingErr(t *testing.T, b []byte) string {
	if err := sameDecoding(t, b); err != nil {
		return err.Error()
	}
	return ""
}

// A snapshot naming one op_id twice is refused at restore (by the id
// memory's putNew), and one naming it once restores it.
func TestRestoreRefusesARepeatedOp(t *testing.T) {
	o := snapOp{Key: bytes.Repeat([]byte{7}, 16), At: 5, Payload: bytes.Repeat([]byte{9}, 12), Version: 3}
	other := o
	other.Key = bytes.Repeat([]byte{8}, 16)
	once := snapOfRecords(snapshotFormat, opRecordMsg(&o), opRecordMsg(&other))
	if err := New().Restore(bytes.NewReader(once)); err != nil {
		t.Fatalf("two ops: %v", err)
	}
	twice := snapOfRecords(snapshotFormat, opRecordMsg(&o), opRecordMsg(&other), opRecordMsg(&o))
	if err := New().Restore(bytes.NewReader(twice)); err == nil || !strings.Contains(err.Error(), "repeated") {
		t.Fatalf("an op twice: %v, want refused as repeated", err)
	}
}

// What a restore reserves for op records is bounded by the snapshot's
// size, whatever its records: a stream of tiny records that begin with
// the op tag reserves nothing (the decoder refuses them one at a time).
func TestCountOpRecordsIsBounded(t *testing.T) {
	tag := byte(protowire.EncodeTag(opField, protowire.BytesType))
	var tiny []byte
	for range 1000 {
		tiny = append(tiny, 2, tag, 0) // SnapshotRecord{op: {}}
	}
	if n := countOpRecords(tiny); n != 0 {
		t.Fatalf("%d op records counted in 1,000 records of 3 bytes, want 0", n)
	}
	o := snapOp{Key: bytes.Repeat([]byte{7}, 16), Payload: bytes.Repeat([]byte{9}, 12)} // the smallest that restores
	if n := countOpRecords(snapOfRecords(snapshotFormat, opRecordMsg(&o))[len(snapOfRecords(snapshotFormat)):]); n != 1 {
		t.Fatalf("the smallest op record counted %d times, want 1", n)
	}
	v1 := snapOp{OpID: []byte{1}, Payload: bytes.Repeat([]byte{9}, 16)}
	if n := countOpRecords(snapOfRecords(snapshotFormatV1, opRecordMsg(&v1))[len(snapOfRecords(snapshotFormatV1)):]); n != 1 {
		t.Fatalf("the smallest fence-state/1 op record counted %d times, want 1", n)
	}
}
