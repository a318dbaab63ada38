package chaos

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// The forger is the threat of G9 during a fault run: a writer that sends
// the PostgreSQL guard tokens Fence never granted for the resource — a bug
// that passes the wrong variable, a token of another lock or of a staging
// cluster, or a hostile caller. It runs in the harness's process, beside
// the workers, for the whole run, through the same guard (guard/postgres,
// the run's guard table) with the same key set the workers' guards use
// (GET /v1/keys), and writes resources of its own (forge-0, forge-1,
// forge-max: rows of the run's stock table that no worker touches, so the
// other checkers never see its writes, accepted or not).
//
// Each round it takes real leases of locks forge-k and forge-j (j the
// other one; through the fault proxies, so faults reach it), writes
// forge-k with its own signed token (ForgeHonest: must be accepted), then
// sends forge-k each forgery whose number is at or above what the resource
// stores (so that a guard that only compares accepts it):
//
//   - ForgeOtherLock: the real proof of forge-j (token Tj, granted after
//     forge-k's, so above it);
//   - ForgeTampered: forge-k's real proof with the number changed to Tj;
//   - ForgeOwnKey: a proof of (cluster, forge-k, Tj) signed by a key of the
//     forger's own, under the cluster's id;
//   - ForgeForeign: a proof of (forge-k, Tj) by another cluster (fence.Sign
//     with a foreign key and cluster id);
//
// and forge-max the made-up 2^53-1 with no proof (ForgeHuge). Around each
// write it reads the resource's stored tokens (the guard row's last token,
// the data row's last token and version): checkForgeries counts forgeries
// accepted and refused forgeries that moved them.
//
// With keys nil (the control run) the guard has no key set: every forgery
// is compared as a number and accepted, which the control run must show.

// The kinds of token the forger sends.
const (
	ForgeHonest    = "honest"          // the lease's own signed token: must be accepted
	ForgeHuge      = "huge-unsigned"   // 2^53-1 with no proof
	ForgeOwnKey    = "own-key"         // a proof signed by the forger's own key
	ForgeTampered  = "tampered"        // a real proof with the token number changed
	ForgeOtherLock = "other-lock"      // a real proof for another lock
	ForgeForeign   = "foreign-cluster" // a proof of another cluster
)

// ForgeKinds are the forgeries (every kind but ForgeHonest).
var ForgeKinds = []string{ForgeHuge, ForgeOwnKey, ForgeTampered, ForgeOtherLock, ForgeForeign}

// forgerWorker is the forger's worker number in the history.
const forgerWorker = -2

// Stored is a forger resource as stored: the guard row's last accepted
// token and the data row's last token and version.
type Stored struct {
	Guard   uint64 `json:"guard"`
	Token   uint64 `json:"token"`
	Version uint64 `json:"ver"`
}

func forgeRes(k int) string { return fmt.Sprintf("forge-%d", k) }

const forgeMax = "forge-max"

// ForgerConfig is the forger of one run.
type ForgerConfig struct {
	Server        string          // the nodes' URLs (through the proxies), comma-separated
	ClientOptions []client.Option // TLS and the bearer token
	PostgresDSN   string
	PGPrefix      string
	// Keys is the guard's key set; nil: a guard without keys (control).
	Keys    *keyCache
	History string // its JSONL history (history-forger.jsonl)
	Seed    uint64
}

type forger struct {
	cfg     ForgerConfig
	rng     *rand.Rand
	rec     *Recorder
	n       int
	st      *pgStore
	cl      *client.Client
	ownKey  ed25519.PrivateKey // a key of the forger's own
	foreign ed25519.PrivateKey // the key of "another cluster"
}

// RunForger forges at the guard until ctx ends. Its errors are the
// harness's (no PostgreSQL, no history file); a refused or failed write is
// recorded, not returned.
func RunForger(ctx context.Context, cfg ForgerConfig) error {
	f, err := newForger(ctx, cfg)
	if err != nil {
		return err
	}
	defer f.close()
	for ctx.Err() == nil {
		if err := f.round(ctx); err != nil {
			return err
		}
		sleepCtx(ctx, time.Duration(20+f.rng.IntN(60))*time.Millisecond)
	}
	return nil
}

// newForger opens the forger's history, store and client and makes its
// resources' rows.
func newForger(ctx context.Context, cfg ForgerConfig) (f *forger, err error) {
	rec, err := NewRecorder(cfg.History)
	if err != nil {
		return nil, err
	}
	f = &forger{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xf0f0)), rec: rec}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.st, err = newPGStore(ctx, cfg.PostgresDSN, cfg.PGPrefix, false, cfg.Keys); err != nil {
		return nil, err
	}
	for _, res := range []string{forgeRes(0), forgeRes(1), forgeMax} {
		if _, err := f.st.pool.Exec(ctx, `INSERT INTO `+f.st.table+` (res, value, version, last_token) VALUES ($1, 0, 0, 0)
			ON CONFLICT (res) DO NOTHING`, res); err != nil {
			return nil, fmt.Errorf("chaos forger: inserting %s: %w", res, err)
		}
	}
	if f.cl, err = client.New(cfg.Server, append(append([]client.Option(nil), cfg.ClientOptions...),
		client.WithoutSession(), client.WithAttemptTimeout(workerAttempt), client.WithBackoff(20*time.Millisecond, 250*time.Millisecond))...); err != nil {
		return nil, err
	}
	seedKey := func(salt uint64) ed25519.PrivateKey {
		b := make([]byte, ed25519.SeedSize)
		binary.BigEndian.PutUint64(b, cfg.Seed)
		binary.BigEndian.PutUint64(b[8:], salt)
		return ed25519.NewKeyFromSeed(b)
	}
	f.ownKey, f.foreign = seedKey(1), seedKey(2)
	return f, nil
}

func (f *forger) close() {
	if f.cl != nil {
		closeBounded(f.cl)
	}
	if f.st != nil {
		f.st.Close()
	}
	f.rec.Close()
}

// lease acquires lock name for a short while; nil when it could not.
func (f *forger) lease(ctx context.Context, name string) *client.Lease {
	actx, cancel := context.WithTimeout(ctx, workerOpTimeout)
	defer cancel()
	l, err := f.cl.Acquire(actx, name, client.TTL(2*time.Second), client.Wait(time.Second), client.Owner("forger"))
	if err != nil {
		return nil
	}
	return l
}

func (f *forger) release(l *client.Lease) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), workerOpTimeout)
	defer cancel()
	_ = l.Release(ctx)
}

// round is one set of writes (see the type's comment). It returns only
// recorder errors.
func (f *forger) round(ctx context.Context) error {
	k := f.rng.IntN(2)
	j := 1 - k
	lk := f.lease(ctx, forgeRes(k))
	var lj *client.Lease
	if lk != nil {
		lj = f.lease(ctx, forgeRes(j))
	}
	defer func() { f.release(lj); f.release(lk) }()
	if lk != nil && ctx.Err() == nil {
		mine := lk.SignedToken()
		res := forgeRes(k)
		if err := f.write(ctx, ForgeHonest, res, mine); err != nil {
			return err
		}
		// The number of the forgeries: at or above what res stores
		// (its honest token), so that a guard that only compares
		// accepts them.
		num := mine.Token + 1
		if lj != nil {
			other := lj.SignedToken()
			num = other.Token
			if err := f.write(ctx, ForgeOtherLock, res, other); err != nil {
				return err
			}
		}
		tampered := mine
		tampered.Token = num
		clusterID := mine.ClusterID
		if clusterID == "" {
			clusterID = "unsigned-grants"
		}
		for _, w := range []struct {
			kind string
			st   fence.SignedToken
		}{
			{ForgeTampered, tampered},
			{ForgeOwnKey, fence.Sign(f.ownKey, clusterID, res, num)},
			{ForgeForeign, fence.Sign(f.foreign, "foreign-cluster", res, num)},
		} {
			if ctx.Err() != nil {
				return nil
			}
			if err := f.write(ctx, w.kind, res, w.st); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return f.write(ctx, ForgeHuge, forgeMax, fence.SignedToken{Token: fence.MaxTokenJSONInt})
}

// readStored reads res's stored tokens.
func (f *forger) readStored(ctx context.Context, res string) (*Stored, error) {
	var guard, tok, ver int64
	err := f.st.pool.QueryRow(ctx, `SELECT COALESCE((SELECT last_token FROM `+f.cfg.PGPrefix+`_guard WHERE resource = $1), 0),
		last_token, version FROM `+f.st.table+` WHERE res = $1`, res).Scan(&guard, &tok, &ver)
	if err != nil {
		return nil, fmt.Errorf("chaos forger: reading %s: %w", res, err)
	}
	return &Stored{Guard: uint64(guard), Token: uint64(tok), Version: uint64(ver)}, nil
}

// noKeySet is the text of the guards' ErrNoKeySet (guard/internal/proof,
// not importable here).
const noKeySet = "the key source returned no key set"

// write sends st to res through the guard (CheckSigned and the UPDATE in
// one transaction, as a worker's write) and records it with the stored
// tokens around it. A write whose before-read fails is not sent.
func (f *forger) write(ctx context.Context, kind, res string, st fence.SignedToken) error {
	rctx, cancel := context.WithTimeout(ctx, workerOpTimeout)
	defer cancel()
	before, err := f.readStored(rctx, res)
	if err != nil {
		return nil
	}
	op := Op{Worker: forgerWorker, Kind: KindForge, Store: StorePostgres, Res: res, Fenced: true,
		Token: uint64(st.Token), Forge: kind, Call: nowNano(), Attempts: 1, Before: before}
	m, out, last, werr := f.st.txMutation(rctx, res, st, "value + $1", 0)
	if out != OutcomeOK && (errors.Is(werr, context.Canceled) || errors.Is(werr, context.DeadlineExceeded)) {
		// Cut short (the run's end, a timeout): the guard judged
		// nothing the checker can read.
		out = OutcomeUnknown
	}
	if out != OutcomeOK && strings.Contains(errString(werr), noKeySet) {
		// The harness's key cache had no set yet (its first fetch met a
		// killed server): the guard failed closed without judging the
		// token, as documented (guard: ErrNoKeySet). Not a verdict on
		// the token: a clean-clone run's forger counted its own token
		// "refused" so.
		out = OutcomeUnknown
	}
	op.Out, op.Err, op.Reason = out, errString(werr), string(fence.ReasonOf(werr))
	if out != OutcomeUnknown {
		op.Return = nowNano()
	}
	switch out {
	case OutcomeOK:
		op.Version, op.LastToken = m.Version, m.LastToken
	case OutcomeStale:
		op.LastToken = last
	}
	// Read again on a fresh context: the write's may be spent.
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), workerOpTimeout)
	op.After, err = f.readStored(actx, res)
	acancel()
	if err != nil {
		op.Err += "; " + err.Error()
	}
	f.n++
	op.N = f.n
	if err := f.rec.Record(op); err != nil {
		return fmt.Errorf("chaos forger: recording: %w", err)
	}
	return nil
}

var errNoForger = errors.New("chaos: the forger recorded no write (the forgery checker had nothing to judge)")
