//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/testutil"
)

// fenceBin is the fence binary, built once by TestMain.
var fenceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fence-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fenceBin = filepath.Join(dir, "fence")
	build := exec.Command("go", "build", "-o", fenceBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fence:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serveProc is a `fence serve` process on a free loopback port.
type serveProc struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned; never call cmd.Wait directly
	err    error         // cmd.Wait's result, set before exited is closed
}

// procLimit bounds every wait for a fence process in these tests, so a
// process that never exits fails its test instead of hanging the run until
// go test's -timeout.
const procLimit = 60 * time.Second

// waitExited waits for exited, failing the test after procLimit.
func waitExited(t *testing.T, exited <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(procLimit):
		t.Fatalf("%s did not exit within %s", what, procLimit)
	}
}

var servingRe = regexp.MustCompile(`fence serving on (https?://127\.0\.0\.1:\d+)`)

// startServe runs `fence serve --listen 127.0.0.1:0` in a temp dir and
// waits for the address it logs. It is stopped at cleanup.
func startServe(t *testing.T, extraArgs ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(fenceBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, extraArgs...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	var (
		tailMu sync.Mutex
		tail   []string // the last lines of its log, for a start that fails
	)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			tailMu.Lock()
			tail = append(tail, sc.Text())
			if len(tail) > 20 {
				tail = tail[1:]
			}
			tailMu.Unlock()
			if m := servingRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		close(found)
	}()
	p := &serveProc{cmd: cmd}
	p.exited = make(chan struct{})
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(procLimit):
			cmd.Process.Kill()
			t.Errorf("fence serve did not exit within %s of SIGTERM; killed", procLimit)
		}
	})
	url, ok := <-found
	if !ok {
		tailMu.Lock()
		defer tailMu.Unlock()
		t.Fatalf("fence serve %q exited before serving; its log ends:\n%s", extraArgs, strings.Join(tail, "\n"))
	}
	p.url = url
	return p
}

// result of one fence process.
type result struct {
	code           int
	stdout, stderr string
}

// fenceRun runs the binary to completion against url.
func fenceRun(t *testing.T, url string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBin, args...)
	cmd.Env = append(os.Environ(), "FENCE_SERVER="+url)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("fence %q did not exit within %s (killed)\nstdout: %s\nstderr: %s", args, procLimit, o.String(), e.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), o.String(), e.String()}
}

func (r result) want(t *testing.T, code int, what string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, code, r.stdout, r.stderr)
	}
	return r
}

var tokenRe = regexp.MustCompile(`token=(\d+)`)

func tokenOf(t *testing.T, out string) uint64 {
	t.Helper()
	m := tokenRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token= in %q", out)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

func TestProcessAcquireBusyWriteStale(t *testing.T) {
	srv := startServe(t)
	a := fenceRun(t, srv.url, "acquire", "sku-42", "--ttl", "30s", "--owner", "worker-a").want(t, 0, "acquire")
	if !strings.HasPrefix(a.stdout, "acquired sku-42 token=") || !strings.Contains(a.stdout, "ttl=30s") {
		t.Fatalf("acquire output %q", a.stdout)
	}
	tokA := tokenOf(t, a.stdout)

	busy := fenceRun(t, srv.url, "acquire", "sku-42", "--ttl", "5s").want(t, exitBusy, "acquire held lock")
	if !strings.HasPrefix(busy.stderr, "BUSY: ") || !strings.Contains(busy.stderr, "worker-a") {
		t.Fatalf("busy stderr %q", busy.stderr)
	}
	// The same with --json after the name, --json before the subcommand.
	bj := fenceRun(t, srv.url, "--json", "acquire", "sku-42", "--ttl", "5s").want(t, exitBusy, "acquire --json held lock")
	var busyJSON struct {
		Error struct {
			Reason      string `json:"reason"`
			Holder      string `json:"holder"`
			HolderToken uint64 `json:"holderToken"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(bj.stdout), &busyJSON); err != nil || busyJSON.Error.Reason != "BUSY" ||
		busyJSON.Error.Holder != "worker-a" || busyJSON.Error.HolderToken != tokA {
		t.Fatalf("busy json %q: %+v %v", bj.stdout, busyJSON, err)
	}

	// A newer owner on another lock writes first; A's older token is refused.
	b := fenceRun(t, srv.url, "acquire", "other", "--ttl", "30s", "--json").want(t, 0, "acquire --json")
	var lease map[string]any
	if err := json.Unmarshal([]byte(b.stdout), &lease); err != nil {
		t.Fatal(err)
	}
	tokB, isNumber := lease["token"].(float64) // a JSON number, not a string
	if !isNumber || uint64(tokB) <= tokA {
		t.Fatalf("json token %#v (want a number > %d) in %s", lease["token"], tokA, b.stdout)
	}
	w := fenceRun(t, srv.url, "write", "stock", "--token", fmt.Sprint(uint64(tokB)), "--value", "8", "--json").want(t, 0, "write")
	var state struct {
		Value     string `json:"value"` // base64, as the API
		Text      string `json:"text"`
		LastToken uint64 `json:"lastToken"`
		Version   uint64 `json:"version"`
		Replayed  *bool  `json:"replayed"`
	}
	if err := json.Unmarshal([]byte(w.stdout), &state); err != nil || state.Value != "OA==" || state.Text != "8" || state.LastToken != uint64(tokB) ||
		state.Replayed == nil || *state.Replayed {
		t.Fatalf("write json %s: %+v", w.stdout, state)
	}
	stale := fenceRun(t, srv.url, "write", "stock", "--token", fmt.Sprint(tokA), "--value", "5").want(t, exitRefused, "stale write")
	wantMsg := fmt.Sprintf("STALE_TOKEN: token %d is older than accepted token %d\n", tokA, uint64(tokB))
	if stale.stderr != wantMsg {
		t.Fatalf("stale stderr %q, want %q", stale.stderr, wantMsg)
	}
	// A forgotten --value is a usage error, not a write of nothing: the
	// read below still sees 8 at version 1.
	nov := fenceRun(t, srv.url, "write", "stock", "--token", fmt.Sprint(uint64(tokB))).want(t, exitUsage, "write without --value")
	if !strings.Contains(nov.stderr, "--value is required") {
		t.Fatalf("write without --value: stderr %q", nov.stderr)
	}
	r := fenceRun(t, srv.url, "read", "stock").want(t, 0, "read")
	if want := fmt.Sprintf("stock value=8 last_token=%d version=1\n", uint64(tokB)); r.stdout != want {
		t.Fatalf("read %q, want %q", r.stdout, want)
	}
	// Invalid argument from the server (TTL above its maximum): exit 2.
	inv := fenceRun(t, srv.url, "acquire", "x", "--ttl", "48h").want(t, exitUsage, "ttl above max")
	if !strings.HasPrefix(inv.stderr, "INVALID_ARGUMENT: ") || !strings.Contains(inv.stderr, "ttl") {
		t.Fatalf("invalid stderr %q", inv.stderr)
	}
	// Not the holder: exit 4.
	fenceRun(t, srv.url, "release", "sku-42", "--token", fmt.Sprint(uint64(tokB))).want(t, exitRefused, "release by non-holder")
	fenceRun(t, srv.url, "release", "sku-42", "--token", fmt.Sprint(tokA)).want(t, 0, "release")
	fenceRun(t, srv.url, "add", "counter", "--token", fmt.Sprint(uint64(tokB)), "--delta", "-3", "--op-id", "o1").want(t, 0, "add")
	again := fenceRun(t, srv.url, "add", "counter", "--token", fmt.Sprint(uint64(tokB)), "--delta", "-3", "--op-id", "o1").want(t, 0, "add replay")
	if !strings.Contains(again.stdout, "value=-3") || !strings.Contains(again.stdout, "replayed") {
		t.Fatalf("add replay %q", again.stdout)
	}
	ls := fenceRun(t, srv.url, "locks").want(t, 0, "locks")
	if !strings.Contains(ls.stdout, "other") || strings.Contains(ls.stdout, "sku-42") {
		t.Fatalf("locks %q: want other held, sku-42 released", ls.stdout)
	}
}

func TestProcessRunChildSeesToken(t *testing.T) {
	srv := startServe(t)
	r := fenceRun(t, srv.url, "run", "job", "--ttl", "2s", "--", "sh", "-c", `echo "lock=$FENCE_LOCK token=$FENCE_TOKEN"; exit 7`)
	r.want(t, 7, "run exits with the child's status")
	if !strings.HasPrefix(r.stdout, "lock=job token=") || tokenOf(t, r.stdout) == 0 {
		t.Fatalf("child output %q", r.stdout)
	}
	// Released at the end: another acquire succeeds at once.
	fenceRun(t, srv.url, "acquire", "job", "--ttl", "1s").want(t, 0, "acquire after run")
}

// startRun starts `fence run` with a child that reports its signals, and
// waits until the child runs.
// Wait for it with <-exited, never cmd.Wait.
func startRun(t *testing.T, url string, args ...string) (cmd *exec.Cmd, exited <-chan struct{}, stdout, stderr *testutil.Buffer) {
	t.Helper()
	cmd, done, stdout, stderr := startRunNoWait(t, url, args...)
	giveUp := time.After(procLimit)
	for !strings.Contains(stdout.String(), "started") {
		select {
		case <-done:
			t.Fatalf("fence run exited early: %s", stderr.String())
		case <-giveUp:
			t.Fatalf("fence run's child did not start within %s: %s", procLimit, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return cmd, done, stdout, stderr
}

const trapChild = `trap 'echo got-term; exit 0' TERM; echo started; while :; do sleep 0.05; done`

func TestProcessRunLeaseLostStopsChild(t *testing.T) {
	srv := startServe(t)
	// A 3s TTL: the renew that fails (at TTL/3, failing by 2TTL/3) is
	// known long before the SIGKILL just before the safe deadline, on a
	// loaded machine too (with 500ms the margin was ~100ms, and a busy run
	// saw the SIGKILL come first).
	cmd, exited, stdout, stderr := startRun(t, srv.url, "run", "job", "--ttl", "3s", "--grace", "5s", "--", "sh", "-c", trapChild)
	// Freeze the server: no renew can succeed, so the lease is lost by its
	// safe deadline and the child must be stopped.
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv.cmd.Process.Signal(syscall.SIGCONT)
	waitExited(t, exited, "fence run")
	if cmd.ProcessState.ExitCode() != exitError {
		t.Fatalf("fence run: exit %d, want 1 (child exited 0 after the lease was lost)\nstderr: %s", cmd.ProcessState.ExitCode(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "got-term") {
		t.Fatalf("child did not get SIGTERM; stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "lost") {
		t.Fatalf("stderr does not say the lease was lost: %q", stderr.String())
	}
}

// A lease released behind fence run's back (by its token, from another
// process) is noticed by the next renew of the lease, though the session
// it is bound to stays alive: the child is killed at once, with no grace.
func TestProcessRunReleasedBehindItsBackKillsChild(t *testing.T) {
	srv := startServe(t)
	cmd, exited, stdout, stderr := startRun(t, srv.url, "run", "job", "--ttl", "1500ms", "--grace", "5s", "--",
		"sh", "-c", `echo "token=$FENCE_TOKEN"; `+trapChild)
	fenceRun(t, srv.url, "release", "job", "--token", fmt.Sprint(tokenOf(t, stdout.String()))).want(t, 0, "release behind run's back")
	waitExited(t, exited, "fence run")
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d, want %d (SIGKILL at once when the lease is lost)\nstdout: %s\nstderr: %s", code, 128+int(syscall.SIGKILL), stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String(), "got-term") || !strings.Contains(stderr.String(), "lost") {
		t.Fatalf("want SIGKILL with no SIGTERM first and the loss named; stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

func TestProcessRunKillsAfterGrace(t *testing.T) {
	srv := startServe(t)
	cmd, exited, _, stderr := startRun(t, srv.url, "run", "job", "--ttl", "300ms", "--grace", "200ms", "--",
		"sh", "-c", `trap '' TERM; echo started; while :; do sleep 0.05; done`)
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv.cmd.Process.Signal(syscall.SIGCONT)
	waitExited(t, exited, "fence run")
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d, want %d (child ignoring SIGTERM is killed)\nstderr: %s", code, 128+int(syscall.SIGKILL), stderr.String())
	}
}

func TestProcessRunForwardsSIGTERM(t *testing.T) {
	srv := startServe(t)
	cmd, exited, stdout, stderr := startRun(t, srv.url, "run", "job", "--ttl", "5s", "--", "sh", "-c",
		`trap 'echo got-term; exit 3' TERM; echo started; while :; do sleep 0.05; done`)
	cmd.Process.Signal(syscall.SIGTERM)
	waitExited(t, exited, "fence run")
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(stdout.String(), "got-term") {
		t.Fatalf("exit %d stdout %q stderr %q; want the child's 3 after it got SIGTERM", code, stdout.String(), stderr.String())
	}
	fenceRun(t, srv.url, "acquire", "job", "--ttl", "1s").want(t, 0, "acquire after run released")
}

func TestProcessLab(t *testing.T) {
	// FENCE_SERVER set but --embedded: a temporary server of its own.
	r := fenceRun(t, "http://127.0.0.1:1", "lab", "--unit", "150ms", "--embedded").want(t, 0, "lab")
	if !strings.Contains(r.stdout, "(embedded, temporary, one per run)") {
		t.Errorf("lab --embedded did not say it used embedded servers:\n%s", r.stdout)
	}
	// Each run's table shows its own tokens: on a fresh server of its own,
	// A's is 1 and B's 2, as in docs/story.md.
	for _, want := range []string{"docs/story.md",
		"Run 1, WITHOUT fencing", "| t=7 | A wakes and writes stock 5 (token 1) | accepted: overwrites B's 8 | accepted: stock=5 |",
		"| end | the stock | 5: B's update is lost | stock 5 — B's 8 was overwritten",
		"Run 2, WITH fencing", "| t=7 | A wakes and writes stock 5 (token 1) | refused: STALE_TOKEN, 1 < 2 | STALE_TOKEN: token 1 is older than accepted token 2 |",
		"| t=7 | B retries its write of 8 (token 2) | accepted: equal tokens are allowed | accepted: stock=8 last_token=2 |",
		"| end | the stock | 8, last_token 2: B's update stands | stock 8, last_token 2 |",
		"Without fencing the stock ends at 5; with fencing at 8.",
		"PASS: every row matches the story (docs/story.md)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("lab output lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, run2, _ := strings.Cut(r.stdout, "Run 2"); strings.Contains(run2, "stock=5") {
		t.Errorf("lab output: the fenced run shows a stock of 5:\n%s", r.stdout)
	}
	if h := fenceRun(t, "http://127.0.0.1:1", "lab", "--help").want(t, 0, "lab --help"); !strings.Contains(h.stdout, "paused-worker story (docs/story.md)") {
		t.Errorf("lab --help does not point at docs/story.md:\n%s", h.stdout)
	}
	// Against a running, already used server, named only by FENCE_SERVER.
	srv := startServe(t)
	fenceRun(t, srv.url, "acquire", "warmup", "--ttl", "1s").want(t, 0, "warm up")
	j := fenceRun(t, srv.url, "lab", "--unit", "150ms", "--json").want(t, 0, "lab --json with FENCE_SERVER")
	var out struct {
		Server string `json:"server"`
		OK     bool   `json:"ok"`
		Naive  struct {
			StockFinal string `json:"stockFinal"`
		} `json:"naive"`
		Fenced struct {
			TokenA     uint64 `json:"tokenA"`
			TokenB     uint64 `json:"tokenB"`
			StockFinal string `json:"stockFinal"`
			LastToken  uint64 `json:"lastTokenFinal"`
		} `json:"fenced"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &out); err != nil || !out.OK || out.Server != srv.url ||
		out.Fenced.TokenA <= 1 || out.Fenced.TokenB <= out.Fenced.TokenA ||
		out.Naive.StockFinal != "5" || out.Fenced.StockFinal != "8" || out.Fenced.LastToken != out.Fenced.TokenB {
		t.Fatalf("lab json %s: %+v %v", j.stdout, out, err)
	}
}

func TestProcessServeStopsOnSIGTERM(t *testing.T) {
	srv := startServe(t)
	fenceRun(t, srv.url, "acquire", "x", "--ttl", "1s").want(t, 0, "acquire")
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExited(t, srv.exited, "fence serve after SIGTERM")
	if srv.err != nil {
		t.Fatalf("fence serve after SIGTERM: %v, want a clean exit 0", srv.err)
	}
}

// TestProcessLocksQuotesControlCharacters: a lock name or owner holding a
// newline, tab or terminal escape is printed quoted, one line per lock, so
// it can neither break the table nor reach the terminal raw.
func TestProcessLocksQuotesControlCharacters(t *testing.T) {
	srv := startServe(t)
	name, owner := "evil\n\x1b[2Jlock", "a\tb"
	a := fenceRun(t, srv.url, "acquire", name, "--ttl", "1m", "--owner", owner).want(t, 0, "acquire")
	if want := fmt.Sprintf("acquired %q token=", name); !strings.HasPrefix(a.stdout, want) {
		t.Fatalf("acquire printed %q, want it to start with %q", a.stdout, want)
	}
	ls := fenceRun(t, srv.url, "locks").want(t, 0, "locks")
	lines := strings.Split(strings.TrimSuffix(ls.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], strconv.Quote(name)) || !strings.Contains(lines[1], strconv.Quote(owner)) ||
		strings.ContainsAny(ls.stdout, "\x1b\t") {
		t.Fatalf("locks printed %q: want a header and one line with the quoted name and owner", ls.stdout)
	}
}

// TestProcessRunKilledTakesChildAlong: fence run killed with SIGKILL cannot
// signal its child, so the kernel must (Pdeathsig): the child must not run
// on past the lease while another owner gets the lock.
func TestProcessRunKilledTakesChildAlong(t *testing.T) {
	srv := startServe(t)
	cmd, exited, stdout, _ := startRun(t, srv.url, "run", "job", "--ttl", "1s", "--",
		"sh", "-c", `echo started; echo "pid=$$"; exec sleep 600`)
	var pid int
	giveUp := time.After(procLimit)
	for pid == 0 {
		if m := regexp.MustCompile(`pid=(\d+)`).FindStringSubmatch(stdout.String()); m != nil {
			pid, _ = strconv.Atoi(m[1])
			break
		}
		select {
		case <-giveUp:
			t.Fatalf("child never printed its pid: %q", stdout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExited(t, exited, "fence run after SIGKILL")
	// The child is reaped by init once the kernel killed it; until then it
	// may linger as a zombie, which runs nothing.
	deadline := time.Now().Add(procLimit)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return // gone, or a zombie
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("fence run's child %d still runs %s after fence run was killed", pid, procLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRunNoWait starts fence with args (FENCE_SERVER=url) and returns at
// once: its process, a channel closed when it has exited (wait on it,
// never on cmd.Wait), and its output. The cleanup kills it and waits for
// it to be reaped.
func startRunNoWait(t *testing.T, url string, args ...string) (cmd *exec.Cmd, exited <-chan struct{}, stdout, stderr *testutil.Buffer) {
	t.Helper()
	cmd = exec.Command(fenceBin, args...)
	cmd.Env = append(os.Environ(), "FENCE_SERVER="+url)
	stdout, stderr = &testutil.Buffer{}, &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(procLimit):
			t.Errorf("fence still not reaped %s after SIGKILL", procLimit)
		}
	})
	return cmd, done, stdout, stderr
}
