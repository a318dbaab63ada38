package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The held-leases and expiry-storm workloads run their client in a child
// process of the runner, so that its memory is measured apart from the
// runner's (and from the other systems' clients). The child is the runner's
// own executable (or the smoke test's binary) started with ChildEnv set to a
// JSON ChildSpec; it writes one JSON ChildReport line to stdout when its
// leases are held (kind "held") or the storm is over (kind "storm"), then
// waits for its stdin to close.

// ChildEnv names the environment variable that makes a process a child.
const ChildEnv = "FENCEBENCH_CHILD"

// ChildSpec tells a child what to do.
type ChildSpec struct {
	Kind     string        // "held", "storm-hold" or "storm-wait"
	System   string        // system name
	Addr     string        // server address
	N        int           // leases
	Workers  int           // concurrent acquirers of the holders
	Deadline time.Time     // storm: when the holders' TTL ends (systems whose leases carry their own TTL)
	EtcdTTL  int           // session TTL of etcd and fence-session, seconds
	Retry    time.Duration // Redis polling pause
}

// ChildReport is what a child reports.
type ChildReport struct {
	Kind     string        // "held", "expired", "queued", "storm"
	Held     int           // leases held (holders)
	Errors   int           // failed acquires
	FirstErr string        // the first failure
	Grant    time.Duration // held: time to grant all N
	// storm
	QueuedAt time.Time     // every waiter was queued
	TEnd     time.Time     // the holders' TTL ends
	Granted  int           // waiters granted
	LastLag  time.Duration // last waiter's grant − TTL end
	P50Lag   time.Duration
	P99Lag   time.Duration
}

// IsChild reports whether this process was started as a child.
func IsChild() bool { return os.Getenv(ChildEnv) != "" }

// ChildMain runs the child described by ChildEnv and returns the exit code.
func ChildMain() int {
	var spec ChildSpec
	if err := json.Unmarshal([]byte(os.Getenv(ChildEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "fencebench child: bad spec:", err)
		return 2
	}
	if spec.EtcdTTL > 0 {
		sessionTTL = spec.EtcdTTL
	}
	if spec.Retry > 0 {
		RedisRetry = spec.Retry
	}
	sys, ok := registry[spec.System]
	if !ok {
		fmt.Fprintln(os.Stderr, "fencebench child: unknown system", spec.System)
		return 2
	}
	ctx := context.Background()
	in := bufio.NewReader(os.Stdin)
	var err error
	switch spec.Kind {
	case "held":
		var rep ChildReport
		if rep, err = childHeld(ctx, sys, spec); err == nil {
			emit(rep)
		}
	case "storm-hold":
		err = childStormHold(ctx, sys, spec, in)
	case "storm-wait":
		err = childStormWait(ctx, sys, spec, in)
	default:
		err = fmt.Errorf("unknown kind %q", spec.Kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencebench child:", err)
		return 1
	}
	// Hold everything until the runner has measured and closes stdin.
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// errs counts failures and keeps the first.
type errs struct {
	n     atomic.Int64
	once  sync.Once
	first string
}

func (e *errs) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err.Error() })
}

// holdAll acquires prefix0..prefixN-1 with workers concurrent acquirers.
func holdAll(ctx context.Context, cl Client, prefix string, n, workers int, o AcquireOpts) ([]Worker, int, *errs, error) {
	ws := make([]Worker, workers)
	for i := range ws {
		w, err := cl.Worker(ctx, i)
		if err != nil {
			return nil, 0, nil, err
		}
		ws[i] = w
	}
	var held atomic.Int64
	e := &errs{}
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			for k := i; k < n; k += workers {
				if _, err := w.Acquire(ctx, prefix+strconv.Itoa(k), o); err != nil {
					e.add(err)
					continue
				}
				held.Add(1)
			}
		})
	}
	wg.Wait()
	return ws, int(held.Load()), e, nil
}

func childHeld(ctx context.Context, sys System, spec ChildSpec) (ChildReport, error) {
	cl, err := sys.Open(ctx, spec.Addr, spec.Workers)
	if err != nil {
		return ChildReport{}, err
	}
	start := time.Now()
	_, held, e, err := holdAll(ctx, cl, "w4/", spec.N, spec.Workers, AcquireOpts{TTL: time.Hour, Hold: true})
	if err != nil {
		return ChildReport{}, err
	}
	return ChildReport{Kind: "held", Held: held, Errors: int(e.n.Load()), FirstErr: e.first, Grant: time.Since(start)}, nil
}

// childStormHold holds N leases whose TTL ends at spec.Deadline (systems
// whose leases carry their own TTL), reports, and on "expire" from stdin
// stops renewing (Worker.Expire) and reports when the TTL ends. The runner
// then kills it with SIGKILL, so nothing of it renews any more.
func childStormHold(ctx context.Context, sys System, spec ChildSpec, in *bufio.Reader) error {
	start := time.Now()
	holders, err := sys.Open(ctx, spec.Addr, spec.Workers)
	if err != nil {
		return err
	}
	hw, held, e, err := holdAll(ctx, holders, "w5/", spec.N, spec.Workers, AcquireOpts{Deadline: spec.Deadline, Hold: true})
	if err != nil {
		return err
	}
	logf("storm: %d held in %v, %d errors (%s)", held, time.Since(start).Round(time.Millisecond), e.n.Load(), e.first)
	emit(ChildReport{Kind: "held", Held: held, Errors: int(e.n.Load()), FirstErr: e.first, Grant: time.Since(start)})
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	var tEnd time.Time
	for _, w := range hw {
		t, err := w.Expire(ctx)
		if err != nil {
			return err
		}
		if t.After(tEnd) {
			tEnd = t
		}
	}
	if tEnd.IsZero() {
		tEnd = spec.Deadline
	}
	emit(ChildReport{Kind: "expired", TEnd: tEnd})
	return nil
}

// childStormWait queues one waiting acquire on each of the N locks,
// reports when all are queued, reads the holders' TTL end from stdin, and
// reports when each waiter got its lock.
func childStormWait(ctx context.Context, sys System, spec ChildSpec, in *bufio.Reader) error {
	start := time.Now()
	waiters, err := sys.Open(ctx, spec.Addr, spec.N)
	if err != nil {
		return err
	}
	grants := make([]time.Time, spec.N)
	var granted atomic.Int64
	var wg sync.WaitGroup
	wait := time.Until(spec.Deadline) + 10*time.Minute
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	werr := &errs{}
	for k := range spec.N {
		w, err := waiters.Worker(ctx, k)
		if err != nil {
			return err
		}
		wg.Go(func() {
			if _, err := w.Acquire(wctx, "w5/"+strconv.Itoa(k), AcquireOpts{Wait: wait, Hold: true, TTL: time.Hour}); err != nil {
				werr.add(err)
				return
			}
			grants[k] = time.Now()
			granted.Add(1)
		})
	}
	lastLog := time.Now()
	for {
		q, err := waiters.Queued(ctx, "w5/", spec.N)
		// A waiter that failed or was already granted (the holders' TTL
		// ended early) will not queue.
		gone := int(werr.n.Load() + granted.Load())
		if err == nil && q+gone >= spec.N {
			break
		}
		if time.Since(lastLog) > 2*time.Second {
			logf("storm: %d of %d waiters queued, %d failed or granted (%s), probe error %v", q, spec.N, gone, werr.first, err)
			lastLog = time.Now()
		}
		if wctx.Err() != nil {
			return fmt.Errorf("waiters never all queued (last count %d of %d, %d failed or granted: %s; probe error %v)", q, spec.N, gone, werr.first, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	queuedAt := time.Now()
	logf("storm: waiters queued after %v", queuedAt.Sub(start).Round(time.Millisecond))
	emit(ChildReport{Kind: "queued", QueuedAt: queuedAt})
	line, err := in.ReadString('\n')
	if err != nil {
		return err
	}
	var tEnd time.Time
	if err := tEnd.UnmarshalText([]byte(strings.TrimSpace(line))); err != nil {
		return fmt.Errorf("bad TTL end %q: %w", line, err)
	}
	logf("storm: the holders' TTL ends in %v", time.Until(tEnd).Round(time.Millisecond))
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	for t := time.NewTicker(2 * time.Second); ; {
		select {
		case <-waited:
		case <-t.C:
			logf("storm: %d of %d waiters granted, %d failed", granted.Load(), spec.N, werr.n.Load())
			continue
		}
		t.Stop()
		break
	}
	rep := ChildReport{Kind: "storm", Errors: int(werr.n.Load()), FirstErr: werr.first, QueuedAt: queuedAt, TEnd: tEnd}
	var lags []time.Duration
	for _, g := range grants {
		if !g.IsZero() {
			lags = append(lags, g.Sub(tEnd))
		}
	}
	rep.Granted = len(lags)
	sortDurations(lags)
	if len(lags) > 0 {
		rep.LastLag = lags[len(lags)-1]
		rep.P50Lag = percentile(lags, 0.5)
		rep.P99Lag = percentile(lags, 0.99)
	}
	emit(rep)
	return nil
}

// emit writes a report line to stdout.
func emit(r ChildReport) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// logf writes a progress line to stderr (the runner copies it to its log).
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "child: "+format+"\n", args...)
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *lockedBuffer
}

// lockedBuffer keeps what a child writes to stderr, and copies it to log.
type lockedBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	log io.Writer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.log != nil {
		_, _ = l.log.Write(p)
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startChild(exe string, spec ChildSpec, log io.Writer, env ...string) (*child, error) {
	b, _ := json.Marshal(spec)
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), env...), ChildEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &lockedBuffer{log: log}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), stderr: stderr}, nil
}

// report reads the child's report line.
func (c *child) report() (ChildReport, error) {
	var rep ChildReport
	for {
		line, err := c.out.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			if err := json.Unmarshal(line, &rep); err != nil {
				return rep, err
			}
			return rep, nil
		}
		if err != nil {
			_ = c.cmd.Wait()
			return rep, fmt.Errorf("child ended without a report: %v; stderr: %s", err, lastBytes(c.stderr.String(), 2000))
		}
	}
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// send writes a line to the child's stdin.
func (c *child) send(line string) error {
	_, err := io.WriteString(c.stdin, line+"\n")
	return err
}

// kill ends the child at once (SIGKILL), as a crash would.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
}

// stop closes the child's stdin and waits for it (killing it after 30s).
func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

var errNoChild = errors.New("no child executable")
