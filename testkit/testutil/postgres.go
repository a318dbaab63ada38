package testutil

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresDSN is the PostgreSQL the tests use when
// FENCE_TEST_POSTGRES is not set.
const DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresDSN returns the DSN of a PostgreSQL that answers:
// FENCE_TEST_POSTGRES, else DefaultPostgresDSN. When none answers the test
// is skipped with a loud message — except under CI, where it fails: CI
// must never pass by skipping.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("FENCE_TEST_POSTGRES")
	if dsn == "" {
		dsn = DefaultPostgresDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL at %s does not answer (%v); set FENCE_TEST_POSTGRES", dsn, err)
		if os.Getenv("CI") != "" {
			t.Fatal("CI: " + msg)
		}
		t.Skip(msg)
	}
	return dsn
}
