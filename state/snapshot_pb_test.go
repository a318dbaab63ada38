package state

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence/state/internal/statepb"
)

// Helpers for tests that craft or edit snapshots as messages.

// encodeSnap is the snapshot of header h and records recs, each
// length-prefixed, written as given (deterministically, but with no check:
// tests build refused snapshots with it).
func encodeSnap(h *statepb.SnapshotHeader, recs ...*statepb.SnapshotRecord) []byte {
	var b []byte
	for _, m := range append([]proto.Message{h}, recsAsMessages(recs)...) {
		enc, err := deterministic.Marshal(m)
		if err != nil {
			panic(err)
		}
		b = protowire.AppendVarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return b
}

func recsAsMessages(recs []*statepb.SnapshotRecord) []proto.Message {
	out := make([]proto.Message, len(recs))
	for i, r := range recs {
		out[i] = r
	}
	return out
}

// snapMessages splits a snapshot into its header and records.
func snapMessages(t testing.TB, b []byte) (*statepb.SnapshotHeader, []*statepb.SnapshotRecord) {
	t.Helper()
	msgs := splitSnap(t, b)
	var h statepb.SnapshotHeader
	if err := proto.Unmarshal(msgs[0], &h); err != nil {
		t.Fatal(err)
	}
	var recs []*statepb.SnapshotRecord
	for _, m := range msgs[1:] {
		r := new(statepb.SnapshotRecord)
		if err := proto.Unmarshal(m, r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return &h, recs
}

func splitSnap(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		msg, rest, err := nextMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msg)
		b = rest
	}
	return out
}

// snapHex is a snapshot as text: one line per message, its kind, a tab
// and its length-prefixed bytes in hex (what the golden file holds).
func snapHex(t testing.TB, b []byte) string {
	t.Helper()
	var s strings.Builder
	for i, m := range splitSnap(t, b) {
		kind := "header"
		if i > 0 {
			var r statepb.SnapshotRecord
			if err := proto.Unmarshal(m, &r); err != nil {
				t.Fatal(err)
			}
			kind = string(r.ProtoReflect().WhichOneof(r.ProtoReflect().Descriptor().Oneofs().Get(0)).Name())
		}
		fmt.Fprintf(&s, "%s\t%s\n", kind, hex.EncodeToString(protowire.AppendBytes(nil, m)))
	}
	return s.String()
}

// snapFromHex is the inverse of snapHex.
func snapFromHex(t testing.TB, s string) []byte {
	t.Helper()
	var b []byte
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		_, h, _ := strings.Cut(line, "\t")
		enc, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, enc...)
	}
	return b
}

// emptySnapHeader is the header of an empty machine with cfg (nil: none).
func emptySnapHeader(cfg *Config) *statepb.SnapshotHeader {
	h := &statepb.SnapshotHeader{Format: snapshotFormat}
	if cfg != nil {
		h.Config = configPB(*cfg)
	}
	return h
}

// encodeSnapRaw is the snapshot of these message bytes, each
// length-prefixed.
func encodeSnapRaw(first []byte, msgs ...[]byte) []byte {
	b := protowire.AppendBytes(nil, first)
	for _, m := range msgs {
		b = protowire.AppendBytes(b, m)
	}
	return b
}
