package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard/internal/suite"
	"github.com/fenceworks/fence/guard/httpguard/sqlitestore"
	"github.com/fenceworks/fence/guard/sqlite"
	_ "modernc.org/sqlite"
)

func TestSQLiteStore(t *testing.T) {
	ctx := context.Background()
	dsn := "file:" + filepath.Join(t.TempDir(), "svc.db") + "?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE data (resource TEXT PRIMARY KEY, value TEXT NOT NULL, seq INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	suite.Run(t, suite.Backend{
		Store: &sqlitestore.Store{DB: db},
		Write: func(r *http.Request, resource, value string) (seq int64, err error) {
			tx, ok := sqlitestore.Tx(r.Context())
			if !ok {
				return 0, errors.New("no guard transaction in the request context")
			}
			err = tx.QueryRowContext(r.Context(), `INSERT INTO data (resource, value, seq) VALUES (?1, ?2, 1)
				ON CONFLICT (resource) DO UPDATE SET value = excluded.value, seq = data.seq + 1 RETURNING seq`,
				resource, value).Scan(&seq)
			return seq, err
		},
		Read: func(resource string) (value string, seq int64, err error) {
			err = db.QueryRowContext(ctx, `SELECT value, seq FROM data WHERE resource = ?1`, resource).Scan(&value, &seq)
			if errors.Is(err, sql.ErrNoRows) {
				err = nil
			}
			return value, seq, err
		},
		LastToken: func(resource string) (fence.Token, error) {
			var last int64
			err := db.QueryRowContext(ctx, `SELECT last_token FROM fence_guard WHERE resource = ?1`, resource).Scan(&last)
			if errors.Is(err, sql.ErrNoRows) {
				err = nil
			}
			return fence.Token(last), err
		},
	})
}
