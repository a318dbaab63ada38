package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing): the codec's bounds at their exact edges.

import (
	"bytes"
	"errors"
	"testing"
)

// A mask bit beyond every known field is refused even when no other check
// would trip (nothing follows the mask). (Kills "d.err == nil && mask>>fields
// != 0" negated: the existing "unknown field" case is also refused later, by
// the attempt it then tries to read.)
func TestMutantCodecRefusesUnknownMaskBitAlone(t *testing.T) {
	for name, b := range map[string][]byte{
		"v1, bit 20":         {1, byte(OpTick), 0x80, 0x80, 0x40},
		"config mask bit 12": {1, byte(OpConfig), 0x80, 0x40, 0x80, 0x20},
	} {
		var c Command
		if err := c.UnmarshalBinary(b); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: err %v (decoded %+v), want ErrBadCommand", name, err, c)
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
