package state

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"
)

// bigMachine has more state than one snapChunk: locks held with and
// without request_ids and sessions, queues, remembered requests, ops,
// resources, idle locks, saved results, and names and ids with HTML
// characters, U+2028 and request_ids that are not UTF-8.
func bigMachine(t *testing.T) *Machine {
	t.Helper()
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, Command{Op: OpSessionOpen, TTL: time.Minute, RequestID: "open-<&>"})
	for i := range 3000 {
		name := "lock/<" + strconv.Itoa(i) + ">&é\u2028"
		switch i % 4 {
		case 0:
			mustOK(t, m, acq(0, name, "A&B", time.Hour))
		case 1:
			mustOK(t, m, Command{Op: OpAcquire, Name: name, Owner: "o", TTL: time.Hour, RequestID: "r\xff" + strconv.Itoa(i)})
		case 2:
			mustOK(t, m, Command{Op: OpAcquire, Name: name, Owner: "s", Session: s, Seq: uint64(i), Ack: uint64(i) - 1})
		case 3:
			l := mustOK(t, m, Command{Op: OpAcquire, Name: name, Owner: "w", TTL: time.Second, RequestID: "q" + strconv.Itoa(i)}).Lease
			mustOK(t, m, waitAcq(0, name, "x", time.Second, time.Hour, "qq"+strconv.Itoa(i)))
			mustOK(t, m, write(0, "res-"+strconv.Itoa(i), l.Token, "<value>", "op"+strconv.Itoa(i)))
			mustOK(t, m, rel(0, name, l.Token))
		}
	}
	mustOK(t, m, tick(2*int64(time.Hour)))
	return m
}

// countingWrites records every Write's size.
type countingWrites struct {
	bytes.Buffer
	largest int
}

func (w *countingWrites) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	return w.Buffer.Write(p)
}

// The streamed snapshot is the header and then one length-prefixed record
// per element, written in chunks, not in one piece, and it restores to a
// machine that writes the same bytes.
func TestSnapshotStreamIsRecords(t *testing.T) {
	for name, m := range map[string]*Machine{"new": New(), "configured": NewWithConfig(DefaultConfig()),
		"busy": busyMachine(t), "sessions": sessionMachine(t), "big": bigMachine(t)} {
		t.Run(name, func(t *testing.T) {
			v := m.SnapshotView()
			var got countingWrites
			n, err := v.WriteTo(&got)
			if err != nil || n != int64(got.Len()) {
				t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, got.Len())
			}
			d := v.doc
			want := 1 + len(d.Locks) + len(d.Idle) + len(d.Requests) + len(d.Ops) + len(d.Resources) + len(d.Sessions)
			if msgs := splitSnap(t, got.Bytes()); len(msgs) != want {
				t.Fatalf("%d messages, want a header and %d records", len(msgs), want-1)
			}
			if got.Len() > 4*snapChunk && got.largest > 2*snapChunk {
				t.Fatalf("a %d-byte snapshot was written with a %d-byte write", got.Len(), got.largest)
			}
			r := New()
			if err := r.Restore(bytes.NewReader(got.Bytes())); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(snapshotBytes(t, r), got.Bytes()) {
				t.Fatal("restore then snapshot differs")
			}
		})
	}
}

type failingWriter struct{ after int }

var errWrite = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errWrite
	}
	w.after--
	return len(p), nil
}

// A write error ends the snapshot and is returned.
func TestSnapshotStreamWriteError(t *testing.T) {
	v := bigMachine(t).SnapshotView()
	for _, after := range []int{0, 1, 3} {
		if _, err := v.WriteTo(&failingWriter{after: after}); !errors.Is(err, errWrite) {
			t.Fatalf("after %d writes: err %v, want %v", after, err, errWrite)
		}
	}
}
