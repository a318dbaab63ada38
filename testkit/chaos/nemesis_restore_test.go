package chaos

import (
	"testing"
	"time"
)

// A restore's backup is taken within the run, before the restore, at most
// 10 s and at most half its start time before it; its cut lasts 1.5–3 s
// (the nemesis raises it to the longest TTL).
func TestScheduleRestore(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		s := Schedule(seed, time.Minute, AllFaults, 5, time.Second)
		n := 0
		for _, f := range s {
			if f.Kind != FaultRestore {
				continue
			}
			n++
			if f.BackupLead <= 0 || f.BackupLead > 10*time.Second || f.BackupLead > f.At/2 {
				t.Fatalf("seed %d: %s: backup lead out of bounds", seed, f)
			}
			if f.For < 1500*time.Millisecond || f.For > 3*time.Second {
				t.Fatalf("seed %d: %s: cut out of bounds", seed, f)
			}
		}
		if n == 0 {
			t.Fatalf("seed %d: no restore in a minute of every kind", seed)
		}
	}
}
