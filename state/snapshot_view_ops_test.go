package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"
	"unsafe"
)

// A view holds the id memory's op entries as they are (56 bytes each, no
// record built per op) and writes them as the records of those ops:
// the same bytes as records built one by one from the memory, with
// principals that come and go (their numbers reused) and the memory's
// ring wrapped by forgetting.
func TestSnapshotViewOpsAreTheMemorysEntries(t *testing.T) {
	m := opsMachine(t)
	v := m.snapshotView()
	if len(v.doc.Ops) != m.ops.len() || len(v.doc.Ops) == 0 || len(v.doc.OpRecords) != 0 {
		t.Fatalf("view: %d op entries and %d records, memory %d", len(v.doc.Ops), len(v.doc.OpRecords), m.ops.len())
	}
	if size := unsafe.Sizeof(v.doc.Ops[0]); size > 56 {
		t.Fatalf("a view's op is %d bytes, want the memory's 56", size)
	}
	var got bytes.Buffer
	if _, err := v.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	// The oracle: each op a record built from the memory's entry.
	d := *v.doc
	d.Ops, d.OpPrincipals = nil, nil
	m.ops.each(func(k opKey, at int64, r opRecord) {
		d.OpRecords = append(d.OpRecords, snapOp{Key: bytes.Clone(k[:]), At: at, Payload: bytes.Clone(r.payload[:]),
			Version: r.version, AddValue: r.addValue, Principal: m.ops.principal(r.owner)})
	})
	var want bytes.Buffer
	if _, err := writeSnapDoc(&want, &d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("view wrote %d bytes, the records %d bytes: they differ", got.Len(), want.Len())
	}
	r := New()
	if err := r.Restore(bytes.NewReader(got.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), got.Bytes()) {
		t.Fatal("restore then snapshot differs")
	}
}

// opsMachine remembers the last ~40 of 150 op_ids, of writes and adds by
// principals that come and go (a's number freed, then reused).
func opsMachine(t *testing.T) *Machine {
	t.Helper()
	m := New()
	c := DefaultConfig()
	c.MaxOps = 40
	mustOK(t, m, Command{Op: OpConfig, Now: at(0), Config: c})
	tok := mustOK(t, m, acq(at(0), "l", "o", time.Hour)).Lease.Token
	principals := []string{"", "token:a", "token:b", "token:c-" + "é"}
	for i := range 150 {
		p := principals[i%len(principals)]
		if i > 60 && p == "token:a" {
			p = fmt.Sprintf("token:late-%d", i%3) // a's number freed, then reused
		}
		cmd := writeAs(at(float64(i)*200), fmt.Sprintf("r%d", i%5), tok, fmt.Sprintf("op-%d", i), p)
		if i%3 == 0 {
			cmd = add(at(float64(i)*200), fmt.Sprintf("n%d", i%2), tok, int64(i)-70, fmt.Sprintf("op-%d", i))
			cmd.Principal = p
		}
		mustOK(t, m, cmd)
	}
	return m
}

// Restore sizes its list of op records once, from a count of the records
// that begin with the op field: no growth of a 152-byte element per op.
func TestRestoreSizesOpRecordsOnce(t *testing.T) {
	m := opsMachine(t)
	d, err := decodeSnapshot(snapshotBytes(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if n := m.ops.len(); len(d.OpRecords) != n || cap(d.OpRecords) != n {
		t.Fatalf("%d op records in a slice of %d, want %d in %d", len(d.OpRecords), cap(d.OpRecords), n, n)
	}
}
