//go:build e2e

package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/testutil"
)

// The worker's tests run the real thing: a `fence serve` process, real
// PostgreSQL, and workers as `fence-chaos worker` processes stopped with
// SIGTERM and paused with SIGSTOP.

func TestWorkerArgsRoundTrip(t *testing.T) {
	cfg := WorkerConfig{
		ID: 3, Server: "http://127.0.0.1:1234", Resources: 5, Stores: []string{StoreFence, StorePostgres},
		PostgresDSN: "postgres://x@127.0.0.1/db?sslmode=disable", PGPrefix: "chaos_r1", History: "/tmp/h-3.jsonl",
		Seed: 1<<63 + 7, TTL: 1500 * time.Millisecond, SessionTTL: 2 * time.Second, Control: true,
		Mode: "standalone", Hold: 250 * time.Millisecond, Workload: WorkloadPermits, Permits: 3,
	}
	got, err := ParseWorkerArgs(cfg.Args())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cfg) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, cfg)
	}
	minimal := WorkerConfig{Server: "http://a", History: "h"}
	got, err = ParseWorkerArgs(minimal.Args())
	if err != nil {
		t.Fatal(err)
	}
	if got.Resources != 3 || !reflect.DeepEqual(got.Stores, []string{StoreFence}) || got.TTL != DefaultWorkerTTL || got.SessionTTL != DefaultWorkerTTL ||
		got.Workload != "" || got.Permits != defaultPermits {
		t.Fatalf("defaults: %+v", got)
	}
	for _, bad := range [][]string{
		{"-history", "h"},
		{"-server", "http://a"},
		{"-server", "http://a", "-history", "h", "-stores", "redis"},
		{"-server", "http://a", "-history", "h", "-stores", "postgres", "-pg-prefix", "p"},
		{"-server", "http://a", "-history", "h", "-stores", "postgres", "-pg", "dsn", "-pg-prefix", "Bad-Name"},
		{"-server", "http://a", "-history", "h", "-mode", "sometimes"},
		{"-server", "http://a", "-history", "h", "extra"},
		{"-server", "http://a", "-history", "h", "-workload", "catalog"},
		{"-server", "http://a", "-history", "h", "-workload", "permits", "-permits", "1025"},
	} {
		if _, err := ParseWorkerArgs(bad); err == nil {
			t.Errorf("ParseWorkerArgs(%q) accepted", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	stale := &fence.StaleTokenError{Resource: "r", Token: 3, LastAccepted: 9}
	lost := &client.LostError{Name: "sku-0", Token: 3, Cause: &fence.LeaseExpiredError{Name: "sku-0", Token: 3}}
	wrap := func(err error) error { return fmt.Errorf("write: %w", err) }
	for _, tc := range []struct {
		err                 error
		mut, acq, rel, read Outcome
		last                uint64
	}{
		{nil, OutcomeOK, OutcomeOK, OutcomeOK, OutcomeOK, 0},
		{wrap(stale), OutcomeStale, OutcomeUnknown, OutcomeStale, OutcomeFail, 9},
		{&fence.NotHolderError{Name: "sku-0", Token: 3}, OutcomeStale, OutcomeUnknown, OutcomeStale, OutcomeFail, 0},
		{&fence.LeaseExpiredError{Name: "sku-0", Token: 3}, OutcomeStale, OutcomeUnknown, OutcomeStale, OutcomeFail, 0},
		{&fence.BusyError{Name: "sku-0", Waited: true}, OutcomeFail, OutcomeFail, OutcomeUnknown, OutcomeFail, 0},
		{fence.Invalid("ttl", "at least 10ms", ""), OutcomeFail, OutcomeFail, OutcomeFail, OutcomeFail, 0},
		{&fence.OpConflictError{Field: "op_id", ID: "x"}, OutcomeFail, OutcomeUnknown, OutcomeUnknown, OutcomeFail, 0},
		{fence.Exhausted("waiters", "at most 1", ""), OutcomeFail, OutcomeFail, OutcomeUnknown, OutcomeFail, 0},
		{&fence.SessionExpiredError{Session: 4}, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, 0},
		{lost, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, OutcomeFail, 0},
		{context.DeadlineExceeded, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, 0},
		{wrap(errors.New("connection reset by peer")), OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, 0},
		{client.ErrClientClosed, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, OutcomeUnknown, 0},
	} {
		if out, last := classifyMutation(tc.err); out != tc.mut || last != tc.last {
			t.Errorf("classifyMutation(%v) = %s, %d; want %s, %d", tc.err, out, last, tc.mut, tc.last)
		}
		if out := classifyAcquire(tc.err); out != tc.acq {
			t.Errorf("classifyAcquire(%v) = %s; want %s", tc.err, out, tc.acq)
		}
		if out := classifyRelease(tc.err); out != tc.rel {
			t.Errorf("classifyRelease(%v) = %s; want %s", tc.err, out, tc.rel)
		}
		if out := classifyRead(tc.err); out != tc.read {
			t.Errorf("classifyRead(%v) = %s; want %s", tc.err, out, tc.read)
		}
	}
}

// --- processes --------------------------------------------------------------

// buildWorkerBins builds fence and fence-chaos into dir.
func buildWorkerBins(t *testing.T, dir string) (fenceBin, chaosBin string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	fenceBin, chaosBin = filepath.Join(dir, "fence"), filepath.Join(dir, "fence-chaos")
	for bin, pkg := range map[string]string{fenceBin: "./cmd/fence", chaosBin: "./cmd/fence-chaos"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	return fenceBin, chaosBin
}

// startFence runs `fence serve` on a free loopback port until the test
// ends and returns its URL once /readyz answers 200.
func startFence(t *testing.T, bin string) string {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), "data")
	for attempt := 0; ; attempt++ {
		addr := testutil.FreeAddr(t)
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir)
		log := &testutil.Buffer{}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
			if t.Failed() {
				t.Logf("fence serve %s:\n%s", addr, log.String())
			}
		})
		url := "http://" + addr
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if resp, err := http.Get(url + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return url
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if attempt == 3 {
			t.Fatalf("fence serve on %s did not get ready:\n%s", addr, log.String())
		}
	}
}

type workerProc struct {
	cfg    WorkerConfig
	cmd    *exec.Cmd
	log    *testutil.Buffer
	exited chan struct{}
}

func startWorkerProc(t *testing.T, bin string, cfg WorkerConfig) *workerProc {
	t.Helper()
	p := &workerProc{cfg: cfg, cmd: exec.Command(bin, append([]string{"worker"}, cfg.Args()...)...), log: &testutil.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("worker %d output:\n%s", cfg.ID, p.log.String())
		}
	})
	return p
}

// stop sends SIGTERM and wants exit 0; the 60s is a hang guard (a worker
// exits within a second of SIGTERM: it waits out no hold nor TTL).
func (p *workerProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("worker %d did not exit within 60s of SIGTERM:\n%s", p.cfg.ID, p.log.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("worker %d exited %d after SIGTERM:\n%s", p.cfg.ID, code, p.log.String())
	}
}

func (p *workerProc) history(t *testing.T) []Op {
	t.Helper()
	b, err := os.ReadFile(p.cfg.History)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	ops, err := ReadHistory(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// testPrefix sets up fresh per-test tables, dropped at the end.
func testPrefix(t *testing.T, dsn string, resources int) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	prefix := "chaos_wt_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := SetupPostgres(ctx, dsn, prefix, resources); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := DropPostgres(ctx, dsn, prefix); err != nil {
			t.Errorf("DropPostgres: %v", err)
		}
	})
	return prefix
}

// --- history shape ----------------------------------------------------------

// checkShape checks what every worker history must satisfy, faults or not:
// op counters 1, 2, 3…; Return 0 exactly for unknown outcomes; every OK
// acquire followed by the store ops of its hold (its token, its sku) and
// then exactly one release of that lock and token, with HeldFrom the
// acquire's Return and HeldFrom <= HeldUntil <= the release's Call; no
// store op and no release outside a hold.
func checkShape(t *testing.T, ops []Op, control bool) {
	t.Helper()
	if len(ops) == 0 {
		t.Fatal("empty history")
	}
	var hold *Op
	for i, op := range ops {
		where := fmt.Sprintf("op %d %+v", i, op)
		if op.N != i+1 {
			t.Fatalf("%s: N is %d, want %d", where, op.N, i+1)
		}
		switch op.Out {
		case OutcomeOK, OutcomeStale, OutcomeFail:
			if op.Return < op.Call || op.Call == 0 {
				t.Fatalf("%s: Call %d, Return %d", where, op.Call, op.Return)
			}
		case OutcomeUnknown:
			if op.Return != 0 {
				t.Fatalf("%s: unknown outcome with a Return", where)
			}
		default:
			t.Fatalf("%s: outcome %q", where, op.Out)
		}
		if op.Out != OutcomeOK && op.Out != OutcomeUnknown && op.Err == "" {
			t.Errorf("%s: refusal without its error text", where)
		}
		switch op.Kind {
		case KindAcquire:
			if hold != nil {
				t.Fatalf("%s: acquire while holding %+v", where, *hold)
			}
			if op.Out == OutcomeOK {
				if op.Token == 0 {
					t.Fatalf("%s: granted without a token", where)
				}
				h := op
				hold = &h
			}
		case KindRelease:
			if hold == nil {
				t.Fatalf("%s: release without a hold", where)
			}
			if op.Lock != hold.Lock || op.Token != hold.Token || op.Session != hold.Session {
				t.Fatalf("%s: release of another lease than %+v", where, *hold)
			}
			if op.HeldFrom != hold.Return || op.HeldUntil < op.HeldFrom || op.HeldUntil > op.Call {
				t.Fatalf("%s: held [%d, %d], acquire returned %d, release called %d", where, op.HeldFrom, op.HeldUntil, hold.Return, op.Call)
			}
			if op.Out == OutcomeFail {
				t.Fatalf("%s: release failed", where)
			}
			hold = nil
		case KindRead, KindWrite, KindAdd:
			if hold == nil {
				t.Fatalf("%s: store op outside a hold", where)
			}
			var k int
			if _, err := fmt.Sscanf(hold.Lock, "sku-%d", &k); err != nil {
				t.Fatal(err)
			}
			switch op.Store {
			case StoreFence:
				if op.Res != fmt.Sprintf("stock/sku-%d", k) || !op.Fenced {
					t.Fatalf("%s: under %s", where, hold.Lock)
				}
			case StorePostgres:
				if op.Res != hold.Lock || op.Fenced == control {
					t.Fatalf("%s: under %s (control %v)", where, hold.Lock, control)
				}
			default:
				t.Fatalf("%s: store %q", where, op.Store)
			}
			if op.Kind != KindRead && op.Token != hold.Token {
				t.Fatalf("%s: token is not the hold's %d", where, hold.Token)
			}
			if op.Kind == KindWrite && (op.OpID != "") != (op.Store == StoreFence) {
				t.Fatalf("%s: op_id on a write (only the built-in store's writes carry one)", where)
			}
			if op.Kind == KindAdd && (op.Value != restockDelta || (op.Fenced && op.OpID == "") || op.Attempts < 1) {
				t.Fatalf("%s: not a restock", where)
			}
		default:
			t.Fatalf("%s: kind %q in a worker history", where, op.Kind)
		}
	}
	if hold != nil {
		t.Fatalf("the last hold %+v was never released", *hold)
	}
}

type wtKey struct{ store, res string }

// checkFaultFree checks a history made with no faults: every op definite
// (no stale; unknown only for an op abandoned at SIGTERM), and per resource
// the OK mutations are versions 1..n in order with non-decreasing tokens,
// each write the read before it minus one, each add the value before plus
// 5, and the final read the last mutation's value, version and token (or,
// with a mutation abandoned at SIGTERM, possibly that one's).
func checkFaultFree(t *testing.T, ops []Op, finals []Op) {
	t.Helper()
	muts := map[wtKey][]Op{}
	abandoned := map[wtKey]Op{}
	var lastRead = map[int]Op{} // per worker
	for _, op := range ops {
		if op.Out == OutcomeUnknown && strings.Contains(op.Err, "context canceled") {
			if op.Kind == KindWrite || op.Kind == KindAdd {
				k := wtKey{op.Store, op.Res}
				if _, dup := abandoned[k]; dup {
					t.Errorf("two abandoned mutations of %v", k)
				}
				abandoned[k] = op
			}
			continue
		}
		if op.Out == OutcomeUnknown || op.Out == OutcomeStale || op.Replayed {
			t.Errorf("fault-free run: %+v", op)
		}
		switch op.Kind {
		case KindRead:
			lastRead[op.Worker] = op
		case KindWrite, KindAdd:
			if op.Out != OutcomeOK {
				continue
			}
			if op.Kind == KindWrite {
				r := lastRead[op.Worker]
				if r.Res != op.Res || r.Store != op.Store || op.Value != r.ResValue-1 || op.Version != r.Version+1 {
					t.Errorf("write %+v does not follow its read %+v", op, r)
				}
			}
			k := wtKey{op.Store, op.Res}
			muts[k] = append(muts[k], op)
		}
	}
	if len(finals) == 0 {
		t.Fatal("no final reads")
	}
	for _, f := range finals {
		ms := muts[wtKey{f.Store, f.Res}]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
		var value int64
		var token uint64
		for i, m := range ms {
			if m.Version != uint64(i+1) {
				t.Fatalf("%s %s: mutation %d has version %d: %+v", f.Store, f.Res, i+1, m.Version, m)
			}
			if m.Token < token {
				t.Errorf("%s %s: token went down at version %d: %+v", f.Store, f.Res, m.Version, m)
			}
			token = m.Token
			if m.LastToken != m.Token {
				t.Errorf("%s %s: last token after %+v is %d", f.Store, f.Res, m, m.LastToken)
			}
			switch m.Kind {
			case KindWrite:
				value = m.Value
			case KindAdd:
				if m.ResValue != value+restockDelta {
					t.Errorf("%s %s: add after value %d returned %d: %+v", f.Store, f.Res, value, m.ResValue, m)
				}
				value = m.ResValue
			}
		}
		if a, ok := abandoned[wtKey{f.Store, f.Res}]; ok && f.Version == uint64(len(ms))+1 {
			// The abandoned one was applied, after every OK one.
			if a.Token < token {
				t.Errorf("%s %s: abandoned %+v applied after token %d", f.Store, f.Res, a, token)
			}
			token = a.Token
			if a.Kind == KindWrite {
				value = a.Value
			} else {
				value += restockDelta
			}
			ms = append(ms, a)
		}
		if f.Version != uint64(len(ms)) || f.ResValue != value || f.LastToken != token {
			t.Errorf("final %+v: want version %d value %d last token %d", f, len(ms), value, token)
		}
	}
}

// --- process tests ----------------------------------------------------------

func TestWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fence and worker processes")
	}
	dsn := testutil.PostgresDSN(t)
	fenceBin, chaosBin := buildWorkerBins(t, t.TempDir())

	t.Run("histories", func(t *testing.T) {
		const K = 2
		url := startFence(t, fenceBin)
		prefix := testPrefix(t, dsn, K)
		dir := t.TempDir()
		var procs []*workerProc
		for id := 0; id < 2; id++ {
			procs = append(procs, startWorkerProc(t, chaosBin, WorkerConfig{
				ID: id, Server: url, Resources: K, Stores: []string{StoreFence, StorePostgres},
				PostgresDSN: dsn, PGPrefix: prefix, History: filepath.Join(dir, fmt.Sprintf("w%d.jsonl", id)),
				Seed: 42, TTL: 2 * time.Second, SessionTTL: 2 * time.Second, Hold: time.Millisecond,
			}))
		}
		// The load is counted, not timed (it was a 6s sleep: too short for
		// a slow machine to cover the workload, longer than a fast one
		// needs): on until the histories hold an OK acquire of each kind
		// and an OK write and add on each store, and 100 operations.
		covered := func() (int, map[string]int) {
			count := map[string]int{}
			n := 0
			for _, p := range procs {
				ops := p.history(t) // a line being written is left for later
				n += len(ops)
				for _, op := range ops {
					if op.Out != OutcomeOK {
						continue
					}
					switch op.Kind {
					case KindAcquire:
						count[fmt.Sprintf("acquire session=%v", op.Session)]++
					case KindWrite, KindAdd:
						count[string(op.Kind)+" "+op.Store]++
					}
				}
			}
			return n, count
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			n, count := covered()
			if n >= 100 && len(count) == 6 {
				break
			}
			if time.Now().After(deadline) { // a hang guard
				t.Fatalf("after 2 minutes the workers have %d ops, OK: %v", n, count)
			}
		}
		// Both at once: after SIGTERM no worker starts an op, so an op
		// abandoned by the shutdown is the last of its resource.
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		var all []Op
		for _, p := range procs {
			p.stop(t)
			ops := p.history(t)
			checkShape(t, ops, false)
			all = append(all, ops...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		finals, err := FinalReads(ctx, url, dsn, prefix, K, []string{StoreFence, StorePostgres})
		if err != nil {
			t.Fatal(err)
		}
		if len(finals) != 2*K {
			t.Fatalf("%d final reads, want %d", len(finals), 2*K)
		}
		for _, f := range finals {
			if f.Worker != -1 || f.Kind != KindFinal || f.Out != OutcomeOK {
				t.Fatalf("final %+v", f)
			}
		}
		SortOps(all)
		checkFaultFree(t, all, finals)

		// The workload covers what it claims: both lease kinds, both stores,
		// writes and adds on each.
		count := map[string]int{}
		for _, op := range all {
			if op.Out != OutcomeOK {
				continue
			}
			switch op.Kind {
			case KindAcquire:
				count[fmt.Sprintf("acquire session=%v", op.Session)]++
			case KindWrite, KindAdd:
				count[string(op.Kind)+" "+op.Store]++
			}
		}
		t.Logf("%d ops; ok: %v", len(all), count)
		for _, want := range []string{"acquire session=true", "acquire session=false", "write fence", "write postgres", "add fence", "add postgres"} {
			if count[want] == 0 {
				t.Errorf("no OK %s in %d ops", want, len(all))
			}
		}
	})

	// SIGTERM while holding: the worker abandons the rest of its hold
	// (the write is not sent), releases the lease, records the release and
	// exits 0; the lock is free at once.
	t.Run("sigterm-mid-hold", func(t *testing.T) {
		url := startFence(t, fenceBin)
		// A hold of an hour: a worker that waited it out would not stop
		// at all (it was 30s, with "stopped within 5s" checked: a bound a
		// loaded machine could miss).
		a := startWorkerProc(t, chaosBin, WorkerConfig{
			ID: 1, Server: url, Resources: 1, History: filepath.Join(t.TempDir(), "a.jsonl"),
			Seed: 3, Mode: "session", Hold: time.Hour,
		})
		deadline := time.Now().Add(20 * time.Second)
		for {
			ops := a.history(t)
			if len(ops) > 0 && ops[len(ops)-1].Kind == KindRead {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no read in 20s: %+v", ops)
			}
			time.Sleep(10 * time.Millisecond)
		}
		a.stop(t)
		ops := a.history(t)
		checkShape(t, ops, false)
		if len(ops) != 3 || ops[0].Kind != KindAcquire || !ops[0].Session || ops[1].Kind != KindRead || ops[2].Kind != KindRelease || ops[2].Out != OutcomeOK {
			t.Fatalf("history %+v: want acquire, read, release ok", ops)
		}
		cl, err := client.New(url, client.WithoutSession())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := cl.Acquire(ctx, "sku-0", client.TTL(5*time.Second))
		if err != nil {
			t.Fatalf("sku-0 after the worker stopped: %v", err)
		}
		if uint64(l.Token()) <= ops[0].Token {
			t.Fatalf("token %d after the worker's %d", l.Token(), ops[0].Token)
		}
		l.Release(ctx)
	})

	// The story's hazard: worker A reads, is paused past its TTL mid-hold,
	// B takes the lock and writes; A wakes and sends its write with its old
	// token. A fenced store refuses it (stale); the control run's plain
	// PostgreSQL write accepts it.
	for _, tc := range []struct {
		name    string
		store   string
		control bool
	}{
		{"stale-after-pause/fence", StoreFence, false},
		{"stale-after-pause/postgres", StorePostgres, false},
		{"control-after-pause/postgres", StorePostgres, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startFence(t, fenceBin)
			var prefix string
			var pg *pgStore
			if tc.store == StorePostgres {
				prefix = testPrefix(t, dsn, 1)
				var err error
				// A guard that verifies proofs with the server's key set.
				if pg, err = newPGStore(context.Background(), dsn, prefix, tc.control, newKeyCache([]string{url}, nil, "")); err != nil {
					t.Fatal(err)
				}
				defer pg.Close()
			}
			const ttl = time.Second
			a := startWorkerProc(t, chaosBin, WorkerConfig{
				ID: 7, Server: url, Resources: 1, Stores: []string{tc.store}, PostgresDSN: dsn, PGPrefix: prefix,
				History: filepath.Join(t.TempDir(), "a.jsonl"), Seed: 1, TTL: ttl, SessionTTL: ttl,
				Control: tc.control, Mode: "standalone", Hold: 2500 * time.Millisecond,
			})
			// Wait for A's first read (its lease held), then stop it.
			var acq, read Op
			deadline := time.Now().Add(20 * time.Second)
			for read.Kind == "" {
				if time.Now().After(deadline) {
					t.Fatalf("worker A read nothing in 20s: %+v", a.history(t))
				}
				for _, op := range a.history(t) {
					if op.Kind == KindAcquire && op.Out == OutcomeOK {
						acq = op
					}
					if op.Kind == KindRead && op.Out == OutcomeOK && acq.Kind != "" {
						read = op
						break
					}
				}
				if read.Kind == "" {
					time.Sleep(5 * time.Millisecond)
				}
			}
			if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()

			// B: a new owner once A's lease has expired on the server.
			cl, err := client.New(url, client.WithoutSession())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			lease, err := cl.Acquire(ctx, "sku-0", client.TTL(10*time.Second), client.Wait(15*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			granted := time.Now().UnixNano()
			tokB := lease.Token()
			if uint64(tokB) <= acq.Token {
				t.Fatalf("B's token %d is not newer than A's %d", tokB, acq.Token)
			}
			var bVersion uint64
			if tc.store == StoreFence {
				r, err := cl.Write(ctx, "stock/sku-0", tokB, []byte("100"))
				if err != nil {
					t.Fatal(err)
				}
				bVersion = r.Version
			} else {
				m, out, _, err := pg.Write(ctx, nil, 0, lease.SignedToken(), 100, "")
				if out != OutcomeOK {
					t.Fatalf("B's write: %s %v", out, err)
				}
				bVersion = m.Version
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// A stays stopped past the rest of its hold and 2×TTL.
			time.Sleep(time.Until(stopped.Add(2*ttl + 600*time.Millisecond)))
			if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}

			var write, rel Op
			deadline = time.Now().Add(20 * time.Second)
			for rel.Kind == "" {
				if time.Now().After(deadline) {
					t.Fatalf("worker A recorded no write and release after its read: %+v", a.history(t))
				}
				for _, op := range a.history(t) {
					if op.N > read.N && op.Kind == KindWrite && write.Kind == "" {
						write = op
					}
					if op.N > read.N && op.Kind == KindRelease && rel.Kind == "" {
						rel = op
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			a.stop(t)
			checkShape(t, a.history(t), tc.control)

			if write.Kind == "" || write.Token != acq.Token || write.Value != read.ResValue-1 {
				t.Fatalf("A's write after the pause: %+v (acquire %+v, read %+v)", write, acq, read)
			}
			if tc.control {
				// The hazard: the store took the old owner's write over B's.
				if write.Out != OutcomeOK || write.Fenced || write.Version != bVersion+1 || write.LastToken != acq.Token {
					t.Fatalf("control: A's late write was not accepted as a plain write after B's (version %d): %+v", bVersion, write)
				}
			} else if write.Out != OutcomeStale || write.LastToken != uint64(tokB) || !write.Fenced {
				t.Fatalf("A's late write with token %d was not refused as stale by B's token %d: %+v", acq.Token, tokB, write)
			}
			// A's lease: ended before B was granted (as A could tell), and
			// its release says the server no longer had it.
			if rel.Token != acq.Token || rel.HeldUntil >= granted {
				t.Fatalf("A's release %+v: held until %d, B granted at %d", rel, rel.HeldUntil, granted)
			}
			if rel.Out != OutcomeStale {
				t.Fatalf("A's release of its expired lease: %+v", rel)
			}
		})
	}
}

// flakyStore is a store whose adds answer from a script of outcomes; it
// remembers the op_ids it was sent.
type flakyStore struct {
	fenceStore
	fenced bool
	script []Outcome
	opIDs  []string
}

func (s *flakyStore) Fenced() bool { return s.fenced }

func (s *flakyStore) Add(_ context.Context, _ *client.Client, _ int, _ fence.SignedToken, delta int64, opID string) (storeMut, Outcome, uint64, error) {
	s.opIDs = append(s.opIDs, opID)
	out := s.script[0]
	s.script = s.script[1:]
	switch out {
	case OutcomeOK:
		return storeMut{Value: 12, Version: 4, LastToken: 9, Replayed: len(s.opIDs) > 1}, out, 0, nil
	case OutcomeStale:
		return storeMut{}, out, 11, &fence.StaleTokenError{Token: 9, LastAccepted: 11}
	}
	return storeMut{}, out, 0, context.DeadlineExceeded
}

// An add whose outcome is unknown is retried with the same op_id (and is
// one Op: the first attempt's Call, the last reply's Return, the attempts
// and the replay); without op_id idempotency (the control run) it is not.
func TestWorkerAddRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fenced   bool
		script   []Outcome
		out      Outcome
		attempts int
	}{
		{"replayed-after-unknowns", true, []Outcome{OutcomeUnknown, OutcomeUnknown, OutcomeOK}, OutcomeOK, 3},
		{"stale-after-unknown", true, []Outcome{OutcomeUnknown, OutcomeStale}, OutcomeStale, 2},
		{"control-not-retried", false, []Outcome{OutcomeUnknown, OutcomeOK}, OutcomeUnknown, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.jsonl")
			rec, err := NewRecorder(path)
			if err != nil {
				t.Fatal(err)
			}
			w := &wrk{cfg: WorkerConfig{ID: 2}, rec: rec, idBase: "w2-test"}
			w.rng = newTestRand()
			s := &flakyStore{fenced: tc.fenced, script: tc.script}
			before := nowNano()
			base := Op{Store: s.Name(), Res: s.Res(0), Fenced: s.Fenced()}
			if err := w.add(context.Background(), s, &heldLease{k: 0}, 0, base, fence.SignedToken{Token: 9}); err != nil {
				t.Fatal(err)
			}
			rec.Close()
			f, _ := os.Open(path)
			ops, err := ReadHistory(f)
			f.Close()
			if err != nil || len(ops) != 1 {
				t.Fatalf("history: %v %+v", err, ops)
			}
			op := ops[0]
			if op.Kind != KindAdd || op.Out != tc.out || op.Attempts != tc.attempts || len(s.opIDs) != tc.attempts || op.Token != 9 || op.Value != restockDelta {
				t.Fatalf("op %+v after %d sends", op, len(s.opIDs))
			}
			if op.Call < before || (op.Out == OutcomeUnknown) != (op.Return == 0) || (op.Return != 0 && op.Return < op.Call) {
				t.Fatalf("times of %+v (started after %d)", op, before)
			}
			for _, id := range s.opIDs {
				if id != s.opIDs[0] || (tc.fenced && (id == "" || id != op.OpID)) || (!tc.fenced && (id != "" || op.OpID != "")) {
					t.Fatalf("op_ids sent %q, recorded %q", s.opIDs, op.OpID)
				}
			}
			switch tc.out {
			case OutcomeOK:
				if !op.Replayed || op.ResValue != 12 || op.Version != 4 || op.LastToken != 9 {
					t.Fatalf("ok add: %+v", op)
				}
			case OutcomeStale:
				if op.LastToken != 11 || op.Err == "" {
					t.Fatalf("stale add: %+v", op)
				}
			}
		})
	}
}

func newTestRand() *mrand.Rand { return mrand.New(mrand.NewPCG(1, 2)) }
