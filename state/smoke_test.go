package state

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestSmoke(t *testing.T) {
	m := New(Config{})
	r := m.Apply(Command{Op: OpAcquire, Name: "a", Owner: "A", TTL: 5 * time.Second})
	if r.Err != nil || r.Lease.Token != 1 {
		t.Fatal(r)
	}
	r = m.Apply(Command{Op: OpAcquire, Now: int64(4 * time.Second), Name: "a", Owner: "B", TTL: 5 * time.Second})
	if !errors.Is(r.Err, fence.ErrBusy) {
		t.Fatal(r)
	}
}
