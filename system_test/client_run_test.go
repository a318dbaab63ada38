//go:build e2e

package system_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestClientRunChildGoneBySafeDeadline is fault 6 of issue 6 (G8 for fence
// run): a child that handles SIGTERM without exiting, under a lease whose
// server is paused, must be gone by the lease's safe deadline — not seconds
// later, after a --grace counted from the loss.
//
// The safe deadline is counted from the send time of the last successful
// renew, and no renew can succeed once the server is stopped: every
// successful one was sent before the moment the test saw the server stopped,
// and its remaining TTL is at most the TTL. So that moment plus the TTL is
// no earlier than the safe deadline, and the child must be gone then. The
// check is an ordering (is the pid alive at that moment?), not a duration.
func TestClientRunChildGoneBySafeDeadline(t *testing.T) {
	srv := startServer(t)
	hb := filepath.Join(t.TempDir(), "heartbeats")
	const ttl = time.Second
	// The child prints its pid, then appends a wall-clock timestamp every
	// 20ms; SIGTERM is handled (noted) but does not stop it.
	child := `trap 'echo got-term' TERM; echo "pid=$$"; while :; do date +%s%N >> ` + hb + `; sleep 0.02; done`
	run := startProc(t, "fence run", fenceBinary(t), []string{"FENCE_SERVER=" + srv.URL()},
		"run", "g8-job", "--ttl", ttl.String(), "--grace", "5s", "--", "sh", "-c", child)
	pid, err := strconv.Atoi(field(t, run.Line(), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	// On failure the child (its own process group) would outlive fence run
	// and hold the output open.
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })

	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Signal(syscall.SIGCONT) })
	waitStopped(t, srv.Pid())
	bound := time.Now().Add(ttl) // >= the safe deadline of fence run's lease

	<-time.After(time.Until(bound))
	if state := procState(pid); state != "" && state != "Z" {
		t.Fatalf("the child (pid %d, state %s) still runs at the lease's safe deadline: G8 broken", pid, state)
	}

	// fence run reports the SIGKILL (the child ignored its SIGTERM) and the
	// SIGTERM came first.
	if code := run.Wait(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("fence run exit %d, want %d (child killed)", code, 128+int(syscall.SIGKILL))
	}
	out := run.output.String()
	if !strings.Contains(out, "got-term") || !strings.Contains(out, "SIGKILL") ||
		strings.Index(out, "SIGTERM now") > strings.Index(out, "killing") {
		t.Fatalf("want SIGTERM (noted by the child) before SIGKILL; output:\n%s", out)
	}
	// The heartbeats agree on the wall clock: none is later than the bound.
	data, err := os.ReadFile(hb)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	if len(lines) == 0 {
		t.Fatal("no heartbeat written")
	}
	ns, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatalf("heartbeat %q: %v", lines[len(lines)-1], err)
	}
	if last := time.Unix(0, ns); last.After(bound.Round(0)) {
		t.Fatalf("last heartbeat at %v, after the safe deadline bound %v", last, bound.Round(0))
	}
}

// waitStopped returns once the process pid (a child of this test) is
// stopped, without reaping it.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EINTR) {
			t.Fatalf("waitid %d: %v", pid, err)
		}
	}
}

// procState is the state letter of pid in /proc ("R", "S", "Z", ...), or ""
// when there is no such process.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// pid (comm) S ...: the comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return string(s[i+2])
}
