package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"golang.org/x/sys/unix"
)

// WorkerConfig configures one worker process (`fence-chaos worker ARGS`,
// ARGS from Args).
type WorkerConfig struct {
	ID          int           // worker number, recorded in every Op
	Server      string        // Fence URL, or several comma-separated (each node's proxy): the client fails over
	Resources   int           // K: locks sku-0..sku-K-1 (default 3)
	Stores      []string      // StoreFence and/or StorePostgres (default: fence)
	PostgresDSN string        // needed with StorePostgres
	PGPrefix    string        // the run's table prefix (SetupPostgres)
	History     string        // JSONL file this worker writes (truncated)
	Seed        uint64        // the worker's choices come from (Seed, ID)
	TTL         time.Duration // standalone leases (default 1s)
	SessionTTL  time.Duration // the session client's TTL (default 1s)
	Control     bool          // PostgreSQL writes without the guard (Fenced=false)
	CACert      string        // the CA of servers that serve TLS (https:// URLs)
	AuthToken   string        // the worker's bearer token, when authentication is on

	// Mode forces the lease kind: "" or "mixed" (both, chosen per
	// iteration), "session" or "standalone". For tests.
	Mode string
	// Hold, when > 0, makes every iteration sleep exactly Hold between its
	// read and its write (a test can then pause the worker mid-hold); 0:
	// half the iterations sleep up to TTL there.
	Hold time.Duration
	// Workload is what the worker does (worker_boundaries.go):
	// WorkloadStory (""), WorkloadSKU, WorkloadImport, WorkloadSet or
	// WorkloadPermits.
	Workload string
	// Permits is WorkloadPermits' count (default 2).
	Permits uint32
}

// Defaults of a WorkerConfig's zero fields.
const (
	DefaultWorkerTTL = time.Second
	workerAttempt    = time.Second     // client.WithAttemptTimeout
	workerOpTimeout  = 3 * time.Second // one read, write, add attempt or release
	addRetryFor      = 6 * time.Second // retries of an add with the same op_id after unknown outcomes
	// addAttempt bounds one call of an add: shorter than other ops, so that
	// a blackhole or a server pause ends it unknown and the add is sent
	// again with the same op_id in a new call (on the session: a new seq).
	addAttempt   = 1500 * time.Millisecond
	restockDelta = 5
)

func (c WorkerConfig) withDefaults() WorkerConfig {
	if c.Resources <= 0 {
		c.Resources = 3
	}
	if len(c.Stores) == 0 {
		c.Stores = []string{StoreFence}
	}
	if c.TTL <= 0 {
		c.TTL = DefaultWorkerTTL
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultWorkerTTL
	}
	if c.Permits == 0 {
		c.Permits = defaultPermits
	}
	return c
}

func (c WorkerConfig) validate() error {
	if c.Server == "" {
		return errors.New("chaos worker: no server URL (-server)")
	}
	if c.History == "" {
		return errors.New("chaos worker: no history file (-history)")
	}
	for _, s := range c.Stores {
		switch s {
		case StoreFence:
		case StorePostgres:
			if c.PostgresDSN == "" {
				return errors.New("chaos worker: store postgres needs -pg")
			}
			if err := checkPrefix(c.PGPrefix); err != nil {
				return err
			}
		default:
			return fmt.Errorf("chaos worker: unknown store %q (want %s, %s)", s, StoreFence, StorePostgres)
		}
	}
	switch c.Mode {
	case "", "mixed", "session", "standalone":
	default:
		return fmt.Errorf("chaos worker: unknown mode %q (want mixed, session, standalone)", c.Mode)
	}
	return validWorkload(c.Workload, c.Permits)
}

// Args returns the command-line arguments that ParseWorkerArgs turns back
// into c (after `fence-chaos worker`).
func (c WorkerConfig) Args() []string {
	a := []string{
		"-id", strconv.Itoa(c.ID),
		"-server", c.Server,
		"-resources", strconv.Itoa(c.Resources),
		"-stores", strings.Join(c.Stores, ","),
		"-history", c.History,
		"-seed", strconv.FormatUint(c.Seed, 10),
		"-ttl", c.TTL.String(),
		"-session-ttl", c.SessionTTL.String(),
	}
	if c.PostgresDSN != "" {
		a = append(a, "-pg", c.PostgresDSN)
	}
	if c.PGPrefix != "" {
		a = append(a, "-pg-prefix", c.PGPrefix)
	}
	if c.Control {
		a = append(a, "-control")
	}
	if c.Mode != "" {
		a = append(a, "-mode", c.Mode)
	}
	if c.Hold > 0 {
		a = append(a, "-hold", c.Hold.String())
	}
	if c.CACert != "" {
		a = append(a, "-cacert", c.CACert)
	}
	if c.AuthToken != "" {
		a = append(a, "-auth-token", c.AuthToken)
	}
	if c.Workload != "" && c.Workload != WorkloadStory {
		a = append(a, "-workload", c.Workload)
	}
	if c.Permits != 0 && c.Permits != defaultPermits {
		a = append(a, "-permits", strconv.FormatUint(uint64(c.Permits), 10))
	}
	return a
}

// ParseWorkerArgs parses the arguments of `fence-chaos worker`.
func ParseWorkerArgs(args []string) (WorkerConfig, error) {
	var c WorkerConfig
	fs := flag.NewFlagSet("fence-chaos worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&c.ID, "id", 0, "worker number")
	fs.StringVar(&c.Server, "server", "", "Fence URL, or a comma-separated list (the client fails over between them)")
	fs.IntVar(&c.Resources, "resources", 3, "locks and resources sku-0..sku-K-1")
	stores := fs.String("stores", StoreFence, "comma-separated stores: fence,postgres")
	fs.StringVar(&c.PostgresDSN, "pg", "", "PostgreSQL DSN")
	fs.StringVar(&c.PGPrefix, "pg-prefix", "", "PostgreSQL table prefix of the run")
	fs.StringVar(&c.History, "history", "", "history file (JSONL)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed")
	fs.DurationVar(&c.TTL, "ttl", DefaultWorkerTTL, "TTL of standalone leases")
	fs.DurationVar(&c.SessionTTL, "session-ttl", DefaultWorkerTTL, "session TTL")
	fs.BoolVar(&c.Control, "control", false, "PostgreSQL writes without the guard")
	fs.StringVar(&c.Mode, "mode", "", "mixed, session or standalone")
	fs.DurationVar(&c.Hold, "hold", 0, "sleep exactly this long between read and write (tests)")
	fs.StringVar(&c.CACert, "cacert", "", "CA certificate (PEM) of servers that serve TLS")
	fs.StringVar(&c.AuthToken, "auth-token", "", "bearer token, when the servers check them")
	fs.StringVar(&c.Workload, "workload", "", "story (default), sku, import, set or permits (lock boundaries: needs a build with them)")
	permits := fs.Uint("permits", defaultPermits, "the permits workload's count")
	if err := fs.Parse(args); err != nil {
		return WorkerConfig{}, fmt.Errorf("chaos worker: %w", err)
	}
	if fs.NArg() > 0 {
		return WorkerConfig{}, fmt.Errorf("chaos worker: unexpected arguments %q", fs.Args())
	}
	if *permits > fence.MaxPermits {
		return WorkerConfig{}, fmt.Errorf("chaos worker: -permits %d: at most %d", *permits, fence.MaxPermits)
	}
	c.Permits = uint32(*permits)
	c.Stores = nil
	for _, s := range strings.Split(*stores, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Stores = append(c.Stores, s)
		}
	}
	c = c.withDefaults()
	return c, c.validate()
}

type wrk struct {
	cfg    WorkerConfig
	rng    *rand.Rand
	rec    *Recorder
	n      int
	idBase string // makes op_ids unique across restarts of a worker number
	sess   *client.Client
	solo   *client.Client
	stores []store
}

// heldLease is the lease a worker holds between its acquire and its release.
type heldLease struct {
	lease    *client.Lease
	cl       *client.Client
	k        int // the SKU whose resource it protects (-1: none)
	session  bool
	heldFrom int64
	want     want
	// proof is what its writes send: the lease's signed token, or a set's
	// proof for lock sku-k (Lease.ProofFor)
	proof fence.SignedToken
}

// want is what one acquire asks for: one lock (name, with a mode and
// permits) or a set (set, sorted by name; name is its first lock).
type want struct {
	name    string
	mode    string // ModeShared or "" (exclusive)
	permits uint32
	set     []LockRef
	listed  []LockRef // set: in the order the request lists it
}

func oneLock(name string) want { return want{name: name} }

func (wt want) record(op *Op) {
	op.Lock, op.Mode, op.Permits, op.Set = wt.name, wt.mode, wt.permits, wt.set
}

func nowNano() int64 { return time.Now().UnixNano() }

// monoNano reads CLOCK_MONOTONIC (ns): the same clock in every process of
// the host, which no FENCE_TEST_CLOCK_OFFSET and no wall-clock step moves.
func monoNano() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// monoOf converts t (a time with a monotonic reading, such as a lease's
// Deadline) to CLOCK_MONOTONIC nanoseconds; 0 for the zero time.
func monoOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return monoNano() + int64(time.Until(t))
}

// WindowFile is the marker file that exists while the worker is in its write
// window (it read the stock and sleeps before writing): History + ".window".
func (c WorkerConfig) WindowFile() string { return c.History + ".window" }

// RunWorker runs the paused-worker story's workload until ctx ends, recording every
// logical operation in cfg.History. Per iteration it picks a lock sku-k and
// a lease kind (on the session client, or standalone with TTL), acquires
// (mostly waiting, sometimes trying once), picks a store, reads the stock,
// sometimes sleeps while holding, writes v-1 with the token, sometimes adds
// +5 with an op_id (retried with the same op_id after an unknown outcome),
// and releases. Writes never use the lease's context: a worker that was
// paused past its lease sends its write anyway, and the store must refuse
// it. When ctx ends the op in hand is abandoned (recorded unknown), a held
// lease is released (best effort, recorded), and RunWorker returns nil.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	rec, err := NewRecorder(cfg.History)
	if err != nil {
		return err
	}
	w := &wrk{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID)+0x9e3779b97f4a7c15)),
		rec:    rec,
		idBase: fmt.Sprintf("w%d-%s", cfg.ID, strconv.FormatInt(time.Now().UnixNano(), 36)),
	}
	defer rec.Close()
	var sec []client.Option
	if cfg.CACert != "" {
		tc, err := trustCA(cfg.CACert)
		if err != nil {
			return err
		}
		sec = append(sec, client.WithTLS(tc))
	}
	if cfg.AuthToken != "" {
		sec = append(sec, client.WithBearerToken(cfg.AuthToken))
	}
	w.sess, err = client.New(cfg.Server, append(sec, client.WithSessionTTL(cfg.SessionTTL),
		client.WithAttemptTimeout(workerAttempt), client.WithBackoff(20*time.Millisecond, 250*time.Millisecond))...)
	if err != nil {
		return err
	}
	w.solo, err = client.New(cfg.Server, append(sec, client.WithoutSession(),
		client.WithAttemptTimeout(workerAttempt), client.WithBackoff(20*time.Millisecond, 250*time.Millisecond))...)
	if err != nil {
		w.sess.Close()
		return err
	}
	defer func() {
		closeBounded(w.sess)
		closeBounded(w.solo)
	}()
	for _, s := range cfg.Stores {
		switch s {
		case StoreFence:
			w.stores = append(w.stores, fenceStore{})
		case StorePostgres:
			// The guard verifies the lease's signed token with the
			// cluster's key set, fetched from the nodes (through the
			// proxies, like every call of the worker) on demand.
			var tc *tls.Config
			if cfg.CACert != "" {
				if tc, err = trustCA(cfg.CACert); err != nil {
					return err
				}
			}
			keys := newKeyCache([]string{cfg.Server}, tc, cfg.AuthToken)
			ps, err := newPGStore(ctx, cfg.PostgresDSN, cfg.PGPrefix, cfg.Control, keys)
			if err != nil {
				return err
			}
			w.stores = append(w.stores, ps)
		}
	}
	defer func() {
		for _, s := range w.stores {
			s.Close()
		}
	}()
	for ctx.Err() == nil {
		if err := w.iteration(ctx); err != nil {
			return err
		}
		sleepCtx(ctx, time.Duration(w.rng.IntN(10))*time.Millisecond)
	}
	return nil
}

// closeBounded closes a client, waiting at most 3s (closing a session is
// one attempt bounded at 5s by the client).
func closeBounded(c *client.Client) {
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *wrk) record(op Op) error {
	w.n++
	op.Worker, op.N = w.cfg.ID, w.n
	if op.Out != OutcomeUnknown && op.Return == 0 {
		op.Return = nowNano()
		if op.CallMono != 0 {
			op.RetMono = monoNano()
		}
	}
	if op.Out == OutcomeUnknown {
		op.Return, op.RetMono = 0, 0
	}
	if err := w.rec.Record(op); err != nil {
		return fmt.Errorf("chaos worker: recording: %w", err)
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (w *wrk) opID() string {
	return fmt.Sprintf("%s-%d", w.idBase, w.n+1)
}

// iteration is one acquire … release. It returns only recorder errors.
func (w *wrk) iteration(ctx context.Context) error {
	switch w.cfg.Workload {
	case WorkloadSKU:
		return w.skuIteration(ctx)
	case WorkloadImport:
		return w.importIteration(ctx)
	case WorkloadSet:
		return w.setIteration(ctx)
	case WorkloadPermits:
		return w.permitsIteration(ctx)
	}
	k := w.rng.IntN(w.cfg.Resources)
	session := w.rng.IntN(2) == 0
	switch w.cfg.Mode {
	case "session":
		session = true
	case "standalone":
		session = false
	}
	wait := time.Duration(0)
	if w.rng.IntN(5) != 0 { // mostly a blocking wait, sometimes one try
		wait = 2 * max(w.cfg.TTL, w.cfg.SessionTTL)
	}
	h, err := w.acquire(ctx, oneLock(lockName(k)), k, session, wait)
	if err != nil || h == nil {
		return err
	}
	// From here on, the lease is released whatever happens.
	err = w.hold(ctx, h)
	if rerr := w.release(h); err == nil {
		err = rerr
	}
	return err
}

func (w *wrk) acquire(ctx context.Context, wt want, k int, session bool, wait time.Duration) (*heldLease, error) {
	cl := w.solo
	opts := []client.AcquireOption{client.Owner(fmt.Sprintf("worker-%d", w.cfg.ID))}
	if session {
		cl = w.sess
	} else {
		opts = append(opts, client.TTL(w.cfg.TTL))
	}
	if wait > 0 {
		opts = append(opts, client.Wait(wait))
	}
	actx, cancel := context.WithTimeout(ctx, wait+workerOpTimeout)
	defer cancel()
	op := Op{Kind: KindAcquire, Session: session, Call: nowNano(), CallMono: monoNano(), Attempts: 1}
	wt.record(&op)
	lease, err := acquireWant(actx, cl, wt, opts)
	op.RetMono, op.Return = monoNano(), nowNano()
	op.Out = classifyAcquire(err)
	op.Err = errString(err)
	var lost *client.LostError
	if err != nil && errors.As(err, &lost) && lost.Token != 0 {
		// Granted, but the lease was gone before the worker could use it
		// (the reply came after its TTL: the renew that follows a wait was
		// refused). The grant happened, with this token: it takes part in
		// the token checks, with an empty hold, and is released by token
		// like any other (the server says whether it still held).
		op.Out, op.Token = OutcomeOK, uint64(lost.Token)
		if rerr := w.record(op); rerr != nil {
			return nil, rerr
		}
		rop := Op{Kind: KindRelease, Token: op.Token, Session: session,
			HeldFrom: op.Return, HeldUntil: op.Return, Call: nowNano(), CallMono: monoNano(), Attempts: 1}
		wt.record(&rop)
		rctx, rcancel := context.WithTimeout(context.Background(), workerOpTimeout)
		rerr := cl.Release(rctx, op.Lock, lost.Token)
		rcancel()
		rop.Out, rop.Err = classifyRelease(rerr), errString(rerr)
		return nil, w.record(rop)
	}
	if err != nil {
		return nil, w.record(op)
	}
	op.Token = uint64(lease.Token())
	h := &heldLease{lease: lease, cl: cl, k: k, session: session, heldFrom: op.Return, want: wt, proof: lease.SignedToken()}
	if len(wt.set) > 0 {
		op.Granted = grantedLocks(lease)
		if k >= 0 {
			h.proof = leaseProofFor(lease, lockName(k))
		}
	}
	return h, w.record(op)
}

// hold is the work under the lease: read, maybe sleep, write v-1, maybe
// add +5. It returns only recorder errors.
func (w *wrk) hold(ctx context.Context, h *heldLease) error {
	return w.holdOn(ctx, h, w.stores[w.rng.IntN(len(w.stores))], h.k)
}

// holdOn is hold on resource k of store s.
func (w *wrk) holdOn(ctx context.Context, h *heldLease, s store, k int) error {
	signed := h.proof
	token := signed.Token
	base := Op{Store: s.Name(), Res: s.Res(k), Session: h.session, Fenced: s.Fenced()}

	if ctx.Err() != nil {
		return nil
	}
	rop := base
	rop.Kind, rop.Call, rop.Attempts = KindRead, nowNano(), 1
	rctx, cancel := context.WithTimeout(ctx, workerOpTimeout)
	st, out, err := s.Read(rctx, h.cl, k)
	cancel()
	rop.Out, rop.Err = out, errString(err)
	if out == OutcomeOK {
		rop.ResValue, rop.LastToken, rop.Version = st.Value, st.LastToken, st.Version
	}
	if err := w.record(rop); err != nil {
		return err
	}
	if out != OutcomeOK {
		return nil
	}

	// The pause window of the story: the stock was read, the write is yet to
	// come. A worker stopped here wakes up and writes anyway. The marker
	// file tells the nemesis (aimed pauses) that this worker is in it.
	var pause time.Duration
	switch {
	case w.cfg.Hold > 0:
		pause = w.cfg.Hold
	case w.rng.IntN(2) == 0:
		pause = time.Duration(w.rng.Int64N(int64(w.cfg.TTL) + 1))
	}
	if pause > 0 {
		marker := w.cfg.WindowFile()
		_ = os.WriteFile(marker, nil, 0o644)
		sleepCtx(ctx, pause)
		_ = os.Remove(marker)
	}
	if ctx.Err() != nil {
		return nil
	}

	wop := base
	wop.Kind, wop.Token, wop.Value, wop.Attempts = KindWrite, uint64(token), st.Value-1, 1
	if s.Name() == StoreFence {
		// The built-in store's writes carry an op_id (the client's own
		// retries resend it); a PostgreSQL write is Check + UPDATE, no id.
		wop.OpID = w.opID()
	}
	wop.Call = nowNano()
	// Not h.lease.Context(): a lost lease must not stop the write.
	wctx, cancel := context.WithTimeout(ctx, workerOpTimeout)
	m, out, last, err := s.Write(wctx, h.cl, k, signed, wop.Value, wop.OpID)
	cancel()
	w.fillMutation(&wop, m, out, last, err)
	if err := w.record(wop); err != nil {
		return err
	}

	if w.rng.IntN(10) < 3 && ctx.Err() == nil {
		return w.add(ctx, s, h, k, base, signed)
	}
	return nil
}

func (w *wrk) fillMutation(op *Op, m storeMut, out Outcome, last uint64, err error) {
	op.Out, op.Err, op.Reason = out, errString(err), string(fence.ReasonOf(err))
	if out != OutcomeUnknown {
		op.Return = nowNano()
	}
	switch out {
	case OutcomeOK:
		op.Version, op.LastToken, op.Replayed = m.Version, m.LastToken, m.Replayed
		if op.Kind == KindAdd {
			op.ResValue = m.Value
		}
	case OutcomeStale:
		op.LastToken = last
	}
}

// add is the restock: +5 with a fresh op_id, retried with the same op_id
// while the outcome is unknown, for up to addRetryFor. In the control run
// (no op_id idempotency in the plain UPDATE) it is not retried and carries
// no op_id.
func (w *wrk) add(ctx context.Context, s store, h *heldLease, k int, base Op, signed fence.SignedToken) error {
	token := signed.Token
	op := base
	op.Kind, op.Token, op.Value = KindAdd, uint64(token), restockDelta
	idempotent := s.Fenced()
	if idempotent {
		op.OpID = w.opID()
	}
	op.Call = nowNano()
	until := time.Now().Add(addRetryFor)
	for {
		op.Attempts++
		actx, cancel := context.WithTimeout(ctx, addAttempt)
		m, out, last, err := s.Add(actx, h.cl, k, signed, restockDelta, op.OpID)
		cancel()
		w.fillMutation(&op, m, out, last, err)
		if out != OutcomeUnknown || !idempotent || ctx.Err() != nil || time.Now().After(until) {
			break
		}
		sleepCtx(ctx, time.Duration(50+w.rng.IntN(150))*time.Millisecond)
	}
	return w.record(op)
}

// release ends the lease with exactly one release Op. It is not bounded by
// the worker's context: at shutdown the held lease is still released (best
// effort, within workerOpTimeout). A lease the client already knows lost is
// released by token, so that the server says what it thinks.
func (w *wrk) release(h *heldLease) error {
	call, callMono := nowNano(), monoNano()
	until := call
	d := h.lease.Deadline()
	if !d.IsZero() {
		until = min(call, d.UnixNano())
	}
	op := Op{
		Kind: KindRelease, Token: uint64(h.lease.Token()), Session: h.session,
		HeldFrom: h.heldFrom, HeldUntil: until, Call: call, CallMono: callMono, DeadlineMono: monoOf(d),
		Attempts: 1,
	}
	h.want.record(&op)
	ctx, cancel := context.WithTimeout(context.Background(), workerOpTimeout)
	defer cancel()
	var err error
	if lost := h.lease.Err(); lost != nil && lost != client.ErrReleased {
		err = h.cl.Release(ctx, op.Lock, h.lease.Token())
	} else {
		err = h.lease.Release(ctx)
		if lost := h.lease.Err(); err != nil && err == lost && !errors.Is(lost, client.ErrReleased) {
			// Lost between the check and the release: nothing was sent.
			err = h.cl.Release(ctx, op.Lock, h.lease.Token())
		}
	}
	op.Out, op.Err = classifyRelease(err), errString(err)
	return w.record(op)
}

// FinalReads reads every resource of every store directly (after the run,
// with no faults) and returns KindFinal ops of worker -1, one per (store,
// resource). A read of the built-in store is retried by the client for up
// to 20s: the server may have just been restarted. A read that fails is
// recorded (outcome unknown, with its error) and joined into the error;
// the other resources are still read.
func FinalReads(ctx context.Context, fenceURL, dsn, prefix string, resources int, stores []string, opts ...client.Option) ([]Op, error) {
	var ops []Op
	var errs []error
	n := 0
	for _, sname := range stores {
		var read func(ctx context.Context, k int) (storeState, error)
		var res func(k int) string
		switch sname {
		case StoreFence:
			cl, err := client.New(fenceURL, append(append([]client.Option(nil), opts...), client.WithoutSession(), client.WithAttemptTimeout(2*time.Second))...)
			if err != nil {
				return nil, err
			}
			defer cl.Close()
			res = fenceStore{}.Res
			read = func(ctx context.Context, k int) (storeState, error) {
				r, err := cl.Read(ctx, res(k))
				return stateOf(r), err
			}
		case StorePostgres:
			if err := checkPrefix(prefix); err != nil {
				return nil, err
			}
			s, err := newPGStore(ctx, dsn, prefix, false, nil)
			if err != nil {
				return nil, err
			}
			defer s.Close()
			res = s.Res
			read = func(ctx context.Context, k int) (storeState, error) { return pgRead(ctx, s.pool, s.table, res(k)) }
		default:
			return nil, fmt.Errorf("chaos: unknown store %q", sname)
		}
		for k := 0; k < resources; k++ {
			n++
			op := Op{Worker: -1, N: n, Kind: KindFinal, Store: sname, Res: res(k), Call: nowNano(), Attempts: 1}
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			st, err := read(rctx, k)
			cancel()
			if err != nil {
				// Recorded, not fatal: a resource without an OK final
				// read fails the check (missing_final) with this error
				// beside it, and the other resources are still read.
				op.Out, op.Err = OutcomeUnknown, err.Error()
				ops = append(ops, op)
				errs = append(errs, fmt.Errorf("chaos: final read of %s %s: %w", sname, res(k), err))
				continue
			}
			op.Return, op.Out = nowNano(), OutcomeOK
			op.ResValue, op.LastToken, op.Version = st.Value, st.LastToken, st.Version
			ops = append(ops, op)
		}
	}
	return ops, errors.Join(errs...)
}
