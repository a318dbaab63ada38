package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard/internal/suite"
	"github.com/fenceworks/fence/guard/httpguard/pgstore"
	"github.com/fenceworks/fence/guard/internal/guardtest"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func testPool(t *testing.T) *pgxpool.Pool {
	dsn := os.Getenv("FENCE_TEST_POSTGRES")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		guardtest.Unavailable(t, "PostgreSQL at %s (FENCE_TEST_POSTGRES): %v", dsn, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestPostgresStore(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := "hg_" + hex.EncodeToString(b)
	guard, err := postgres.New(postgres.Options{Table: p + "_guard", OpsTable: p + "_ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	data := p + "_data"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+data+` (resource text PRIMARY KEY, value text NOT NULL, seq bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %s_guard, %s_ops, %s`, p, p, data)); err != nil {
			t.Errorf("dropping test tables: %v", err)
		}
	})
	suite.Run(t, suite.Backend{
		Store: &pgstore.Store{DB: pool, Guard: guard},
		Write: func(r *http.Request, resource, value string) (seq int64, err error) {
			tx, ok := pgstore.Tx(r.Context())
			if !ok {
				return 0, errors.New("no guard transaction in the request context")
			}
			err = tx.QueryRow(r.Context(), `INSERT INTO `+data+` (resource, value, seq) VALUES ($1, $2, 1)
				ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value, seq = `+data+`.seq + 1 RETURNING seq`,
				resource, value).Scan(&seq)
			return seq, err
		},
		Read: func(resource string) (value string, seq int64, err error) {
			err = pool.QueryRow(ctx, `SELECT value, seq FROM `+data+` WHERE resource = $1`, resource).Scan(&value, &seq)
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
			return value, seq, err
		},
		LastToken: func(resource string) (fence.Token, error) {
			var last int64
			err := pool.QueryRow(ctx, `SELECT last_token FROM `+p+`_guard WHERE resource = $1`, resource).Scan(&last)
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
			return fence.Token(last), err
		},
	})
}
