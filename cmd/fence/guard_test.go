package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	mysqlguard "github.com/fenceworks/fence/guard/mysql"
	"github.com/fenceworks/fence/guard/postgres"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/fenceworks/fence/guard/sqlite"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func runGuard(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = guardCmd(&globals{server: defaultServer, timeout: 10 * time.Second, stdout: &out}, args, &out, &errb)
	return code, out.String(), errb.String()
}

// storeUnavailable skips loudly, or fails under CI=true.
func storeUnavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and a store is unavailable: "+format, args...)
	}
	t.Skipf("!!! SKIPPING — store unavailable (set CI=true to make this fail): "+format, args...)
}

func randName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func wantMaxToken(t *testing.T, want string, args ...string) {
	t.Helper()
	code, out, errs := runGuard(append([]string{"max-token"}, args...)...)
	if code != 0 || out != want+"\n" {
		t.Fatalf("max-token %v: exit %d, stdout %q, stderr %q; want %s", args, code, out, errs, want)
	}
	code, out, _ = runGuard(append([]string{"max-token", "--json"}, args...)...)
	var obj struct {
		MaxToken json.Number `json:"maxToken"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &obj) != nil || obj.MaxToken.String() != want {
		t.Fatalf("max-token --json %v: exit %d, %q", args, code, out)
	}
}

// wantEmpty: max-token on a store where nothing is found exits 1 and says
// so (stderr, and with --json the error object); --allow-empty prints 0.
func wantEmpty(t *testing.T, where string, args ...string) {
	t.Helper()
	code, out, errs := runGuard(append([]string{"max-token"}, args...)...)
	if code != 1 || out != "" || !strings.Contains(errs, "no tokens found in "+where) || !strings.Contains(errs, "wrong table or prefix?") {
		t.Fatalf("max-token %v on an empty store: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, 'no tokens found in %s ...: wrong table or prefix?'", args, code, out, errs, where)
	}
	code, out, _ = runGuard(append([]string{"max-token", "--json"}, args...)...)
	var obj struct {
		Error struct {
			Message string `json:"message"`
			Empty   bool   `json:"empty"`
			Where   string `json:"where"`
		} `json:"error"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &obj) != nil || !obj.Error.Empty || obj.Error.Where != where {
		t.Fatalf("max-token --json %v on an empty store: exit %d, %q; want exit 1 and an error with empty and where", args, code, out)
	}
	wantMaxToken(t, "0", append([]string{"--allow-empty"}, args...)...)
}

func TestGuardMaxTokenPostgres(t *testing.T) {
	dsn := os.Getenv("FENCE_TEST_POSTGRES")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		storeUnavailable(t, "PostgreSQL at %s (FENCE_TEST_POSTGRES): %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the DROP below (cleanups run last first); a defer would close it before
	table := "cli_" + randName()
	g, err := postgres.New(postgres.Options{Table: table + "_guard", OpsTable: table + "_ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"_guard, "+table+"_ops") })
	wantEmpty(t, `table "`+table+`_guard"`, "--postgres", dsn, "--table", table+"_guard")
	for _, tok := range []uint64{5, 77, 12} {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, "res-"+string(rune('a'+tok%26)), fenceToken(tok)) })
		if err != nil {
			t.Fatal(err)
		}
	}
	wantMaxToken(t, "77", "--postgres", dsn, "--table", table+"_guard")
	// The default table, when it is not the one the guards write, is empty
	// or missing: never a 0.
	if code, out, _ := runGuard("max-token", "--postgres", dsn, "--table", table+"_ops"); code != 1 || out != "" {
		t.Errorf("another table: exit %d, stdout %q; want exit 1 and nothing printed", code, out)
	}

	// A missing table and an unreachable server are errors (1), not 0.
	if code, _, _ := runGuard("max-token", "--postgres", dsn, "--table", table+"_nope"); code != 1 {
		t.Errorf("missing table: exit %d, want 1", code)
	}
	if code, _, errs := runGuard("max-token", "--postgres", "postgres://postgres@127.0.0.1:1/test", "--timeout", "5s"); code != 1 || errs == "" {
		t.Errorf("unreachable: exit %d %q, want 1", code, errs)
	}
}

func TestGuardMaxTokenRedis(t *testing.T) {
	addr := os.Getenv("FENCE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	opts := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		opts, _ = redis.ParseURL(addr)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		storeUnavailable(t, "Redis at %s (FENCE_TEST_REDIS): %v", addr, err)
	}
	prefix := "clitest." + randName()
	// The test Redis need not be durable: this test reads tokens back, it
	// does not rely on them surviving a restart.
	g, err := redisguard.New(rdb, redisguard.Options{Prefix: prefix, AcceptVolatile: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pattern, _ := redisguard.KeyPattern(prefix)
		for _, k := range rdb.Keys(ctx, pattern).Val() {
			rdb.Del(ctx, k)
		}
	})
	wantEmpty(t, `key prefix "`+prefix+`"`, "--redis", addr, "--redis-prefix", prefix)
	for _, tok := range []uint64{3, 91, 40} {
		if _, err := g.Set(ctx, "r"+fenceToken(tok).String(), fenceToken(tok), []byte("v"), "op"); err != nil {
			t.Fatal(err)
		}
	}
	wantMaxToken(t, "91", "--redis", addr, "--redis-prefix", prefix)
	// A mistyped prefix finds nothing: an error, not 0.
	wantEmpty(t, `key prefix "`+prefix+`x"`, "--redis", addr, "--redis-prefix", prefix+"x")
	if code, _, _ := runGuard("max-token", "--redis", "127.0.0.1:1", "--timeout", "5s"); code != 1 {
		t.Errorf("unreachable Redis: exit %d, want 1", code)
	}
	if code, _, _ := runGuard("max-token", "--redis", addr, "--redis-prefix", "bad*"); code != 2 {
		t.Errorf("bad prefix: exit %d, want 2", code)
	}
}

func TestGuardMaxTokenSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "guard db.sqlite")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, `table "fence_guard"`, "--sqlite", path)
	for _, tok := range []uint64{8, 55, 9} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := sqlite.Check(ctx, tx, "r"+fenceToken(tok).String(), fenceToken(tok)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	wantMaxToken(t, "55", "--sqlite", path)
	// The global --json, given before the command, applies to guard too.
	var out, errb strings.Builder
	if code := run([]string{"--json", "guard", "max-token", "--sqlite", path}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"maxToken":55`) {
		t.Errorf("fence --json guard max-token: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	missing := filepath.Join(t.TempDir(), "missing.db")
	if code, _, _ := runGuard("max-token", "--sqlite", missing); code != 1 {
		t.Errorf("missing file: exit %d, want 1", code)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("max-token created %s", missing)
	}
}

func TestGuardUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"max-token"},
		{"max-token", "--postgres", "x", "--sqlite", "y"},
		{"max-token", "--redis", "x", "--table", "t"},
		{"max-token", "--sqlite", "x", "--redis-prefix", "p"},
		{"max-token", "--sqlite", "x", "extra"},
		{"max-token", "--bogus"},
		{"max-token", "--sqlite", "x", "--table", "no such; table"},
	} {
		if code, _, errs := runGuard(args...); code != 2 || errs == "" {
			t.Errorf("guard %q: exit %d, stderr %q; want 2 with a message", args, code, errs)
		}
	}
	code, out, _ := runGuard("max-token", "--json", "--sqlite", "x", "--table", "bad table")
	if code != 2 || !strings.Contains(out, `"field":"table"`) {
		t.Errorf("--json invalid table: exit %d, %q", code, out)
	}
	if code, out, _ := runGuard("help"); code != 0 || !strings.Contains(out, "max-token") {
		t.Errorf("help: %d %q", code, out)
	}
}

func fenceToken(n uint64) fence.Token { return fence.Token(n) }

// mysqlTestDB opens the test MariaDB (FENCE_TEST_MYSQL, a driver DSN, or
// root@tcp(127.0.0.1:3306)/test) or skips loudly; it returns the DSN too.
func mysqlTestDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dsn := os.Getenv("FENCE_TEST_MYSQL")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		storeUnavailable(t, "MySQL/MariaDB at %s (FENCE_TEST_MYSQL): %v", dsn, err)
	}
	return db, dsn
}

func TestGuardMaxTokenMySQL(t *testing.T) {
	ctx := context.Background()
	db, dsn := mysqlTestDB(t)
	table := "cli_" + randName()
	g, err := mysqlguard.New(mysqlguard.Options{Table: table, OpsTable: table + "_ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_ops") })
	wantEmpty(t, `table "`+table+`"`, "--mysql", dsn, "--table", table)
	for _, tok := range []uint64{6, 66, 16} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Check(ctx, tx, "r"+fenceToken(tok).String(), fenceToken(tok)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	wantMaxToken(t, "66", "--mysql", dsn, "--table", table)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	wantMaxToken(t, "66", "--mysql", dsn+sep+"table="+table) // the DSN's table=
	if code, _, errs := runGuard("max-token", "--mysql", dsn+sep+"table="+table, "--table", table+"x"); code != 2 || !strings.Contains(errs, "table") {
		t.Errorf("--table and a different table=: exit %d %q, want 2 naming table", code, errs)
	}
	if code, out, _ := runGuard("max-token", "--mysql", dsn, "--table", table+"_nope"); code != 1 || out != "" {
		t.Errorf("missing table: exit %d %q, want 1", code, out)
	}
	if code, _, errs := runGuard("max-token", "--mysql", "root:s3cret@tcp(127.0.0.1:1)/test", "--timeout", "5s"); code != 1 || strings.Contains(errs, "s3cret") {
		t.Errorf("unreachable: exit %d %q, want 1 without the password", code, errs)
	}
}
