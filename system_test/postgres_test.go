//go:build e2e

package system_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fenceworks/fence/testkit/testutil"
)

// postgresDSN is testutil.PostgresDSN: skipped loudly without PostgreSQL,
// failed under CI.
func postgresDSN(t testing.TB) string { return testutil.PostgresDSN(t) }

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
