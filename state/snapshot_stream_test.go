package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"
)

// bigMachine has more state than one snapChunk: locks held with and
// without request_ids and sessions, queues, remembered requests, ops,
// resources, idle locks, saved results, and names and ids that JSON
// escapes (HTML characters, U+2028, request_ids that are not UTF-8).
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

// The streamed snapshot is exactly json.Marshal of the document (the bytes
// snapshots had before they were streamed, so every snapshot written before
// restores and compares equal), written in chunks, not in one piece.
func TestSnapshotStreamIsMarshal(t *testing.T) {
	for name, m := range map[string]*Machine{"new": New(), "configured": NewWithConfig(DefaultConfig()),
		"busy": busyMachine(t), "sessions": sessionMachine(t), "big": bigMachine(t)} {
		t.Run(name, func(t *testing.T) {
			v := m.SnapshotView()
			want, err := json.Marshal(v.doc)
			if err != nil {
				t.Fatal(err)
			}
			var got countingWrites
			n, err := v.WriteTo(&got)
			if err != nil || n != int64(len(want)) {
				t.Fatalf("WriteTo = %d, %v; want %d bytes", n, err, len(want))
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("streamed snapshot differs from json.Marshal:\n%s\n%s", got.Bytes(), want)
			}
			if len(want) > 4*snapChunk && got.largest > 2*snapChunk {
				t.Fatalf("a %d-byte snapshot was written with a %d-byte write", len(want), got.largest)
			}
			r := New()
			if err := r.Restore(bytes.NewReader(want)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(snapshotBytes(t, r), want) {
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
