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

type countingStable struct{ n *int }

func (c countingStable) Set(k, v []byte) error              { *c.n++; return nil }
func (c countingStable) Get(k []byte) ([]byte, error)       { return nil, nil }
func (c countingStable) SetUint64(k []byte, v uint64) error { *c.n++; return nil }
func (c countingStable) GetUint64(k []byte) (uint64, error) { return 0, nil }

type failingDelete struct{ raft.LogStore }

func (failingDelete) DeleteRange(min, max uint64) error { return errIO }

type countingLog struct {
	raft.LogStore
	calls int
}

func (c *countingLog) StoreLogs([]*raft.Log) error       { c.calls++; return nil }
func (c *countingLog) DeleteRange(min, max uint64) error { c.calls++; return nil }

// snapStore creates sinks with create (failing or counting).
type snapStore struct {
	raft.SnapshotStore
	create func() (raft.SnapshotSink, error)
}

func (s snapStore) Create(raft.SnapshotVersion, uint64, uint64, raft.Configuration, uint64, raft.Transport) (raft.SnapshotSink, error) {
	return s.create()
}

type failingSink struct{ raft.SnapshotSink }

func (failingSink) Write([]byte) (int, error) { return 0, errIO }
func (failingSink) Close() error              { return errIO }

// Every write path of the guards is fatal on error, once; after that the
// log refuses appends and deletions, and the snapshot store creates no
// snapshot (its own or a leader's install), without touching the store.
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
		"snapshot Create": func(fs *FailStop) error {
			g := &GuardedSnapshots{SnapshotStore: snapStore{create: func() (raft.SnapshotSink, error) { return nil, errIO }}, Fail: fs}
			_, err := g.Create(1, 1, 1, raft.Configuration{}, 1, nil)
			return err
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
		if err := (&GuardedLog{LogStore: inner, Fail: fs}).DeleteRange(1, 2); err == nil || inner.calls != 0 {
			t.Errorf("%s: DeleteRange after the fatal error = %v with %d store calls, want refused untouched", name, err, inner.calls)
		}
		sets := 0
		stable := &GuardedStable{StableStore: countingStable{&sets}, Fail: fs}
		if err := stable.Set([]byte("LastVoteCand"), []byte("x")); err == nil || sets != 0 {
			t.Errorf("%s: stable Set (a vote) after the fatal error = %v with %d store calls, want refused untouched", name, err, sets)
		}
		if err := stable.SetUint64([]byte("CurrentTerm"), 2); err != nil || sets != 1 {
			t.Errorf("%s: stable SetUint64 (a term) after the fatal error = %v with %d store calls, want stored (raft panics otherwise)", name, err, sets)
		}
		creates := 0
		snaps := &GuardedSnapshots{SnapshotStore: snapStore{create: func() (raft.SnapshotSink, error) { creates++; return nil, nil }}, Fail: fs}
		if _, err := snaps.Create(1, 1, 1, raft.Configuration{}, 1, nil); err == nil || creates != 0 {
			t.Errorf("%s: snapshot Create after the fatal error = %v with %d store calls, want refused untouched", name, err, creates)
		}
		if len(calls) != 1 {
			t.Errorf("%s: OnFatal called %d times, want once", name, len(calls))
		}
	}
}
