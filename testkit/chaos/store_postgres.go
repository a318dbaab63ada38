package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/guard/postgres"
)

// The PostgreSQL store of a run: three tables named from the run's prefix,
// so that runs (and tests) sharing one database never see each other's
// rows:
//
//	<prefix>_stock (res text PRIMARY KEY, value bigint, version bigint, last_token bigint)
//	<prefix>_guard, <prefix>_ops: guard/postgres's guard and op tables
//
// SetupPostgres creates them with one row per resource (sku-0..sku-K-1, all
// zero), so that every UPDATE finds its row. A fenced write is Check and
// the UPDATE in one READ COMMITTED transaction; a fenced add is guard.Do
// (Check, op_id lookup, the UPDATE, the op record, commit). In the control
// run (Fenced false) both are the same UPDATE in a transaction without the
// guard. Every UPDATE sets version = version + 1 and last_token to the
// writer's token (fenced: the largest accepted, since an older one is
// refused; control: the token of the last writer, which may go down).

// runSeq numbers the runs of this process, for their table prefix.
var runSeq atomic.Uint64

// runPrefix names a run's tables: chaos_<pid>_<run>_<seed>. The run number
// keeps two runs of one process apart: the package's fault runs run side by
// side, and FENCE_CHAOS_SEED gives every one of them the same seed.
func runPrefix(seed uint64) string {
	return fmt.Sprintf("chaos_%d_%d_%d", os.Getpid(), runSeq.Add(1), seed%1_000_000)
}

var pgPrefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

func checkPrefix(prefix string) error {
	if !pgPrefixRE.MatchString(prefix) {
		return fmt.Errorf("chaos: PostgreSQL table prefix %q: want a lower-case identifier of at most 41 characters", prefix)
	}
	return nil
}

// pgGuard is the run's guard: with keys, a guard that verifies every
// token's proof against the cluster's key set before it compares (G9);
// without, one that compares any number it is handed.
func pgGuard(prefix string, keys *keyCache) (*postgres.Guard, error) {
	opts := postgres.Options{Table: prefix + "_guard", OpsTable: prefix + "_ops"}
	if keys != nil {
		opts.KeySource = keys.Source
	}
	return postgres.New(opts)
}

// SetupPostgres creates the run's tables (idempotent) with one zero row per
// resource. Run it once, before the workers start.
func SetupPostgres(ctx context.Context, dsn, prefix string, resources int) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	g, err := pgGuard(prefix, nil)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("chaos: connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := g.Migrate(ctx, conn); err != nil {
		return fmt.Errorf("chaos: creating the guard tables: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+prefix+`_stock (
		res text PRIMARY KEY, value bigint NOT NULL, version bigint NOT NULL, last_token bigint NOT NULL)`); err != nil {
		return fmt.Errorf("chaos: creating %s_stock: %w", prefix, err)
	}
	for k := 0; k < resources; k++ {
		if _, err := conn.Exec(ctx, `INSERT INTO `+prefix+`_stock (res, value, version, last_token) VALUES ($1, 0, 0, 0)
			ON CONFLICT (res) DO NOTHING`, pgResName(k)); err != nil {
			return fmt.Errorf("chaos: inserting %s: %w", pgResName(k), err)
		}
	}
	return nil
}

// DropPostgres drops the run's tables.
func DropPostgres(ctx context.Context, dsn, prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("chaos: connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `DROP TABLE IF EXISTS `+prefix+`_stock, `+prefix+`_ops, `+prefix+`_guard`)
	return err
}

type pgStore struct {
	pool    *pgxpool.Pool
	guard   *postgres.Guard
	keys    *keyCache // nil: the guard has no key set
	table   string
	control bool
}

// newPGStore opens the run's tables. control: plain UPDATEs without the
// guard; else every write goes through the guard, which verifies the
// signed token's proof with keys (nil: a guard without a key set).
func newPGStore(ctx context.Context, dsn, prefix string, control bool, keys *keyCache) (*pgStore, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	g, err := pgGuard(prefix, keys)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("chaos: PostgreSQL DSN: %w", err)
	}
	cfg.MaxConns = 4
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 3*time.Second {
		cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: PostgreSQL pool: %w", err)
	}
	return &pgStore{pool: pool, guard: g, keys: keys, table: prefix + "_stock", control: control}, nil
}

func (s *pgStore) Name() string     { return StorePostgres }
func (s *pgStore) Res(k int) string { return pgResName(k) }
func (s *pgStore) Fenced() bool     { return !s.control }
func (s *pgStore) Close()           { s.pool.Close() }

func (s *pgStore) Read(ctx context.Context, _ *client.Client, k int) (storeState, Outcome, error) {
	st, err := pgRead(ctx, s.pool, s.table, s.Res(k))
	if err != nil {
		return storeState{}, OutcomeUnknown, err
	}
	return st, OutcomeOK, nil
}

func pgRead(ctx context.Context, q postgres.Querier, table, res string) (storeState, error) {
	var v, ver, last int64
	err := q.QueryRow(ctx, `SELECT value, version, last_token FROM `+table+` WHERE res = $1`, res).Scan(&v, &ver, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return storeState{}, nil
	}
	return storeState{Value: v, Version: uint64(ver), LastToken: uint64(last)}, err
}

// errBeforeCommit marks an error that came before COMMIT was sent: the
// transaction never committed, so nothing was applied.
type errBeforeCommit struct{ err error }

func (e errBeforeCommit) Error() string { return e.err.Error() }
func (e errBeforeCommit) Unwrap() error { return e.err }

// update runs the UPDATE in tx and returns the row after it.
func (s *pgStore) update(ctx context.Context, tx pgx.Tx, res string, token fence.Token, set string, arg int64) (storeMut, error) {
	var v, ver, last int64
	err := tx.QueryRow(ctx, `UPDATE `+s.table+` SET value = `+set+`, version = version + 1, last_token = $2
		WHERE res = $3 RETURNING value, version, last_token`, arg, int64(token), res).Scan(&v, &ver, &last)
	if err != nil {
		return storeMut{}, fmt.Errorf("chaos: UPDATE %s %s: %w", s.table, res, err)
	}
	return storeMut{Value: v, Version: uint64(ver), LastToken: uint64(last)}, nil
}

// ensureKeys makes the guard's key set able to judge st (fetching it again
// after a restore or a rotation); a failed fetch is left to the guard,
// which then refuses the write (no key set, or an unknown key).
func (s *pgStore) ensureKeys(ctx context.Context, st fence.SignedToken) {
	if s.keys != nil && !s.control {
		_ = s.keys.Ensure(ctx, st)
	}
}

// txMutation is a write (or a control run's add) in one transaction: the
// guard's CheckSigned (unless control), the UPDATE, COMMIT. Any error
// before COMMIT is sent leaves nothing applied (fail — a forged token, or
// no key set, too; stale for a refused token); an error of COMMIT itself
// is unknown: the commit may have happened.
func (s *pgStore) txMutation(ctx context.Context, res string, st fence.SignedToken, set string, arg int64) (storeMut, Outcome, uint64, error) {
	token := st.Token
	s.ensureKeys(ctx, st)
	m, err := func() (storeMut, error) {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return storeMut{}, errBeforeCommit{err}
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			tx.Rollback(rctx) // no-op after Commit
		}()
		if !s.control {
			if err := s.guard.CheckSigned(ctx, tx, res, st); err != nil {
				return storeMut{}, errBeforeCommit{err}
			}
		}
		m, err := s.update(ctx, tx, res, token, set, arg)
		if err != nil {
			return storeMut{}, errBeforeCommit{err}
		}
		if err := tx.Commit(ctx); err != nil {
			return storeMut{}, fmt.Errorf("chaos: COMMIT: %w", err)
		}
		return m, nil
	}()
	var stale *fence.StaleTokenError
	var before errBeforeCommit
	switch {
	case err == nil:
		return m, OutcomeOK, 0, nil
	case errors.As(err, &stale):
		return m, OutcomeStale, uint64(stale.LastAccepted), err
	case errors.As(err, &before):
		return m, OutcomeFail, 0, err
	}
	return m, OutcomeUnknown, 0, err
}

func (s *pgStore) Write(ctx context.Context, _ *client.Client, k int, st fence.SignedToken, value int64, _ string) (storeMut, Outcome, uint64, error) {
	return s.txMutation(ctx, s.Res(k), st, "$1", value)
}

// Add: fenced, guard.Do with the op_id (a retry of an applied op_id
// replays its saved result); control, the plain UPDATE (no op_id: the
// worker does not retry it). Do's errors other than a stale token, an
// op_id conflict or an invalid argument are unknown: Do commits itself, so
// an error may come from its COMMIT.
func (s *pgStore) Add(ctx context.Context, _ *client.Client, k int, st fence.SignedToken, delta int64, opID string) (storeMut, Outcome, uint64, error) {
	res := s.Res(k)
	if s.control {
		return s.txMutation(ctx, res, st, "value + $1", delta)
	}
	token := st.Token
	s.ensureKeys(ctx, st)
	if s.keys != nil && s.keys.Source() == nil {
		// Do would refuse it before any SQL, with an error of no type
		// this package can name: say so here, definitely not applied.
		return storeMut{}, OutcomeFail, 0, errors.New("chaos: the guard has no key set yet (GET /v1/keys failed)")
	}
	op := postgres.Op{Resource: res, Token: token, SignedToken: st, ID: opID, Payload: fmt.Appendf(nil, "add %s %d %d", res, delta, token)}
	saved, replayed, err := s.guard.Do(ctx, s.pool, op, func(tx pgx.Tx) ([]byte, error) {
		m, err := s.update(ctx, tx, res, token, "value + $1", delta)
		if err != nil {
			return nil, err
		}
		return fmt.Appendf(nil, "%d %d %d", m.Value, m.Version, m.LastToken), nil
	})
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		var m storeMut
		if _, err := fmt.Sscanf(string(saved), "%d %d %d", &m.Value, &m.Version, &m.LastToken); err != nil {
			// Applied, but its result is unreadable: the outcome stands,
			// the results do not.
			return storeMut{}, OutcomeUnknown, 0, fmt.Errorf("chaos: saved result %q of op %s: %w", saved, opID, err)
		}
		m.Replayed = replayed
		return m, OutcomeOK, 0, nil
	case errors.As(err, &stale):
		return storeMut{}, OutcomeStale, uint64(stale.LastAccepted), err
	case errors.Is(err, fence.ErrOpConflict), errors.Is(err, fence.ErrInvalid), errors.Is(err, fence.ErrForgedToken):
		return storeMut{}, OutcomeFail, 0, err
	}
	return storeMut{}, OutcomeUnknown, 0, err
}
