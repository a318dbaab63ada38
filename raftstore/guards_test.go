package raftstore

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

var errIO = errors.New("injected: input/output error")

type failingStable struct{ raft.StableStore }

func (failingStable) Set(k, v []byte) error              { return errIO }
func (failingStable) SetUint64(k []byte, v uint64) error { return errIO }

type failingDelete struct{ raft.LogStore }

func (failingDelete) DeleteRange(min, max uint64) error { return errIO }

type countingLog struct {
	raft.LogStore
	calls int
}

func (c *countingLog) StoreLogs([]*raft.Log) error { c.calls++; return nil }

type failingSink struct{ raft.SnapshotSink }

func (failingSink) Write([]byte) (int, error) { return 0, errIO }
func (failingSink) Close() error              { return errIO }

// Every write path of the guards is fatal on error, once; after that the
// log refuses appends without touching the store.
func TestGuardsFailStop(t *testing.T) {
	for name, write := range map[string]func(fs *FailStop) error{
		"stable Set":       func(fs *FailStop) error { return (&GuardedStable{failingStable{}, fs}).Set([]byte("k"), nil) },
		"stable SetUint64": func(fs *FailStop) error { return (&GuardedStable{failingStable{}, fs}).SetUint64([]byte("k"), 1) },
		"log DeleteRange":  func(fs *FailStop) error { return (&GuardedLog{LogStore: failingDelete{}, Fail: fs}).DeleteRange(1, 2) },
		"snapshot Write": func(fs *FailStop) error {
			_, err := (&guardedSink{SnapshotSink: failingSink{}, g: &GuardedSnapshots{Fail: fs}}).Write([]byte("x"))
			return err
		},
		"snapshot Close": func(fs *FailStop) error {
			return (&guardedSink{SnapshotSink: failingSink{}, g: &GuardedSnapshots{Fail: fs}}).Close()
		},
	} {
		var calls []error
		fs := NewFailStop(func(err error) { calls = append(calls, err) })
		if err := write(fs); !errors.Is(err, errIO) {
			t.Errorf("%s: error %v, want the store's", name, err)
		}
		if err := write(fs); !errors.Is(err, errIO) {
			t.Errorf("%s again: error %v, want the store's", name, err)
		}
		if len(calls) != 1 || !errors.Is(calls[0], errIO) || !errors.Is(fs.Err(), errIO) {
			t.Errorf("%s: OnFatal calls %v, failed() %v; want one call with the store's error", name, calls, fs.Err())
		}
		inner := &countingLog{}
		if err := (&GuardedLog{LogStore: inner, Fail: fs}).StoreLogs([]*raft.Log{{}}); err == nil || inner.calls != 0 {
			t.Errorf("%s: StoreLogs after the fatal error = %v with %d store calls, want refused untouched", name, err, inner.calls)
		}
	}
}
