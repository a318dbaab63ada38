package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/guardtest"
	"github.com/fenceworks/fence/guard/sqlite"
	_ "modernc.org/sqlite"
)

// testDSN is the recommended way to open a guarded SQLite database, with a
// longer busy timeout for the 32-writer history test on a shared machine.
func testDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

// openTestDB opens a fresh database file in t.TempDir.
func openTestDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", testDSN(filepath.Join(t.TempDir(), "guard.db")))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	for _, stmt := range []string{
		`CREATE TABLE data (resource TEXT PRIMARY KEY, value INTEGER NOT NULL, seq INTEGER NOT NULL)`,
		`CREATE TABLE stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL, fence_token INTEGER NOT NULL DEFAULT 0)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func TestConformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, o guardtest.Options) guardtest.Store {
		db := openTestDB(t)
		g, err := sqlite.New(sqlite.Options{Table: "t_guard", OpsTable: "main.t_ops", PruneEvery: o.PruneEvery,
			KeySet: o.Keys.KeySet, KeySource: o.Keys.KeySource, LockFor: o.Keys.LockFor, AllowUnsigned: o.Keys.AllowUnsigned})
		if err != nil {
			t.Fatal(err)
		}
		s := &store{db: db, g: g}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// store adapts a sqlite.Guard to guardtest.Store.
type store struct {
	db *sql.DB
	g  *sqlite.Guard
}

func (s *store) Migrate(ctx context.Context) error { return s.g.Migrate(ctx, s.db) }

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *store) Check(ctx context.Context, resource string, token fence.Token) error {
	return inTx(ctx, s.db, func(tx *sql.Tx) error { return s.g.Check(ctx, tx, resource, token) })
}

func (s *store) CheckSigned(ctx context.Context, resource string, token fence.SignedToken) error {
	return inTx(ctx, s.db, func(tx *sql.Tx) error { return s.g.CheckSigned(ctx, tx, resource, token) })
}

func write(ctx context.Context, tx *sql.Tx, resource string, value int64) (seq int64, err error) {
	err = tx.QueryRowContext(ctx, `INSERT INTO data AS d (resource, value, seq) VALUES (?1, ?2, 1)
ON CONFLICT (resource) DO UPDATE SET value = excluded.value, seq = d.seq + 1 RETURNING seq`, resource, value).Scan(&seq)
	return seq, err
}

func (s *store) GuardedWrite(ctx context.Context, resource string, token fence.Token, value int64) (seq int64, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := s.g.Check(ctx, tx, resource, token); err != nil {
			return err
		}
		seq, err = write(ctx, tx, resource, value)
		return err
	})
	return seq, err
}

func (s *store) GuardedWriteSigned(ctx context.Context, resource string, token fence.SignedToken, value int64) (seq int64, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := s.g.CheckSigned(ctx, tx, resource, token); err != nil {
			return err
		}
		seq, err = write(ctx, tx, resource, value)
		return err
	})
	return seq, err
}

func (s *store) LastToken(ctx context.Context, resource string) (fence.Token, bool, error) {
	var tok int64
	err := s.db.QueryRowContext(ctx, `SELECT last_token FROM t_guard WHERE resource = ?1`, resource).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return fence.Token(tok), err == nil, err
}

func (s *store) Data(ctx context.Context, resource string) (value, seq int64, found bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT value, seq FROM data WHERE resource = ?1`, resource).Scan(&value, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return value, seq, err == nil, err
}

func (s *store) Do(ctx context.Context, op guardtest.Op, fn func(write func(int64) error) ([]byte, error)) ([]byte, bool, error) {
	return s.g.Do(ctx, s.db, sqlite.Op(op), func(tx *sql.Tx) ([]byte, error) {
		return fn(func(v int64) error { _, err := write(ctx, tx, op.Resource, v); return err })
	})
}

func (s *store) SplitDo(ctx context.Context, op guardtest.Op, fn func(write func(int64) error) ([]byte, error)) ([]byte, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	sop := sqlite.Op(op)
	saved, replayed, err := s.g.CheckOp(ctx, tx, sop)
	if err != nil || replayed {
		return saved, replayed, err
	}
	result, err := fn(func(v int64) error { _, err := write(ctx, tx, op.Resource, v); return err })
	if err != nil {
		return nil, false, err
	}
	if err := s.g.SaveOp(ctx, tx, sop, result); err != nil {
		return nil, false, err
	}
	return result, false, tx.Commit()
}

func (s *store) MaxToken(ctx context.Context) (fence.Token, error) { return s.g.MaxToken(ctx, s.db) }

func (s *store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	return s.g.Prune(ctx, s.db, olderThan)
}

func (s *store) AgeOps(ctx context.Context, d time.Duration) error {
	_, err := s.db.ExecContext(ctx, `UPDATE t_ops SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', created_at, ?1)`,
		fmt.Sprintf("-%.3f seconds", d.Seconds()))
	return err
}

func (s *store) OpCount(ctx context.Context) (n int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM t_ops`).Scan(&n)
	return n, err
}

func (s *store) StockInsert(ctx context.Context, key string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO stock (sku, qty) VALUES (?1, 0)`, key)
	return err
}

func (s *store) StockWrite(ctx context.Context, key string, token fence.Token, qty int64) error {
	res, err := s.db.ExecContext(ctx, `UPDATE stock SET qty = ?1, fence_token = ?2 WHERE sku = ?3 AND fence_token <= ?2`, qty, int64(token), key)
	if err != nil {
		return err
	}
	return sqlite.Column{Table: "stock", Key: "sku", Token: "fence_token"}.CheckRows(ctx, s.db, res, key, token)
}

func (s *store) Stock(ctx context.Context, key string) (qty int64, token fence.Token, err error) {
	var tok int64
	err = s.db.QueryRowContext(ctx, `SELECT qty, fence_token FROM stock WHERE sku = ?1`, key).Scan(&qty, &tok)
	return qty, fence.Token(tok), err
}

func (s *store) Above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]sqlite.Stored, error) {
	return s.g.Above(ctx, s.db, resource, prefix, ceiling)
}

func (s *store) Lower(ctx context.Context, st sqlite.Stored, ceiling fence.Token) (bool, error) {
	return s.g.Lower(ctx, s.db, st, ceiling)
}
