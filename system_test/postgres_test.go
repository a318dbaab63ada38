package system_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresDSN returns the DSN of a PostgreSQL that answers: FENCE_TEST_POSTGRES,
// else the local default. When none answers the test is skipped with a loud
// message — except under CI=true, where it fails.
func postgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("FENCE_TEST_POSTGRES")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test"
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
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip("SKIP !!! " + msg + " — this test did NOT run")
	}
	return dsn
}

// pgConn opens a connection closed at the end of the test.
func pgConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// tableNames returns fresh table names with a common random suffix; they are
// dropped at the end of the test.
func tableNames(t testing.TB, conn *pgx.Conn, prefixes ...string) []string {
	t.Helper()
	suffix := strings.ToLower(rand.Text()[:10])
	names := make([]string, len(prefixes))
	for i, p := range prefixes {
		names[i] = p + "_" + suffix
	}
	t.Cleanup(func() {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = pgx.Identifier{n}.Sanitize()
		}
		// One statement, so that references between the tables do not matter.
		if _, err := conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+strings.Join(quoted, ", ")); err != nil {
			t.Errorf("drop %v: %v", names, err)
		}
	})
	return names
}
