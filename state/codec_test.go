package state

import (
	"bytes"
	"errors"
	"math"
	"reflect"
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

func TestCodecRefuses(t *testing.T) {
	good, _ := Command{Op: OpWrite, Name: "s", Token: 1, Value: []byte("v")}.MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":           {},
		"version 0":       {0, 5, 0},
		"truncated":       good[:len(good)-1],
		"trailing":        append(bytes.Clone(good), 0),
		"unknown field":   {1, 5, 0x80, 0x20},
		"zero present":    {1, 5, 1, 0},
		"overlong varint": {1, 5, 0x81, 0x00, 2},
		"huge length":     {1, 5, 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"oversized":       make([]byte, MaxCommandBytes+1),
	} {
		var c Command
		if err := c.UnmarshalBinary(b); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: err %v, want ErrBadCommand", name, err)
		}
	}
	if _, err := (Command{Op: OpTick, Slack: -1}).MarshalBinary(); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("negative slack encoded: %v", err)
	}
	var c Command
	if err := c.UnmarshalBinary([]byte{1, 5, 0x80, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("slack above MaxInt64 decoded: %v (%+v)", err, c)
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
	f.Add([]byte{1, 5, 0x80, 0x10})
	f.Add([]byte{1, 1, 0xff, 0x0f})
	f.Add([]byte{1, 5, 0x81, 0x10, 0x0a, 0x05})                                                 // tick, Now and Slack
	f.Add([]byte{1, 5, 0x80, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) // slack > MaxInt64
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
		New(Config{}).Apply(c)
	})
}
