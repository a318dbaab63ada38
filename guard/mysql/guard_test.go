package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
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
	"github.com/fenceworks/fence/guard/mysql"
	driver "github.com/go-sql-driver/mysql"
)

const defaultDSN = "root@tcp(127.0.0.1:3306)/test"

// testDSN is FENCE_TEST_MYSQL or the local MariaDB.
func testDSN() string {
	if dsn := os.Getenv("FENCE_TEST_MYSQL"); dsn != "" {
		return dsn
	}
	return defaultDSN
}

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("CI") != "true" {
		if err := ping(testDSN()); err != nil {
			// Examples cannot skip: leave them out. Tests skip loudly.
			fmt.Fprintf(os.Stderr, "!!! MySQL/MariaDB at %s does not answer (%v): skipping guard/mysql tests and examples (CI=true makes this fail)\n", testDSN(), err)
			_ = flag.Set("test.run", "^Test")
		}
	}
	code := m.Run()
	for _, db := range dbs {
		db.Close()
	}
	os.Exit(code)
}

func ping(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

var (
	dbsMu sync.Mutex
	dbs   = map[string]*sql.DB{}
)

// testDBWith returns a shared pool to the test database opened with extra
// driver parameters (e.g. "clientFoundRows=true"), or skips loudly (fails
// under CI=true) when it does not answer.
func testDBWith(t testing.TB, params string) *sql.DB {
	t.Helper()
	dsn := testDSN()
	if params != "" {
		sep := "?"
		if cfg, err := driver.ParseDSN(dsn); err == nil && len(cfg.Params) > 0 || containsQuery(dsn) {
			sep = "&"
		}
		dsn += sep + params
	}
	dbsMu.Lock()
	defer dbsMu.Unlock()
	if db, ok := dbs[dsn]; ok {
		return db
	}
	db, err := sql.Open("mysql", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		guardtest.Unavailable(t, "MySQL/MariaDB at %s (FENCE_TEST_MYSQL): %v", testDSN(), err)
	}
	db.SetMaxOpenConns(40)
	db.SetMaxIdleConns(40)
	dbs[dsn] = db
	return db
}

func containsQuery(dsn string) bool {
	for i := len(dsn) - 1; i >= 0 && dsn[i] != '/'; i-- {
		if dsn[i] == '?' {
			return true
		}
	}
	return false
}

func testDB(t testing.TB) *sql.DB { return testDBWith(t, "") }

// testTables names a fresh set of tables for one test and drops them after.
type testTables struct{ guard, ops, data, stock string }

func newTestTables(t testing.TB, db *sql.DB) testTables {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := "fgt_" + hex.EncodeToString(b)
	tt := testTables{guard: p + "_guard", ops: p + "_ops", data: p + "_data", stock: p + "_stock"}
	ctx := context.Background()
	for _, stmt := range []string{
		fmt.Sprintf("CREATE TABLE %s (resource VARBINARY(512) PRIMARY KEY, value BIGINT NOT NULL, seq BIGINT NOT NULL) ENGINE=InnoDB", tt.data),
		fmt.Sprintf("CREATE TABLE %s (sku VARBINARY(64) PRIMARY KEY, qty BIGINT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB", tt.stock),
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, err := db.ExecContext(context.Background(), fmt.Sprintf(`DROP TABLE IF EXISTS %s, %s, %s, %s`, tt.guard, tt.ops, tt.data, tt.stock))
		if err != nil {
			t.Errorf("dropping test tables: %v", err)
		}
	})
	return tt
}

// TestConformance runs the shared suite with the guarded transactions at
// REPEATABLE READ (InnoDB's default), READ COMMITTED and SERIALIZABLE. Do
// always runs its own at READ COMMITTED.
func TestConformance(t *testing.T) {
	testDB(t) // skips (or fails under CI) once, not per subtest
	for _, iso := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelReadCommitted, sql.LevelSerializable} {
		t.Run(iso.String(), func(t *testing.T) {
			guardtest.Run(t, func(t *testing.T, o guardtest.Options) guardtest.Store {
				return newStoreOpts(t, testDB(t), iso, o)
			})
		})
	}
}

func newStore(t testing.TB, db *sql.DB, iso sql.IsolationLevel, pruneEvery int) *store {
	t.Helper()
	return newStoreOpts(t, db, iso, guardtest.Options{PruneEvery: pruneEvery})
}

func newStoreOpts(t testing.TB, db *sql.DB, iso sql.IsolationLevel, o guardtest.Options) *store {
	t.Helper()
	tt := newTestTables(t, db)
	g, err := mysql.New(mysql.Options{Table: tt.guard, OpsTable: tt.ops, PruneEvery: o.PruneEvery,
		KeySet: o.Keys.KeySet, KeySource: o.Keys.KeySource, LockFor: o.Keys.LockFor, AllowUnsigned: o.Keys.AllowUnsigned})
	if err != nil {
		t.Fatal(err)
	}
	s := &store{db: db, g: g, tt: tt, iso: iso}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// store adapts a mysql.Guard to guardtest.Store.
type store struct {
	db  *sql.DB
	g   *mysql.Guard
	tt  testTables
	iso sql.IsolationLevel
}

func (s *store) Migrate(ctx context.Context) error { return s.g.Migrate(ctx, s.db) }

func (s *store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: s.iso})
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
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.g.Check(ctx, tx, resource, token) })
}

func (s *store) CheckSigned(ctx context.Context, resource string, token fence.SignedToken) error {
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.g.CheckSigned(ctx, tx, resource, token) })
}

// write upserts the data row in tx and returns its seq (1 for a new row).
func (s *store) write(ctx context.Context, tx *sql.Tx, resource string, value int64) (seq int64, err error) {
	_, err = tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (resource, value, seq) VALUES (?, ?, 1)
ON DUPLICATE KEY UPDATE value = ?, seq = seq + 1`, s.tt.data), resource, value, value)
	if err != nil {
		return 0, err
	}
	err = tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT seq FROM %s WHERE resource = ? FOR UPDATE`, s.tt.data), resource).Scan(&seq)
	return seq, err
}

func (s *store) GuardedWrite(ctx context.Context, resource string, token fence.Token, value int64) (seq int64, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.g.Check(ctx, tx, resource, token); err != nil {
			return err
		}
		seq, err = s.write(ctx, tx, resource, value)
		return err
	})
	return seq, err
}

func (s *store) GuardedWriteSigned(ctx context.Context, resource string, token fence.SignedToken, value int64) (seq int64, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
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
	err := s.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = ?`, s.tt.guard), resource).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return fence.Token(tok), err == nil, err
}

func (s *store) Data(ctx context.Context, resource string) (value, seq int64, found bool, err error) {
	err = s.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT value, seq FROM %s WHERE resource = ?`, s.tt.data), resource).Scan(&value, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return value, seq, err == nil, err
}

func (s *store) Do(ctx context.Context, op guardtest.Op, fn func(write func(int64) error) ([]byte, error)) ([]byte, bool, error) {
	return s.g.Do(ctx, s.db, mysql.Op(op), func(tx *sql.Tx) ([]byte, error) {
		return fn(func(v int64) error { _, err := s.write(ctx, tx, op.Resource, v); return err })
	})
}

func (s *store) SplitDo(ctx context.Context, op guardtest.Op, fn func(write func(int64) error) ([]byte, error)) ([]byte, bool, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: s.iso})
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	mop := mysql.Op(op)
	saved, replayed, err := s.g.CheckOp(ctx, tx, mop)
	if err != nil || replayed {
		return saved, replayed, err
	}
	result, err := fn(func(v int64) error { _, err := s.write(ctx, tx, op.Resource, v); return err })
	if err != nil {
		return nil, false, err
	}
	if err := s.g.SaveOp(ctx, tx, mop, result); err != nil {
		return nil, false, err
	}
	return result, false, tx.Commit()
}

func (s *store) MaxToken(ctx context.Context) (fence.Token, error) { return s.g.MaxToken(ctx, s.db) }

func (s *store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	return s.g.Prune(ctx, s.db, olderThan)
}

func (s *store) AgeOps(ctx context.Context, d time.Duration) error {
	_, err := s.db.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET created_at = created_at - INTERVAL ? MICROSECOND`, s.tt.ops), d.Microseconds())
	return err
}

func (s *store) OpCount(ctx context.Context) (n int, err error) {
	err = s.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM %s`, s.tt.ops)).Scan(&n)
	return n, err
}

func (s *store) StockInsert(ctx context.Context, key string) error {
	_, err := s.db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (sku, qty) VALUES (?, 0)`, s.tt.stock), key)
	return err
}

func (s *store) StockWrite(ctx context.Context, key string, token fence.Token, qty int64) error {
	res, err := s.db.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET qty = ?, fence_token = ? WHERE sku = ? AND fence_token <= ?`, s.tt.stock), qty, int64(token), key, int64(token))
	if err != nil {
		return err
	}
	return mysql.Column{Table: s.tt.stock, Key: "sku", Token: "fence_token"}.CheckRows(ctx, s.db, res, key, token)
}

func (s *store) Stock(ctx context.Context, key string) (qty int64, token fence.Token, err error) {
	var tok int64
	err = s.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT qty, fence_token FROM %s WHERE sku = ?`, s.tt.stock), key).Scan(&qty, &tok)
	return qty, fence.Token(tok), err
}

func (s *store) Above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]mysql.Stored, error) {
	return s.g.Above(ctx, s.db, resource, prefix, ceiling)
}

func (s *store) Lower(ctx context.Context, st mysql.Stored, ceiling fence.Token) (bool, error) {
	return s.g.Lower(ctx, s.db, st, ceiling)
}
