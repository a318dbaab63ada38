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
// later, after a --grace counted from the loss — and, as the renewals fail
// before the deadline, it is told with SIGTERM before the SIGKILL.
//
// The safe deadline is counted from the send time of the last successful
// renew, and no renew can succeed once the server is stopped: every
// successful one was sent before the moment the test saw the server stopped,
// and its remaining TTL is at most the TTL. So that moment plus the TTL is
// no earlier than the safe deadline, and the child must be gone then. The
// check is an ordering (is the pid alive at that moment?), not a duration.
//
// The SIGTERM is an ordering too, but one the machine's speed decides:
// fence run learns that renewals fail a third of a TTL after a renew got no
// answer, and the SIGKILL goes out just before the deadline; a child that
// is to note the SIGTERM must run its trap in between. On a loaded box
// fence run (or the child) may not run in that window at all — fence run
// then rightly sends SIGKILL alone: the deadline comes first (G8). So a
// play where the child noted no SIGTERM is played again with the TTL
// doubled, which doubles the window; the G8 checks hold on every play, and
// a fence run that never sends SIGTERM first fails every play.
func TestClientRunChildGoneBySafeDeadline(t *testing.T) {
	const plays = 5 // TTLs 1s to 16s
	ttl := time.Second
	for play := 1; ; play++ {
		out, termNoted := playChildGoneBySafeDeadline(t, ttl)
		if t.Failed() {
			return
		}
		if termNoted {
			return
		}
		if play == plays {
			t.Fatalf("in %d plays (TTL up to %s) the child never noted a SIGTERM before its SIGKILL; last output:\n%s", plays, ttl, out)
		}
		t.Logf("TTL %s: the child noted no SIGTERM before its SIGKILL, or fence run lost its lease before the child started (the box too slow for the TTL); again with TTL %s; output:\n%s", ttl, 2*ttl, out)
		ttl *= 2
	}
}

// playChildGoneBySafeDeadline plays TestClientRunChildGoneBySafeDeadline
// once with a lease of ttl: it fails t unless the child is gone by the
// lease's safe deadline (killed, with fence run exiting 128+SIGKILL), and
// returns fence run's output and whether the child noted a SIGTERM before
// it was killed (in that output, a SIGTERM that fence run sent after the
// SIGKILL fails t); false also when fence run lost its lease before the
// child started.
func playChildGoneBySafeDeadline(t *testing.T, ttl time.Duration) (string, bool) {
	t.Helper()
	srv := startServer(t)
	hb := filepath.Join(t.TempDir(), "heartbeats")
	// The child prints its pid, then appends a wall-clock timestamp every
	// 20ms; SIGTERM is handled (noted) but does not stop it.
	child := `trap 'echo got-term' TERM; echo "pid=$$"; while :; do date +%s%N >> ` + hb + `; sleep 0.02; done`
	run := startProc(t, "fence run", fenceBinary(t), []string{"FENCE_SERVER=" + srv.URL()},
		"run", "g8-job", "--ttl", ttl.String(), "--grace", "5s", "--", "sh", "-c", child)
	var line string
	select {
	case line = <-run.lines: // "" once closed: fence run ended, and its child if any
	case <-time.After(hangGuard):
		t.Fatalf("fence run printed nothing; output so far:\n%s", run.output.String())
	}
	if line == "" {
		// fence run ended before its child printed: with the server
		// running, only a lease lost for want of a renew in time (a
		// loaded box starving fence run for longer than the TTL allows)
		// is no fault of the test's subject; it is played again.
		<-run.exited
		out := run.output.String()
		if !strings.Contains(out, "lost") {
			t.Fatalf("fence run ended (%v) before its child started; output:\n%s", run.state, out)
		}
		return out, false
	}
	pid, err := strconv.Atoi(field(t, line, "pid"))
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

	// fence run reports the SIGKILL (the child ignored any SIGTERM).
	if code := run.Wait(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("fence run exit %d, want %d (child killed)", code, 128+int(syscall.SIGKILL))
	}
	out := run.output.String()
	if !strings.Contains(out, "SIGKILL") {
		t.Fatalf("fence run did not report the SIGKILL; output:\n%s", out)
	}
	term := strings.Index(out, "SIGTERM now")
	if term >= 0 && term > strings.Index(out, "killing") {
		t.Fatalf("fence run sent SIGTERM after the SIGKILL; output:\n%s", out)
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
	return out, term >= 0 && strings.Contains(out, "got-term")
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
