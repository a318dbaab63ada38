package node

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// Regression (FuzzDecodeGroup/f47690ed58d40093): decodeGroup took a varint
// with trailing 0x80 bytes (Now 50 written as e4 00 instead of 64), so one
// group had two encodings, against the canonical encoding groupcodec.go
// promises. Every varint of the header and every command length longer
// than its shortest encoding is now refused.
func TestDecodeGroupRefusesOverlongVarints(t *testing.T) {
	crasher, _ := hex.DecodeString("c1e40030010c0130308b8b8b8b8b8b308b30")
	if _, err := decodeGroup(crasher, nil); !errors.Is(err, errBadGroup) {
		t.Fatalf("the fuzzer's input: %v, want errBadGroup", err)
	}
	cmd, err := state.Command{Op: state.OpAcquire, Name: "a", Owner: "o", TTL: time.Second}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// overlong writes v's shortest varint one byte longer.
	overlong := func(v []byte) []byte {
		v = slices.Clone(v)
		v[len(v)-1] |= 0x80
		return append(v, 0)
	}
	now := binary.AppendVarint(nil, 50)
	slack := binary.AppendUvarint(nil, uint64(time.Millisecond))
	count := binary.AppendUvarint(nil, 1)
	length := binary.AppendUvarint(nil, uint64(len(cmd)))
	entry := func(parts ...[]byte) []byte {
		return slices.Concat(append([][]byte{{groupMarker}}, parts...)...)
	}
	good := entry(now, slack, count, length, cmd)
	if !slices.Equal(good, appendGroupCommand(appendGroupHeader(nil, 50, time.Millisecond, 1), cmd)) {
		t.Fatal("the test builds the entry differently from the proposer")
	}
	if cmds, err := decodeGroup(good, nil); err != nil || len(cmds) != 1 || cmds[0].Now != 50 || cmds[0].Slack != time.Millisecond {
		t.Fatalf("canonical entry: %+v, %v", cmds, err)
	}
	for name, b := range map[string][]byte{
		"now":    entry(overlong(now), slack, count, length, cmd),
		"slack":  entry(now, overlong(slack), count, length, cmd),
		"count":  entry(now, slack, overlong(count), length, cmd),
		"length": entry(now, slack, count, overlong(length), cmd),
	} {
		if _, err := decodeGroup(b, nil); !errors.Is(err, errBadGroup) {
			t.Errorf("overlong %s (%x): %v, want errBadGroup", name, b, err)
		}
	}
}
