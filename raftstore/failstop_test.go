package raftstore

import (
	"testing"
	"time"
)

// The bolt log store is opened with fsync on.
func TestBoltOptionsSync(t *testing.T) {
	if o := boltOptions("x", time.Second); o.NoSync || (o.BoltOptions != nil && o.BoltOptions.NoSync) {
		t.Fatalf("bolt options %+v skip fsync", o)
	}
}
