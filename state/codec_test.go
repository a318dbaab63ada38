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

// TestCodecBytes: a few commands' exact encodings, field by field (the
// golden file pins one command of every op).
func TestCodecBytes(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		want []byte
	}{
		{Command{Op: OpTick}, []byte{1, 5, 0}},
		{Command{Op: OpCancelWait, Name: "x", RequestID: "r"}, []byte{1, 4, 0x42, 1, 'x', 1, 'r'}},
		{Command{Op: OpAdd, Now: 1, Name: "n", Token: 2, Delta: -1, OpID: "o"}, []byte{1, 7, 0x83, 0x0d, 2, 1, 'n', 2, 1, 1, 'o'}},
		{Command{Op: OpCancelWait, Name: "x", RequestID: "r", Attempt: 2}, []byte{1, 4, 0xc2, 0x20, 1, 'x', 1, 'r', 2}},
		{Command{Op: OpDelete, Name: "x", Token: 1}, []byte{1, 10, 0x82, 0x01, 1, 'x', 1}},
		{Command{Op: OpConfig, Config: Config{MaxOps: 3, MaxResourceBytes: 1}}, []byte{1, 9, 0x80, 0x40, 0x82, 0x02, 6, 2}},
		{Command{Op: OpSessionOpen, TTL: 1}, []byte{1, 11, 0x08, 2}},
		{Command{Op: OpSessionKeepAlive, Session: 1, Seq: 2, Ack: 1}, []byte{1, 12, 0x80, 0x80, 0x07, 1, 2, 1}},
		{Command{Op: OpConfig, Config: Config{MaxSessions: 1, MaxSessionResults: 2}}, []byte{1, 9, 0x80, 0x40, 0x80, 0x18, 2, 4}},
	} {
		b, err := tc.c.MarshalBinary()
		if err != nil || !bytes.Equal(b, tc.want) {
			t.Errorf("%+v: %x (%v), want %x", tc.c, b, err, tc.want)
		}
	}
}

func TestCodecRefuses(t *testing.T) {
	good, _ := Command{Op: OpWrite, Name: "s", Token: 1, Value: []byte("v")}.MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":           {},
		"version 0":       {0, 5, 0},
		"version 2":       {2, 5, 0},
		"version 255":     {255, 5, 0},
		"truncated":       good[:len(good)-1],
		"trailing":        append(bytes.Clone(good), 0),
		"unknown field":   {1, 5, 0x80, 0x80, 0x10},
		"zero present":    {1, 5, 1, 0},
		"overlong varint": {1, 5, 0x81, 0x00, 2},
		"huge length":     {1, 5, 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"oversized":       make([]byte, MaxCommandBytes+1),
		"attempt > 2^32":  {1, 4, 0x80, 0x20, 0x80, 0x80, 0x80, 0x80, 0x10},
		"config mask 0":   {1, 9, 0x80, 0x40, 0},
		"config unknown":  {1, 9, 0x80, 0x40, 0x80, 0x20, 2},
		"config zero":     {1, 9, 0x80, 0x40, 1, 0},
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
	f.Add([]byte{2, 5, 0x80, 0x20, 0x01})                                                       // an unknown version
	f.Add([]byte{1, 9, 0x00})                                                                   // OpConfig with no config
	f.Add([]byte{1, 4, 0x80, 0x60, 0x01, 0x01, 0x02})                                           // cancel with attempt and a config
	f.Add([]byte{1, 9, 0x80, 0x40, 0x80, 0x04, 0x02})                                           // a config mask
	f.Add([]byte{1, 12, 0x80, 0x80, 0x07, 1, 2, 1})                                             // keepalive with session, seq, ack
	f.Add([]byte{1, 1, 0x80, 0x80, 0x01, 1})                                                    // an acquire with a session
	f.Add([]byte{1, 5, 0x80, 0x80, 0x10, 1})                                                    // an unknown field
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
