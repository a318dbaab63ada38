package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// soakLoad is the soak's paced workers. Worker w owns its locks and
// resources (no other worker touches them), so what the store must hold at
// the end is known exactly: each Add counter is the sum of the adds
// acknowledged on it (plus, at most, the adds whose outcome never came
// back), each Write value the last acknowledged one (or one sent after it
// whose outcome never came back).
type soakLoad struct {
	cfg     *SoakConfig
	cl      *soakCluster
	clients []*client.Client
	t0      time.Time

	cycles, failed atomic.Int64
	firstErr       atomic.Value // string

	mu   sync.Mutex
	lats []soakLat // completed cycles, in completion order

	res [][]soakRes // [worker][lock]
}

// soakLat is one completed cycle: when it ended (since t0) and how long
// it took (acquire sent → release acknowledged).
type soakLat struct {
	at time.Duration
	d  time.Duration
}

// soakRes is what the runner knows of one worker's resource pair.
type soakRes struct {
	addAcked   int64    // sum of the acknowledged adds
	addUnknown int64    // sum of the adds whose outcome is unknown
	written    string   // last acknowledged Write value ("" none)
	pending    []string // Write values sent after it with no answer
	held       *client.Lease
}

func newSoakLoad(ctx context.Context, cfg *SoakConfig, cl *soakCluster) (*soakLoad, error) {
	ld := &soakLoad{cfg: cfg, cl: cl, res: make([][]soakRes, cfg.Workers)}
	for w := range ld.res {
		ld.res[w] = make([]soakRes, cfg.Locks)
	}
	addrs := cl.addrs()
	quiet := slog.New(slog.NewTextHandler(discard{}, nil))
	for j := range cfg.Sessions {
		// Session j lists node j mod n first: the sessions are spread
		// over the nodes (the client sticks to the first endpoint that
		// works; a follower forwards to the leader).
		var urls []string
		for k := range addrs {
			urls = append(urls, "http://"+addrs[(j+k)%len(addrs)])
		}
		c, err := client.New(strings.Join(urls, ","), client.WithSessionTTL(time.Duration(sessionTTL)*time.Second), client.WithLogger(quiet))
		if err != nil {
			ld.close()
			return nil, err
		}
		ld.clients = append(ld.clients, c)
	}
	return ld, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (ld *soakLoad) close() {
	for _, c := range ld.clients {
		_ = c.Close()
	}
}

func (ld *soakLoad) start(ctx context.Context, wg *sync.WaitGroup) {
	ld.t0 = time.Now()
	every := time.Duration(float64(ld.cfg.Workers) / ld.cfg.Rate * float64(time.Second))
	for w := range ld.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ld.worker(ctx, w, every)
		}()
	}
}

// worker runs cycles every `every` (paced from a schedule; a worker more
// than a second behind it starts again from now rather than bursting).
func (ld *soakLoad) worker(ctx context.Context, w int, every time.Duration) {
	c := ld.clients[w%len(ld.clients)]
	// Spread the workers' first cycles over one interval.
	next := time.Now().Add(every * time.Duration(w) / time.Duration(ld.cfg.Workers))
	for seq := 0; ; seq++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		} else if d < -time.Second {
			next = time.Now()
		}
		if ctx.Err() != nil {
			return
		}
		next = next.Add(every)
		ld.cycle(ctx, c, w, seq%ld.cfg.Locks, seq)
	}
}

// soakOpTimeout bounds one step of a cycle, its retries included.
const soakOpTimeout = 20 * time.Second

func (ld *soakLoad) fail(step string, err error) {
	ld.failed.Add(1)
	ld.firstErr.CompareAndSwap(nil, step+": "+oneLine(err.Error()))
}

// cycle: acquire the lock (a session-bound lease), Write the resource's
// value, Add 1 to its counter (each with its own op_id, retried with the
// same op_id until answered), release. Steps run to their end even when
// the soak's window closes, so every outcome is known.
func (ld *soakLoad) cycle(ctx context.Context, c *client.Client, w, k, seq int) {
	r := &ld.res[w][k]
	bg := context.WithoutCancel(ctx)
	if r.held != nil { // a release that failed earlier
		if ld.release(bg, r.held) {
			r.held = nil
		} else {
			ld.fail("release (again)", fmt.Errorf("lock %d/%d still held", w, k))
			return
		}
	}
	start := time.Now()
	actx, cancel := context.WithTimeout(bg, soakOpTimeout)
	l, err := c.Acquire(actx, fmt.Sprintf("soak/lock/%d/%d", w, k), client.Owner("soak"))
	cancel()
	if err != nil {
		ld.fail("acquire", err)
		return
	}
	ok := true
	val := fmt.Sprintf("w%d-s%d", w, seq)
	if err := ld.retry(bg, val+"-write", func(ctx context.Context, opID string) error {
		_, err := c.Write(ctx, fmt.Sprintf("soak/value/%d/%d", w, k), l.Token(), []byte(val), client.OpID(opID))
		return err
	}); err != nil {
		r.pending = append(r.pending, val)
		ld.fail("write", err)
		ok = false
	} else {
		r.written, r.pending = val, nil
	}
	if ok {
		if err := ld.retry(bg, val+"-add", func(ctx context.Context, opID string) error {
			_, err := c.Add(ctx, fmt.Sprintf("soak/count/%d/%d", w, k), l.Token(), 1, client.OpID(opID))
			return err
		}); err != nil {
			r.addUnknown++
			ld.fail("add", err)
			ok = false
		} else {
			r.addAcked++
		}
	}
	if !ld.release(bg, l) {
		r.held = l
		if ok {
			ld.fail("release", fmt.Errorf("lock %d/%d", w, k))
		}
		return
	}
	if !ok {
		return
	}
	end := time.Now()
	ld.cycles.Add(1)
	ld.mu.Lock()
	ld.lats = append(ld.lats, soakLat{at: end.Sub(ld.t0), d: end.Sub(start)})
	ld.mu.Unlock()
}

// retry calls op with one op_id until it is answered (nil, or a refusal
// that a resend cannot change) or soakOpTimeout passes: the op_id makes the
// resends safe (applied once).
func (ld *soakLoad) retry(ctx context.Context, opID string, op func(ctx context.Context, opID string) error) error {
	ctx, cancel := context.WithTimeout(ctx, soakOpTimeout)
	defer cancel()
	for {
		err := op(ctx, opID)
		if err == nil || final(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// final: a refusal the server decided (resending cannot change it).
func final(err error) bool {
	var stale *fence.StaleTokenError
	return errors.As(err, &stale)
}

// release releases l, retrying for soakOpTimeout; a lease that ended by
// itself (its session expired during a failover) counts as released.
func (ld *soakLoad) release(ctx context.Context, l *client.Lease) bool {
	ctx, cancel := context.WithTimeout(ctx, soakOpTimeout)
	defer cancel()
	for {
		err := l.Release(ctx)
		if err == nil || l.Err() != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// since returns the latencies of the cycles that ended in [from, to).
func (ld *soakLoad) since(from, to time.Duration) []time.Duration {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	var out []time.Duration
	for i := len(ld.lats) - 1; i >= 0; i-- {
		x := ld.lats[i]
		if x.at < from {
			break
		}
		if x.at < to {
			out = append(out, x.d)
		}
	}
	return out
}

// windowP99 is the cycle p99 of the first and of the last window of the
// load.
func (ld *soakLoad) windowP99(window time.Duration) (first, last time.Duration) {
	ld.mu.Lock()
	var a, b []time.Duration
	end := time.Duration(0)
	if n := len(ld.lats); n > 0 {
		end = ld.lats[n-1].at
	}
	for _, x := range ld.lats {
		if x.at < window {
			a = append(a, x.d)
		}
		if x.at >= end-window {
			b = append(b, x.d)
		}
	}
	ld.mu.Unlock()
	sortDurations(a)
	sortDurations(b)
	return percentile(a, 0.99), percentile(b, 0.99)
}

// verify reads every resource through a fresh client and compares it with
// what was acknowledged.
func (ld *soakLoad) verify(ctx context.Context, res *SoakResult) error {
	var urls []string
	for _, a := range ld.cl.addrs() {
		urls = append(urls, "http://"+a)
	}
	c, err := client.New(strings.Join(urls, ","), client.WithoutSession())
	if err != nil {
		return err
	}
	defer c.Close()
	lost := func(format string, args ...any) {
		res.Lost++
		if len(res.LostExample) < 10 {
			res.LostExample = append(res.LostExample, fmt.Sprintf(format, args...))
		}
	}
	for w := range ld.res {
		for k := range ld.res[w] {
			r := &ld.res[w][k]
			res.Ambiguous += int(r.addUnknown) + len(r.pending)
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			v, err := c.Read(rctx, fmt.Sprintf("soak/value/%d/%d", w, k))
			if err == nil {
				res.Resources++
				got := string(v.Value)
				okv := got == r.written
				for _, p := range r.pending {
					okv = okv || got == p
				}
				if !okv {
					lost("soak/value/%d/%d = %q, last acknowledged %q (unanswered after it: %q)", w, k, got, r.written, r.pending)
				}
			}
			cv, err2 := c.Read(rctx, fmt.Sprintf("soak/count/%d/%d", w, k))
			cancel()
			if err != nil {
				return err
			}
			if err2 != nil {
				return err2
			}
			res.Resources++
			got := int64(0)
			if len(cv.Value) > 0 {
				if got, err = strconv.ParseInt(string(cv.Value), 10, 64); err != nil {
					return fmt.Errorf("soak/count/%d/%d: value %q: %w", w, k, cv.Value, err)
				}
			}
			if got < r.addAcked || got > r.addAcked+r.addUnknown {
				lost("soak/count/%d/%d = %d, acknowledged adds %d (+%d unanswered)", w, k, got, r.addAcked, r.addUnknown)
			}
		}
	}
	return nil
}
