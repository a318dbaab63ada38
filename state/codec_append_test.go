package state

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// AppendBinary appends exactly MarshalBinary's bytes after what the buffer
// holds, and on a refusal returns the buffer as it was (the node reuses one
// buffer per pooled proposal).
//
// Planted: appendEncodedCommand dropping the version byte, or returning
// the grown buffer on a refusal — caught.
func TestCommandAppendBinary(t *testing.T) {
	c := Command{Op: OpAcquire, Name: "a/b", Owner: "o", TTL: time.Minute, RequestID: "r-1"}
	want, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("prefix")
	got, err := c.AppendBinary(append([]byte(nil), prefix...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(append([]byte(nil), prefix...), want...)) {
		t.Fatalf("AppendBinary = %x, want prefix then %x", got, want)
	}
	big := Command{Op: OpWrite, Name: "x", Value: []byte(strings.Repeat("v", MaxCommandBytes))}
	out, err := big.AppendBinary(prefix)
	if !errors.Is(err, ErrBadCommand) {
		t.Fatalf("a command past MaxCommandBytes: err %v, want ErrBadCommand", err)
	}
	if !bytes.Equal(out, prefix) {
		t.Fatalf("refused AppendBinary returned %d bytes, want the buffer as it was (%d)", len(out), len(prefix))
	}
}
