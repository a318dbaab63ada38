package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fenceworks/fence"
	mysqlguard "github.com/fenceworks/fence/guard/mysql"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/fenceworks/fence/guard/sqlite"
)

// pgPoisoned makes a guard table for one test (without a key set, as
// before issue 22) holding the tokens of want.
func pgPoisoned(t *testing.T, tokens map[string]fence.Token) (dsn, table string, g *postgres.Guard, conn *pgx.Conn) {
	t.Helper()
	dsn = os.Getenv("FENCE_TEST_POSTGRES")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		storeUnavailable(t, "PostgreSQL at %s (FENCE_TEST_POSTGRES): %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	table = "cli_" + randName()
	if g, err = postgres.New(postgres.Options{Table: table + "_guard", OpsTable: table + "_ops"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"_guard, "+table+"_ops") })
	for res, tok := range tokens {
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, res, tok) }); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, table + "_guard", g, conn
}

func pgLast(t *testing.T, conn *pgx.Conn, table, res string) fence.Token {
	t.Helper()
	var tok int64
	if err := conn.QueryRow(context.Background(), "SELECT last_token FROM "+table+" WHERE resource = $1", res).Scan(&tok); err != nil {
		t.Fatal(err)
	}
	return fence.Token(tok)
}

// fence guard repair --ceiling against a poisoned PostgreSQL table: the
// dry run changes nothing; a resource at or below the ceiling is refused;
// the prefix's poisoned rows are lowered, each logged; the rest is
// untouched; the honest owner writes again.
func TestGuardRepairPostgresCeiling(t *testing.T) {
	dsn, table, g, conn := pgPoisoned(t, map[string]fence.Token{
		"app/a": fence.MaxTokenJSONInt, "app/b": 1 << 52, "app/honest": 40, "other/x": fence.MaxTokenJSONInt})
	store := []string{"--postgres", dsn, "--table", table}
	code, out, errs := runGuard(append([]string{"repair", "--prefix", "app/", "--ceiling", "50", "--dry-run"}, store...)...)
	if code != 0 || out != "would lower \"app/a\": 9007199254740991 -> 50\nwould lower \"app/b\": 4503599627370496 -> 50\n" {
		t.Fatalf("dry run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if got := pgLast(t, conn, table, "app/a"); got != fence.MaxTokenJSONInt {
		t.Fatalf("the dry run changed app/a to %d", got)
	}
	code, out, errs = runGuard(append([]string{"repair", "--resource", "app/honest", "--ceiling", "50"}, store...)...)
	if code != 1 || out != "" || !strings.Contains(errs, "the stored token 40 of \"app/honest\"") || !strings.Contains(errs, "at or below the ceiling 50") {
		t.Fatalf("a resource at or below the ceiling: exit %d, stdout %q, stderr %q; want exit 1 and why", code, out, errs)
	}
	code, out, errs = runGuard(append([]string{"repair", "--prefix", "app/", "--ceiling", "50", "--json"}, store...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("repair: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var first struct {
		Resource string `json:"resource"`
		Stored   uint64 `json:"stored"`
		Ceiling  uint64 `json:"ceiling"`
		Lowered  bool   `json:"lowered"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Resource != "app/a" || first.Stored != uint64(fence.MaxTokenJSONInt) || first.Ceiling != 50 || !first.Lowered {
		t.Fatalf("repair --json line %q: %+v %v", lines[0], first, err)
	}
	for res, want := range map[string]fence.Token{"app/a": 50, "app/b": 50, "app/honest": 40, "other/x": fence.MaxTokenJSONInt} {
		if got := pgLast(t, conn, table, res); got != want {
			t.Errorf("after the repair %s holds %d, want %d", res, got, want)
		}
	}
	code, _, errs = runGuard(append([]string{"repair", "--prefix", "app/", "--ceiling", "50"}, store...)...)
	if code != 1 || !strings.Contains(errs, "nothing to repair") {
		t.Fatalf("a second repair: exit %d, stderr %q; want exit 1, nothing to repair", code, errs)
	}
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, "app/a", 51) }); err != nil {
		t.Fatalf("the honest owner's token 51 after the repair: %v", err)
	}
	for _, c := range [][]string{
		{"repair", "--ceiling", "50"},                                    // no --resource or --prefix
		{"repair", "--resource", "r", "--prefix", "p", "--ceiling", "5"}, // both
		{"repair", "--resource", "r", "--ceiling", "0"},
		{"repair", "--resource", "r", "--ceiling", "9007199254740992"},
	} {
		if code, _, _ := runGuard(append(c, store...)...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", c, code, exitUsage)
		}
	}
}

// fence guard repair --sqlite and --mysql run the same engine as
// --postgres: a poisoned row lowered, the honest row left, a missing
// SQLite file refused without being created.
func TestGuardRepairSQLiteAndMySQL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "guard.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	for res, tok := range map[string]fence.Token{"a": fence.MaxTokenJSONInt, "b": 9} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := sqlite.Check(ctx, tx, res, tok); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errs := runGuard("repair", "--sqlite", path, "--prefix", "", "--ceiling", "10"); code != 0 || out != "lowered \"a\": 9007199254740991 -> 10\n" {
		t.Fatalf("sqlite repair: exit %d, %q, %q", code, out, errs)
	}
	wantMaxToken(t, "10", "--sqlite", path)
	missing := filepath.Join(t.TempDir(), "missing.db")
	if code, _, _ := runGuard("repair", "--sqlite", missing, "--prefix", "", "--ceiling", "10"); code != 1 {
		t.Errorf("missing file: exit %d, want 1", code)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("repair created %s", missing)
	}

	mdb, dsn := mysqlTestDB(t)
	table := "cli_" + randName() + "_guard"
	g, err := mysqlguard.New(mysqlguard.Options{Table: table, OpsTable: table + "_ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(ctx, mdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mdb.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_ops") })
	tx, err := mdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx, tx, "a", fence.MaxTokenJSONInt); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runGuard("repair", "--mysql", dsn, "--table", table, "--resource", "a", "--ceiling", "10"); code != 0 || out != "lowered \"a\": 9007199254740991 -> 10\n" {
		t.Fatalf("mysql repair: exit %d, %q, %q", code, out, errs)
	}
	wantMaxToken(t, "10", "--mysql", dsn, "--table", table)
}
