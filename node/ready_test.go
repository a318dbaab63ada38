package node

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

// A start slower than ReadyTimeout gives up cleanly: Open returns an error,
// leaves no goroutine of its own behind, releases the data dir, and a later
// Open finds everything. (Close used to wait forever on the takeoffice
// barrier that raft abandoned at shutdown.)
func TestOpenGivesUpAfterReadyTimeout(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	for i := 0; i < 40; i++ {
		mustApply(t, n, acquire("l"+itoa(i), time.Hour))
	}
	n.Close()

	// A slow replay: the node elects itself (well within the ready timeout,
	// so it proposes its takeoffice barrier), then reading the log it
	// replays (in raft's main loop) takes longer than the ready timeout.
	opened := make(chan error, 1)
	go func() {
		n, err := Open(Config{DataDir: dir, Logger: quietLogger(), ReadyTimeout: time.Second,
			wrapLog: func(s raft.LogStore) raft.LogStore { return slowLog{s, 50 * time.Millisecond} }})
		if err == nil {
			n.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("slow Open = %v, want a ready-timeout error (ErrNotLeader)", err)
		}
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("Open with a start slower than ReadyTimeout did not return")
	}
	// raft leaves the barrier's future unanswered at shutdown; only the
	// goroutine blocked on it may remain.
	goleak.VerifyNone(t, goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"))

	n = openNode(t, dir)
	if got := n.LastToken(); got != 40 {
		t.Fatalf("LastToken after the abandoned start = %d, want 40", got)
	}
}

// slowLog is a log store whose reads take d each.
type slowLog struct {
	raft.LogStore
	d time.Duration
}

func (s slowLog) GetLog(index uint64, l *raft.Log) error {
	time.Sleep(s.d)
	return s.LogStore.GetLog(index, l)
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }
