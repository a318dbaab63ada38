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
	Kind    string        // "held" or "storm"
	System  string        // system name
	Addr    string        // server address
	N       int           // leases
	Workers int           // concurrent acquirers of the holders
	TTL     time.Duration // storm: time from the start to the holders' deadline (per-lease TTL systems)
	EtcdTTL int           // etcd session TTL, seconds
	Retry   time.Duration // Redis polling pause
}

// ChildReport is what a child reports.
type ChildReport struct {
	Kind     string
	Held     int           // leases held (holders)
	Errors   int           // failed acquires
	FirstErr string        // the first failure
	Grant    time.Duration // held: time to grant all N
	// storm
	Setup    time.Duration // from start until every waiter was queued
	Overran  bool          // the TTL ended before every waiter was queued
	Granted  int           // waiters granted
	LastLag  time.Duration // last waiter's grant − TTL end
	P50Lag   time.Duration
	P99Lag   time.Duration
	Duration time.Duration // whole child run
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
		etcdSessionTTL = spec.EtcdTTL
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
	var rep ChildReport
	var err error
	switch spec.Kind {
	case "held":
		rep, err = childHeld(ctx, sys, spec)
	case "storm":
		rep, err = childStorm(ctx, sys, spec)
	default:
		err = fmt.Errorf("unknown kind %q", spec.Kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencebench child:", err)
		return 1
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	// Hold everything until the runner has measured and closes stdin.
	_, _ = io.Copy(io.Discard, os.Stdin)
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

func childStorm(ctx context.Context, sys System, spec ChildSpec) (ChildReport, error) {
	start := time.Now()
	deadline := start.Add(spec.TTL)
	holders, err := sys.Open(ctx, spec.Addr, spec.Workers)
	if err != nil {
		return ChildReport{}, err
	}
	hw, held, e, err := holdAll(ctx, holders, "w5/", spec.N, spec.Workers, AcquireOpts{Deadline: deadline, Hold: true})
	if err != nil {
		return ChildReport{}, err
	}
	waiters, err := sys.Open(ctx, spec.Addr, spec.N)
	if err != nil {
		return ChildReport{}, err
	}
	grants := make([]time.Time, spec.N)
	var wg sync.WaitGroup
	wctx, cancel := context.WithTimeout(ctx, spec.TTL+10*time.Minute)
	defer cancel()
	werr := &errs{}
	for k := range spec.N {
		w, err := waiters.Worker(ctx, k)
		if err != nil {
			return ChildReport{}, err
		}
		wg.Go(func() {
			if _, err := w.Acquire(wctx, "w5/"+strconv.Itoa(k), AcquireOpts{Wait: spec.TTL + 10*time.Minute, Hold: true, TTL: time.Hour}); err != nil {
				werr.add(err)
				return
			}
			grants[k] = time.Now()
		})
	}
	// Wait until every waiter is queued.
	var queuedAt time.Time
	for {
		q, err := waiters.Queued(ctx, "w5/", held)
		if err == nil && q >= held {
			queuedAt = time.Now()
			break
		}
		if wctx.Err() != nil {
			return ChildReport{}, fmt.Errorf("waiters never all queued (last count %d of %d, err %v)", q, held, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stop renewing: the TTL ends at the deadline, or when each session's
	// lease runs out.
	var tEnd time.Time
	for _, w := range hw {
		t, err := w.Expire(ctx)
		if err != nil {
			return ChildReport{}, err
		}
		if t.After(tEnd) {
			tEnd = t
		}
	}
	if tEnd.IsZero() {
		tEnd = deadline
	}
	wg.Wait()
	rep := ChildReport{Kind: "storm", Held: held, Errors: int(e.n.Load() + werr.n.Load()), FirstErr: e.first,
		Setup: queuedAt.Sub(start), Overran: queuedAt.After(tEnd), Duration: time.Since(start)}
	if rep.FirstErr == "" {
		rep.FirstErr = werr.first
	}
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
	return rep, nil
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
}

func startChild(exe string, spec ChildSpec) (*child, error) {
	b, _ := json.Marshal(spec)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), stderr: &stderr}, nil
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
