//go:build e2e

package system_test

import (
	"syscall"
	"testing"
	"time"
)

// TestProcWaitIsBounded: waiting for a helper process that never exits ends
// (with false) when its timeout fires, instead of blocking on the process's
// open stdout until the test binary's -timeout kills everything; after
// SIGKILL the same wait sees the exit.
func TestProcWaitIsBounded(t *testing.T) {
	p := startProc(t, "sleeper", "/bin/sh", nil, "-c", "echo up; exec sleep 1000")
	if got := p.Line(); got != "up" {
		t.Fatalf("first line %q, want up", got)
	}
	if p.drainUntilExited(time.After(100 * time.Millisecond)) {
		t.Fatalf("a process sleeping 1000s was reported exited: %v", p.state)
	}
	p.Signal(syscall.SIGKILL)
	if !p.drainUntilExited(time.After(hangGuard)) {
		t.Fatal("the process did not exit after SIGKILL")
	}
	if p.state.Exited() {
		t.Fatalf("state %v, want killed by a signal", p.state)
	}
}
