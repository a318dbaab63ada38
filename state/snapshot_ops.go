package state

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fenceworks/fence"
)

// Op records — one per remembered op_id, up to millions of them — are
// written and read by hand, like idle names and free locks: the bytes of
// SnapshotRecord{op: Op{...}} in its one canonical encoding (fields in
// number order, zero values absent), without a protobuf message per op
// or a reflection walk. TestOpRecordBytes holds appendOpRecord to the
// runtime's encoding; TestOpRecordDecoding holds readOpRecord to the
// generic decoder.

// opField is SnapshotRecord's op field number; the Op fields follow.
const (
	opField                                                 = 4
	opResource, opOpID, opAt, opPayload, opToken, opVersion = 1, 2, 3, 4, 5, 6
	opAddValue, opPrincipal, opKeyField, lastOpField        = 7, 8, 9, 9
)

// appendOp appends o's Op message (its fields, no length).
func appendOp(b []byte, o *snapOp) []byte {
	b = appendBytes(b, opResource, o.Resource)
	b = appendBytes(b, opOpID, o.OpID)
	b = appendSint(b, opAt, o.At)
	b = appendBytes(b, opPayload, o.Payload)
	b = appendUint(b, opToken, uint64(o.Token))
	b = appendUint(b, opVersion, o.Version)
	b = appendSint(b, opAddValue, o.AddValue)
	b = appendBytes(b, opPrincipal, o.Principal)
	return appendBytes(b, opKeyField, o.Key)
}

// appendBytes appends a bytes field (absent when empty).
func appendBytes[S ~string | ~[]byte](b []byte, num protowire.Number, v S) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(len(v)))
	return append(b, v...)
}

// sizeOp is the length of appendOp's output for o.
func sizeOp(o *snapOp) int {
	n := sizeBytes(len(o.Resource)) + sizeBytes(len(o.OpID)) + sizeVarint(protowire.EncodeZigZag(o.At)) + sizeBytes(len(o.Payload))
	n += sizeVarint(uint64(o.Token)) + sizeVarint(o.Version) + sizeVarint(protowire.EncodeZigZag(o.AddValue))
	return n + sizeBytes(len(o.Principal)) + sizeBytes(len(o.Key))
}

// sizeBytes and sizeVarint are the sizes of a field of fields 1..15 (a
// one-byte tag) holding n bytes or v, 0 when absent.
func sizeBytes(n int) int {
	if n == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

func sizeVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

// op writes o's record, length-prefixed, to the stream.
func (s *snapStream) op(o *snapOp) {
	if s.err != nil {
		return
	}
	n := sizeOp(o)
	s.buf = protowire.AppendVarint(s.buf, uint64(1+protowire.SizeVarint(uint64(n))+n))
	s.buf = protowire.AppendVarint(protowire.AppendTag(s.buf, opField, protowire.BytesType), uint64(n))
	s.buf = appendOp(s.buf, o)
	if len(s.buf) >= snapChunk {
		s.flush()
	}
}

// opEntry is a remembered op_id as the id memory holds it.
type opEntry = memEntry[opKey, opRecord]

// opEntry writes the record of e, a view's op (its principal named by
// principals), as op does: no copy of the entry, no allocation.
func (s *snapStream) opEntry(e *opEntry, principals []string) {
	o := snapOp{Key: e.key[:], At: e.at, Payload: e.val.payload[:], Version: e.val.version, AddValue: e.val.addValue, Principal: principals[e.val.owner]}
	s.op(&o)
}

// countOpRecords counts the records in b (a snapshot's records) that
// begin with the op field's tag and are at least minOpRecord bytes: at
// most the op records decoded from b, and all of them when b restores.
// It stops at the first bad length (the decoder then refuses b). The
// bound keeps what is reserved from them under 8 times b's size however
// b was made.
func countOpRecords(b []byte) int {
	n := 0
	for len(b) > 0 {
		size, k := protowire.ConsumeVarint(b)
		if k < 0 || size > uint64(len(b)-k) {
			break
		}
		if size >= minOpRecord && b[k] == byte(protowire.EncodeTag(opField, protowire.BytesType)) {
			n++
		}
		b = b[k+int(size):]
	}
	return n
}

// minOpRecord is less than the smallest op record a restore accepts: the
// op's tag and length, a payload (12 or 16 bytes, with its tag and length)
// and a 16-byte key or an op_id (with their tags and lengths).
const minOpRecord = 20

// readOpRecord reads msg (one record, its length prefix removed) as an op
// record if it is the canonical encoding of one: a SnapshotRecord with its
// op field alone, an Op of known fields, in number order, each once, with
// no zero value present and every varint (tags, lengths, values) in its
// shortest form. Otherwise ok is false and the record is left to the
// generic decoder, which refuses it (or accepts it) as before. Key,
// OpID and Payload alias msg.
func readOpRecord(msg []byte) (o snapOp, ok bool) {
	if len(msg) < 2 || msg[0] != byte(protowire.EncodeTag(opField, protowire.BytesType)) {
		return o, false
	}
	n, k := protowire.ConsumeVarint(msg[1:])
	if k < 0 || k != protowire.SizeVarint(n) || n != uint64(len(msg)-1-k) {
		return o, false
	}
	in := msg[1+k:]
	next := protowire.Number(1) // fields below it were read or passed
	for len(in) > 0 {
		num, typ := protowire.Number(in[0]>>3), protowire.Type(in[0]&7)
		if num < next || num > lastOpField {
			return o, false // a field out of order or again, unknown, or a longer tag (num >= 16)
		}
		next, in = num+1, in[1:]
		switch num {
		case opResource, opOpID, opPayload, opPrincipal, opKeyField:
			if typ != protowire.BytesType {
				return o, false
			}
			v, k := protowire.ConsumeBytes(in)
			if k < 0 || len(v) == 0 || k != protowire.SizeBytes(len(v)) {
				return o, false
			}
			in = in[k:]
			switch num {
			case opResource:
				o.Resource = string(v)
			case opOpID:
				o.OpID = v
			case opPayload:
				o.Payload = v
			case opPrincipal:
				o.Principal = string(v)
			default:
				o.Key = v
			}
		default:
			if typ != protowire.VarintType {
				return o, false
			}
			v, k := protowire.ConsumeVarint(in)
			if k < 0 || v == 0 || k != protowire.SizeVarint(v) {
				return o, false
			}
			in = in[k:]
			switch num {
			case opAt:
				o.At = protowire.DecodeZigZag(v)
			case opToken:
				o.Token = fence.Token(v)
			case opVersion:
				o.Version = v
			default:
				o.AddValue = protowire.DecodeZigZag(v)
			}
		}
	}
	return o, true
}
