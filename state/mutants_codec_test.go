package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing): the codec's bounds at their exact edges.

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A field this binary does not know is refused as unknown, at the top and
// inside the config, even alone (the canonical re-encoding would refuse it
// too, but as "not canonical": the reason must say what was wrong). (Kills
// knownFields removed or not walking into messages.)
func TestMutantCodecRefusesUnknownFieldAlone(t *testing.T) {
	for name, b := range map[string][]byte{
		"field 20":        {1, 0xa0, 0x01, 1},
		"config field 14": {1, 0x08, byte(OpConfig), 0x7a, 2, 0x70, 2},
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
