package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/guardtest"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const defaultDSN = "postgres://postgres@127.0.0.1:5432/test"

var (
	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("CI") != "true" {
		if err := ping(); err != nil {
			// Examples cannot skip: leave them out. Tests skip loudly.
			fmt.Fprintf(os.Stderr, "!!! PostgreSQL at %s does not answer (%v): skipping guard/postgres tests and examples (CI=true makes this fail)\n", testDSN(), err)
			_ = flag.Set("test.run", "^Test")
		}
	}
	code := m.Run()
	if pool != nil {
		pool.Close()
	}
	os.Exit(code)
}

func ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testDSN())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// testDSN is FENCE_TEST_POSTGRES or the local default.
func testDSN() string {
	if dsn := os.Getenv("FENCE_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return defaultDSN
}

// testPool returns the shared pool to the test PostgreSQL, or skips loudly
// (fails under CI=true) when it does not answer.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	poolOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(testDSN())
		if err != nil {
			poolErr = err
			return
		}
		cfg.MaxConns = 16
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			err = p.Ping(ctx)
		}
		if err != nil {
			if p != nil {
				p.Close()
			}
			poolErr = err
			return
		}
		pool = p
	})
	if poolErr != nil {
		guardtest.Unavailable(t, "PostgreSQL at %s (FENCE_TEST_POSTGRES): %v", testDSN(), poolErr)
	}
	return pool
}

// testTables names a fresh set of tables for one test and drops them after.
type testTables struct{ guard, ops, data, stock string }

func newTestTables(t testing.TB, db *pgxpool.Pool) testTables {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := "fgt_" + hex.EncodeToString(b)
	tt := testTables{guard: p + "_guard", ops: p + "_ops", data: p + "_data", stock: p + "_stock"}
	ctx := context.Background()
	for _, stmt := range []string{
		fmt.Sprintf(`CREATE TABLE %s (resource text PRIMARY KEY, value bigint NOT NULL, seq bigint NOT NULL)`, tt.data),
		fmt.Sprintf(`CREATE TABLE %s (sku text PRIMARY KEY, qty bigint NOT NULL, fence_token bigint NOT NULL DEFAULT 0)`, tt.stock),
	} {
		if _, err := db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, err := db.Exec(context.Background(), fmt.Sprintf(`DROP TABLE IF EXISTS %s, %s, %s, %s`, tt.guard, tt.ops, tt.data, tt.stock))
		if err != nil {
			t.Errorf("dropping test tables: %v", err)
		}
	})
	return tt
}

func TestConformance(t *testing.T) {
	testPool(t) // skips (or fails under CI) once, not per subtest
	guardtest.Run(t, func(t *testing.T, o guardtest.Options) guardtest.Store {
		db := testPool(t)
		tt := newTestTables(t, db)
		g, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops, PruneEvery: o.PruneEvery,
			KeySet: o.Keys.KeySet, KeySource: o.Keys.KeySource, LockFor: o.Keys.LockFor, AllowUnsigned: o.Keys.AllowUnsigned})
		if err != nil {
			t.Fatal(err)
		}
		s := &store{db: db, g: g, tt: tt}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// store adapts a postgres.Guard to guardtest.Store.
type store struct {
	db *pgxpool.Pool
	g  *postgres.Guard
	tt testTables
}

func (s *store) Migrate(ctx context.Context) error { return s.g.Migrate(ctx, s.db) }

func (s *store) Check(ctx context.Context, resource string, token fence.Token) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error { return s.g.Check(ctx, tx, resource, token) })
}

func (s *store) CheckSigned(ctx context.Context, resource string, token fence.SignedToken) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error { return s.g.CheckSigned(ctx, tx, resource, token) })
}

func (s *store) write(ctx context.Context, tx pgx.Tx, resource string, value int64) (seq int64, err error) {
	err = tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %[1]s AS d (resource, value, seq) VALUES ($1, $2, 1)
ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, seq = d.seq + 1 RETURNING seq`, s.tt.data), resource, value).Scan(&seq)
	return seq, err
}

func (s *store) GuardedWrite(ctx context.Context, resource string, token fence.Token, value int64) (seq int64, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := s.g.Check(ctx, tx, resource, token); err != nil {
			return err
		}
		seq, err = s.write(ctx, tx, resource, value)
		return err
	})
	return seq, err
}

func (s *store) GuardedWriteSigned(ctx context.Context, resource string, token fence.SignedToken, value int64) (seq int64, err error) {
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := s.g.CheckSigned(ctx, tx, resource, token); err != nil {
			return err
		}
		seq, err = s.write(ctx, tx, resource, value)
		return err
	})
	return seq, err
}

func (s *store) LastToken(ctx context.Context, resource string) (fence.Token, bool, error) {
	var tok int64
	err := s.db.QueryRow(ctx, fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = $1`, s.tt.guard), resource).Scan(&tok)
	if err == pgx.ErrNoRows {
		return 0, false, nil
	}
	return fence.Token(tok), err == nil, err
}

func (s *store) Data(ctx context.Context, resource string) (value, seq int64, found bool, err error) {
	err = s.db.QueryRow(ctx, fmt.Sprintf(`SELECT value, seq FROM %s WHERE resource = $1`, s.tt.data), resource).Scan(&value, &seq)
	if err == pgx.ErrNoRows {
		return 0, 0, false, nil
	}
	return value, seq, err == nil, err
}

func (s *store) Do(ctx context.Context, op guardtest.Op, fn func(write func(int64) error) ([]byte, error)) ([]byte, bool, error) {
	return s.g.Do(ctx, s.db, postgres.Op(op), func(tx pgx.Tx) ([]byte, error) {
		return fn(func(v int64) error { _, err := s.write(ctx, tx, op.Resource, v); return err })
	})
}

func (s *store) SplitDo(ctx context.Context, op guardtest.Op, fn func(write func(int64) error) ([]byte, error)) ([]byte, bool, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback(ctx)
	pop := postgres.Op(op)
	saved, replayed, err := s.g.CheckOp(ctx, tx, pop)
	if err != nil || replayed {
		return saved, replayed, err
	}
	result, err := fn(func(v int64) error { _, err := s.write(ctx, tx, op.Resource, v); return err })
	if err != nil {
		return nil, false, err
	}
	if err := s.g.SaveOp(ctx, tx, pop, result); err != nil {
		return nil, false, err
	}
	return result, false, tx.Commit(ctx)
}

func (s *store) MaxToken(ctx context.Context) (fence.Token, error) { return s.g.MaxToken(ctx, s.db) }

func (s *store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	return s.g.Prune(ctx, s.db, olderThan)
}

func (s *store) AgeOps(ctx context.Context, d time.Duration) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET created_at = created_at - $1::float8 * interval '1 second'`, s.tt.ops), d.Seconds())
	return err
}

func (s *store) OpCount(ctx context.Context) (n int, err error) {
	err = s.db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s`, s.tt.ops)).Scan(&n)
	return n, err
}

func (s *store) StockInsert(ctx context.Context, key string) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (sku, qty) VALUES ($1, 0)`, s.tt.stock), key)
	return err
}

func (s *store) StockWrite(ctx context.Context, key string, token fence.Token, qty int64) error {
	tag, err := s.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET qty = $1, fence_token = $2 WHERE sku = $3 AND fence_token <= $2`, s.tt.stock), qty, int64(token), key)
	if err != nil {
		return err
	}
	return postgres.Column{Table: s.tt.stock, Key: "sku", Token: "fence_token"}.CheckRows(ctx, s.db, tag, key, token)
}

func (s *store) Stock(ctx context.Context, key string) (qty int64, token fence.Token, err error) {
	var tok int64
	err = s.db.QueryRow(ctx, fmt.Sprintf(`SELECT qty, fence_token FROM %s WHERE sku = $1`, s.tt.stock), key).Scan(&qty, &tok)
	return qty, fence.Token(tok), err
}

// TestRefusesWhatTextCannotHold: a NUL byte in the resource or op_id, or an
// op_id that is not UTF-8, is *fence.InvalidError naming the field — not an
// SQLSTATE 22021 that aborts the caller's transaction.
func TestRefusesWhatTextCannotHold(t *testing.T) {
	db := testPool(t)
	tt := newTestTables(t, db)
	g, err := postgres.New(postgres.Options{Table: tt.guard, OpsTable: tt.ops})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var inv *fence.InvalidError
	for _, res := range []string{"sku\x0042", "\x00sku"} {
		if err := g.Check(ctx, tx, res, 1); !errors.As(err, &inv) || inv.Field != "resource" {
			t.Fatalf("Check with a NUL in the resource %q = %v, want invalid resource", res, err)
		}
	}
	if err := g.Check(ctx, tx, "sku-42", 1); err != nil {
		t.Fatalf("the transaction is unusable after the refused check: %v", err)
	}
	for _, id := range []string{"op\x00", "\x00op", "op\xff"} {
		_, _, err := g.Do(ctx, db, postgres.Op{Resource: "sku-42", Token: 1, ID: id}, func(pgx.Tx) ([]byte, error) { return nil, nil })
		if !errors.As(err, &inv) || inv.Field != "op_id" {
			t.Errorf("Do with op_id %q = %v, want invalid op_id", id, err)
		}
	}
	if _, err := g.Prune(ctx, db, 0); err != nil {
		t.Errorf("Prune(0) = %v; 0 is a valid age (every record)", err)
	}
}

func (s *store) Above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]postgres.Stored, error) {
	return s.g.Above(ctx, s.db, resource, prefix, ceiling)
}

func (s *store) Lower(ctx context.Context, st postgres.Stored, ceiling fence.Token) (bool, error) {
	return s.g.Lower(ctx, s.db, st, ceiling)
}
