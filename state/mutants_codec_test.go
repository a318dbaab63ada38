package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing): the codec's bounds at their exact edges.

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// A field this binary does not know is refused as unknown, at the top and
// inside the config, even alone (the canonical re-encoding would refuse it
// too, but as "not canonical": the reason must say what was wrong). (Kills
// knownFields removed or not walking into messages.)
func TestMutantCodecRefusesUnknownFieldAlone(t *testing.T) {
	for name, b := range map[string][]byte{
		"field 20":        {1, 0xa0, 0x01, 1},
		"config field 18": {1, 0x08, byte(OpConfig), 0x7a, 3, 0x90, 0x01, 2},
	} {
		var c Command
		err := c.UnmarshalBinary(b)
		if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: err %v (decoded %+v), want ErrBadCommand naming an unknown field", name, err, c)
		}
	}
}

// A command that encodes to exactly MaxCommandBytes is encoded and decoded;
// one byte more is refused both ways. (Kills "len(b) > MaxCommandBytes" →
// ">=" in encodeCommand and in decodeCommand.)
func TestMutantCodecExactlyMaxCommandBytes(t *testing.T) {
	base := Command{Op: OpWrite, Now: 1, Name: "r", Token: 1, OpID: "op"}
	var exact []byte
	var cmd Command
	for n := MaxCommandBytes - 64; n <= MaxCommandBytes; n++ {
		c := base
		c.Value = bytes.Repeat([]byte{'v'}, n)
		b, err := c.MarshalBinary()
		if err != nil {
			continue
		}
		if len(b) == MaxCommandBytes {
			exact, cmd = b, c
			break
		}
	}
	if exact == nil {
		t.Fatal("no value length encodes to exactly MaxCommandBytes")
	}
	var got Command
	if err := got.UnmarshalBinary(exact); err != nil {
		t.Fatalf("decode of a %d-byte command: %v", len(exact), err)
	}
	if !bytes.Equal(got.Value, cmd.Value) || got.Name != cmd.Name || got.OpID != cmd.OpID {
		t.Fatal("round trip at MaxCommandBytes changed the command")
	}
	over := cmd
	over.Value = append(bytes.Clone(cmd.Value), 'v')
	if _, err := over.MarshalBinary(); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("encode of MaxCommandBytes+1: %v, want ErrBadCommand", err)
	}
}

// Each variable-length field of a command may be the long one: a command
// whose name, owner, request_id, op_id or value alone is far longer than
// the others encodes and decodes. (Kills a "+" of encodeCommand's capacity
// hint turned "-": the capacity goes negative and make panics.)
func TestMutantCodecOneLongField(t *testing.T) {
	long := strings.Repeat("x", 200)
	for name, c := range map[string]Command{
		"name":       {Op: OpAcquire, Name: long, TTL: time.Second},
		"owner":      {Op: OpAcquire, Name: "n", Owner: long, TTL: time.Second},
		"request_id": {Op: OpAcquire, Name: "n", TTL: time.Second, RequestID: long},
		"op_id":      {Op: OpWrite, Name: "n", Token: 1, OpID: long},
		"value":      {Op: OpWrite, Name: "n", Token: 1, Value: []byte(long)},
	} {
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got Command
		if err := got.UnmarshalBinary(b); err != nil || got.Name != c.Name || got.Owner != c.Owner ||
			got.RequestID != c.RequestID || got.OpID != c.OpID || string(got.Value) != string(c.Value) {
			t.Fatalf("%s: decoded %+v, %v", name, got, err)
		}
	}
}
