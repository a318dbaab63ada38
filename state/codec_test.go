package state

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var codecSamples = []Command{
	{Op: OpTick},
	{Op: OpTick, Now: math.MaxInt64},
	{Op: OpAcquire, Now: 12345, Name: "sku-42", Owner: "A", TTL: 5 * time.Second, Wait: time.Minute, LockDelay: time.Second, RequestID: "r1"},
	{Op: OpRenew, Now: -1, Name: "x", Token: 7, TTL: -time.Second},
	{Op: OpRelease, Name: "x", Token: math.MaxUint64},
	{Op: OpCancelWait, Name: "x", RequestID: "\xff\x00"},
	{Op: OpWrite, Name: "stock", Token: 2, Value: []byte("8"), OpID: "op"},
	{Op: OpAdd, Name: "n", Token: 2, Delta: math.MinInt64, OpID: "op"},
	{Op: OpBumpToken, Token: 1 << 40},
	{Op: 200, Name: "unknown ops still encode"},
	{Op: OpTick, Now: 5, Slack: 3 * time.Millisecond},
	{Op: OpAcquire, Now: 1, Slack: math.MaxInt64, Name: "x", Owner: "A", TTL: time.Second, OpID: "o"},
	{Op: OpCancelWait, Now: 3, Name: "x", RequestID: "r", Attempt: 7},
	{Op: OpCancelWait, Name: "x", RequestID: "r", Attempt: math.MaxUint32},
	{Op: OpConfig, Now: 9, Config: DefaultConfig()},
	{Op: OpConfig, Config: uncapped()},
	{Op: OpConfig, Config: Config{MaxTTL: -1, MaxResourceBytes: math.MinInt64, MaxWaiters: math.MaxInt64}},
	{Op: OpConfig},
	{Op: OpDelete, Now: 4, Name: "stock", Token: 3, OpID: "d1"},
	{Op: OpDelete},
	{Op: OpSessionOpen, Now: 2, TTL: 10 * time.Second, RequestID: "open-1"},
	{Op: OpSessionKeepAlive, Session: 1},
	{Op: OpSessionClose, Session: math.MaxUint64, Seq: 3, Ack: 2},
	{Op: OpAcquire, Now: 3, Name: "x", Owner: "A", Wait: time.Second, Session: 7, Seq: math.MaxUint64, Ack: 1},
	{Op: OpCancelWait, Name: "x", RequestID: "r", Attempt: 2, Session: 1},
	{Op: OpConfig, Config: Config{MaxSessions: math.MaxInt64, MaxSessionResults: -1}},
}

func sameCommand(a, b Command) bool {
	a.Value, b.Value = nil, nil
	return reflect.DeepEqual(a, b)
}

func TestCodecRoundTrip(t *testing.T) {
	for _, c := range codecSamples {
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		var d Command
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !sameCommand(c, d) || !bytes.Equal(c.Value, d.Value) {
			t.Fatalf("round trip: %+v became %+v", c, d)
		}
	}
}

// TestCodecBytes: a few commands' exact encodings, field by field: the
// version byte, then statepb.Command's fields in number order, each a tag
// (field<<3 | wire type) and its value, zero fields absent, signed fields
// zigzag (the golden file pins one command of every op).
func TestCodecBytes(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		want string
	}{
		{Command{Op: OpTick}, "01 0805"},
		{Command{Op: OpCancelWait, Name: "x", RequestID: "r"}, "01 0804 220178 4a0172"},
		{Command{Op: OpAdd, Now: 1, Name: "n", Token: 2, Delta: -1, OpID: "o"}, "01 0807 1002 22016e 5002 6001 6a016f"},
		{Command{Op: OpCancelWait, Name: "x", RequestID: "r", Attempt: 2}, "01 0804 220178 4a0172 7002"},
		{Command{Op: OpDelete, Name: "x", Token: 1}, "01 080a 220178 5001"},
		{Command{Op: OpConfig, Config: Config{MaxOps: 3, MaxResourceBytes: 1}}, "01 0809 7a04 1006 4802"},
		{Command{Op: OpSessionOpen, TTL: 1}, "01 080b 3002"},
		{Command{Op: OpSessionKeepAlive, Session: 1, Seq: 2, Ack: 1}, "01 080c 800101 880102 900101"},
		{Command{Op: OpConfig, Config: Config{MaxSessions: 1, MaxSessionResults: 2}}, "01 0809 7a04 5802 6004"},
	} {
		want, _ := hex.DecodeString(strings.ReplaceAll(tc.want, " ", ""))
		b, err := tc.c.MarshalBinary()
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("%+v: %x (%v), want %x", tc.c, b, err, want)
		}
	}
}

// TestCodecRefuses: input that is not exactly one v1 command is refused
// with ErrBadCommand and the reason, never decoded to something.
func TestCodecRefuses(t *testing.T) {
	good, _ := Command{Op: OpWrite, Name: "s", Token: 1, Value: []byte("v")}.MarshalBinary()
	ff := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	for _, tc := range []struct {
		name string
		b    []byte
		why  string // in the error
	}{
		{"empty", []byte{}, "empty"},
		{"version 0", []byte{0, 0x08, 5}, "unknown version 0"},
		{"version 2", []byte{2, 0x08, 5}, "unknown version 2"},
		{"version 255", []byte{255, 0x08, 5}, "unknown version 255"},
		{"truncated", good[:len(good)-1], ""},
		{"trailing zero", append(bytes.Clone(good), 0), ""},
		{"unknown field 20", []byte{1, 0x08, 5, 0xa0, 0x01, 1}, "unknown field in Command"},
		{"known field, wrong wire type", []byte{1, 0x0d, 5, 0, 0, 0}, "unknown field in Command"},
		{"zero present", []byte{1, 0x08, 5, 0x10, 0}, "canonical"},
		{"overlong varint", []byte{1, 0x08, 0x85, 0x00}, "canonical"},
		{"fields out of order", []byte{1, 0x10, 2, 0x08, 5}, "canonical"},
		{"field repeated", []byte{1, 0x08, 5, 0x08, 5}, "canonical"},
		{"huge length", []byte{1, 0x22, 0xff, 0xff, 0xff, 0xff, 0x0f}, ""},
		{"oversized", make([]byte, MaxCommandBytes+1), "more than"},
		{"attempt > 2^32", []byte{1, 0x08, 4, 0x70, 0x80, 0x80, 0x80, 0x80, 0x10}, "canonical"},
		{"op > 255", []byte{1, 0x08, 0x80, 0x02}, "out of range"},
		{"slack > MaxInt64", append([]byte{1, 0x08, 5, 0x18}, ff...), "out of range"},
		{"config present, empty", []byte{1, 0x08, 9, 0x7a, 0}, "canonical"},
		{"config unknown field", []byte{1, 0x08, 9, 0x7a, 3, 0x90, 0x01, 2}, "unknown field in Config"},
		{"config zero present", []byte{1, 0x08, 9, 0x7a, 2, 0x10, 0}, "canonical"},
	} {
		var c Command
		err := c.UnmarshalBinary(tc.b)
		var de *DecodeError
		if !errors.Is(err, ErrBadCommand) || errors.Is(err, ErrBadSnapshot) || !errors.As(err, &de) || de.Snapshot || !strings.Contains(de.Reason, tc.why) {
			t.Errorf("%s: err %v (decoded %+v), want a command's *DecodeError (ErrBadCommand) with %q", tc.name, err, c, tc.why)
		}
	}
	if _, err := (Command{Op: OpTick, Slack: -1}).MarshalBinary(); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("negative slack encoded: %v", err)
	}
	big := Command{Op: OpWrite, Name: "s", Value: make([]byte, MaxCommandBytes)}
	if _, err := big.MarshalBinary(); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("oversized encode: %v", err)
	}
	max := Command{Op: OpWrite, Now: math.MinInt64, Name: string(make([]byte, 512)), Token: 1 << 53, Value: make([]byte, 1<<20), OpID: string(make([]byte, 256))}
	if _, err := max.MarshalBinary(); err != nil {
		t.Fatalf("the largest valid write must encode: %v", err)
	}
}

// FuzzDecodeCommand: decoding never panics, and whatever decodes encodes
// back to the same bytes and decodes to the same command.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range codecSamples {
		b, _ := c.MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0x08, 5, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) // slack > MaxInt64
	f.Add([]byte{2, 0x08, 5})                                                                   // an unknown version
	f.Add([]byte{1, 0x08, 9, 0x7a, 0})                                                          // an empty config present
	f.Add([]byte{1, 0x08, 4, 0x70, 1, 0x7a, 2, 0x10, 2})                                        // cancel with attempt and a config
	f.Add([]byte{1, 0x08, 12, 0x80, 0x01, 1, 0x88, 0x01, 2, 0x90, 0x01, 1})                     // keepalive with session, seq, ack
	f.Add([]byte{1, 0x10, 2, 0x08, 5})                                                          // fields out of order
	f.Add([]byte{1, 0x08, 5, 0xa0, 0x01, 1})                                                    // an unknown field
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", c, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("not canonical: %x encodes back as %x", b, again)
		}
		var d Command
		if err := d.UnmarshalBinary(again); err != nil || !sameCommand(c, d) || !bytes.Equal(c.Value, d.Value) {
			t.Fatalf("decode(encode(c)) != c: %+v vs %+v (%v)", c, d, err)
		}
		// Applying any decodable command never panics either.
		New().Apply(c)
	})
}
