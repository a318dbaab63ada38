package node

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyMemLog is BenchmarkApplyAcquireRelease with the raft log in
// memory (no fsync), with 1 or 2 command groups in flight: the CPU cost
// per command of the node's path (futures, encoding, log entries, FSM
// dispatch), which is what group commit saves when the disk is fast or the
// CPU is the limit.
func BenchmarkApplyMemLog(b *testing.B) {
	for _, inFlight := range []int{1, 2} {
		for _, proposers := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("groups=%d/proposers=%d", inFlight, proposers), func(b *testing.B) {
				benchMemLog(b, proposers, inFlight)
			})
		}
	}
}

func benchMemLog(b *testing.B, proposers, inFlight int) {
	benchApply(b, Config{groupsInFlight: inFlight,
		wrapLog: func(raft.LogStore) raft.LogStore { return raft.NewInmemStore() }}, proposers)
}
