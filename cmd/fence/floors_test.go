//go:build e2e

package main

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fenceworks/fence"
	mysqlguard "github.com/fenceworks/fence/guard/mysql"
	"github.com/fenceworks/fence/guard/postgres"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/fenceworks/fence/guard/sqlite"
)

// TestParseFloorFrom: each scheme names its store; Fence's own parameters
// (table, prefix) are taken out of what the driver sees; a password never
// reaches a message.
func TestParseFloorFrom(t *testing.T) {
	for _, tc := range []struct {
		dsn, table                        string
		kind, conn, wantTable, wantPrefix string
		shown                             string
	}{
		{dsn: "postgres://fence:s3cret@db:5432/app?table=guard_t&sslmode=disable", kind: "postgres",
			conn: "postgres://fence:s3cret@db:5432/app?sslmode=disable", wantTable: "guard_t",
			shown: "postgres://fence:xxxxx@db:5432/app?table=guard_t&sslmode=disable"},
		{dsn: "postgresql://db/app", table: "from_flag", kind: "postgres", conn: "postgresql://db/app", wantTable: "from_flag",
			shown: "postgresql://db/app"},
		{dsn: "postgres://db/app?table=q", table: "from_flag", kind: "postgres", conn: "postgres://db/app", wantTable: "q",
			shown: "postgres://db/app?table=q"},
		{dsn: "sqlite:/var/lib/app/guard.db?table=g", kind: "sqlite", conn: "/var/lib/app/guard.db", wantTable: "g",
			shown: "sqlite:/var/lib/app/guard.db"},
		{dsn: "sqlite:///var/lib/app/guard.db", kind: "sqlite", conn: "/var/lib/app/guard.db", shown: "sqlite:/var/lib/app/guard.db"},
		{dsn: "sqlite://guard.db", kind: "sqlite", conn: "guard.db", shown: "sqlite:guard.db"},
		{dsn: "sqlite:guard.db", table: "t2", kind: "sqlite", conn: "guard.db", wantTable: "t2", shown: "sqlite:guard.db"},
		{dsn: "redis://:pw@cache:6379/2?prefix=app.fence&dial_timeout=3s", table: "ignored", kind: "redis",
			conn: "redis://:pw@cache:6379/2?dial_timeout=3s", wantPrefix: "app.fence",
			shown: "redis://:xxxxx@cache:6379/2?prefix=app.fence&dial_timeout=3s"},
		{dsn: "rediss://cache:6380", kind: "redis", conn: "rediss://cache:6380", shown: "rediss://cache:6380"},
		{dsn: "mysql://fence:s3cret@db/app?table=g&timeout=5s", table: "from_flag", kind: "mysql",
			conn: "fence:s3cret@tcp(db:3306)/app?timeout=5s", wantTable: "g",
			shown: "mysql://fence:xxxxx@db/app?table=g&timeout=5s"},
		{dsn: "mariadb://db:3307/app", table: "from_flag", kind: "mysql", conn: "tcp(db:3307)/app", wantTable: "from_flag",
			shown: "mariadb://db:3307/app"},
	} {
		s, err := parseFloorFrom(tc.dsn, tc.table)
		if err != nil {
			t.Errorf("parseFloorFrom(%q, %q): %v", tc.dsn, tc.table, err)
			continue
		}
		if s.kind != tc.kind || s.conn != tc.conn || s.table != tc.wantTable || s.prefix != tc.wantPrefix || s.shown != tc.shown {
			t.Errorf("parseFloorFrom(%q, %q) = %+v; want kind %s conn %s table %q prefix %q shown %s",
				tc.dsn, tc.table, s, tc.kind, tc.conn, tc.wantTable, tc.wantPrefix, tc.shown)
		}
		if strings.Contains(s.String(), "s3cret") || strings.Contains(s.String(), ":pw@") {
			t.Errorf("%q printed as %q: the password shows", tc.dsn, s)
		}
	}

	for _, tc := range []struct{ dsn, field, notShown string }{
		{dsn: "", field: "floor-from"},
		{dsn: "guard.db", field: "floor-from"},
		{dsn: "http://db/x", field: "floor-from"},
		{dsn: "oracle://u:topsecret@db/x", field: "floor-from", notShown: "topsecret"},
		{dsn: "postgres://db/app?table=no%3Bsuch", field: "table"},
		{dsn: "postgres://db/app?table=no;such", field: "floor-from"},
		{dsn: "sqlite:", field: "floor-from"},
		{dsn: "sqlite:g.db?prefix=x", field: "floor-from"},
		{dsn: "redis://cache:6379?bogus_option=1", field: "floor-from"},
		{dsn: "mysql://u:topsecret@db/app?table=bad%3Bname", field: "table", notShown: "topsecret"},
	} {
		_, err := parseFloorFrom(tc.dsn, "")
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("parseFloorFrom(%q): %v; want an invalid %s", tc.dsn, err, tc.field)
			continue
		}
		if tc.notShown != "" && strings.Contains(err.Error(), tc.notShown) {
			t.Errorf("parseFloorFrom(%q): %v shows the password", tc.dsn, err)
		}
	}

	for in, want := range map[string]string{
		"host=db password=s3cret dbname=x":   "host=db password=xxxxx dbname=x",
		"host=db password='a b\\'c' user=me": "host=db password=xxxxx user=me",
		"postgres://me:s3cret@db/x":          "postgres://me:xxxxx@db/x",
		"127.0.0.1:6379":                     "127.0.0.1:6379",
	} {
		if got := redactDSN(in); got != want {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFloorFromStores reads a floor through each DSN form from the real
// stores: the parameters Fence takes out (?table=, ?prefix=) must not reach
// the driver, and a store where nothing is found is an *EmptyStoreError.
func TestFloorFromStores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("FENCE_TEST_POSTGRES")
		if dsn == "" {
			dsn = "postgres://postgres@127.0.0.1:5432/test"
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			storeUnavailable(t, "PostgreSQL at %s (FENCE_TEST_POSTGRES): %v", dsn, err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) }) // after the DROP below (cleanups run last first); a defer would close it before
		table := "floor_" + randName()
		g, err := postgres.New(postgres.Options{Table: table, OpsTable: table + "_ops"})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Migrate(ctx, conn); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_ops") })
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		s, err := parseFloorFrom(dsn+sep+"table="+table, "")
		if err != nil {
			t.Fatal(err)
		}
		wantEmptyStore(t, ctx, s, `table "`+table+`"`)
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, "r", 4242) }); err != nil {
			t.Fatal(err)
		}
		wantFloor(t, ctx, s, 4242)
		// The same table through --table (the restore's default for a DSN
		// without ?table=).
		s, err = parseFloorFrom(dsn, table)
		if err != nil {
			t.Fatal(err)
		}
		wantFloor(t, ctx, s, 4242)
	})

	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "guard.db")
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		g, err := sqlite.New(sqlite.Options{Table: "my_guard", OpsTable: "my_ops"})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		s, err := parseFloorFrom("sqlite:"+path+"?table=my_guard", "")
		if err != nil {
			t.Fatal(err)
		}
		wantEmptyStore(t, ctx, s, `table "my_guard"`)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Check(ctx, tx, "r", 77); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		wantFloor(t, ctx, s, 77)
		// The default table does not exist in this database: an error.
		s, _ = parseFloorFrom("sqlite://"+path, "")
		if _, err := s.maxToken(ctx, false); err == nil {
			t.Errorf("%s: no error for a missing table", s)
		}
	})

	t.Run("mysql", func(t *testing.T) {
		db, dsn := mysqlTestDB(t)
		table := "floor_" + randName()
		g, err := mysqlguard.New(mysqlguard.Options{Table: table, OpsTable: table + "_ops"})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_ops") })
		// The driver DSN as a mysql:// URL.
		cfg, _, err := mysqlguard.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName, RawQuery: "table=" + table}
		if cfg.User != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
			if cfg.Passwd == "" {
				u.User = url.User(cfg.User)
			}
		}
		s, err := parseFloorFrom(u.String(), "")
		if err != nil {
			t.Fatal(err)
		}
		wantEmptyStore(t, ctx, s, `table "`+table+`"`)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Check(ctx, tx, "r", 5150); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		wantFloor(t, ctx, s, 5150)
	})

	t.Run("redis", func(t *testing.T) {
		addr := os.Getenv("FENCE_TEST_REDIS")
		if addr == "" {
			addr = "127.0.0.1:6379"
		}
		if !strings.Contains(addr, "://") {
			addr = "redis://" + addr
		}
		opts, err := redis.ParseURL(addr)
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			storeUnavailable(t, "Redis at %s (FENCE_TEST_REDIS): %v", addr, err)
		}
		prefix := "floortest." + randName()
		g, err := redisguard.New(rdb, redisguard.Options{Prefix: prefix, AcceptVolatile: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pattern, _ := redisguard.KeyPattern(prefix)
			for _, k := range rdb.Keys(context.Background(), pattern).Val() {
				rdb.Del(context.Background(), k)
			}
		})
		sep := "?"
		if strings.Contains(addr, "?") {
			sep = "&"
		}
		s, err := parseFloorFrom(addr+sep+"prefix="+prefix, "")
		if err != nil {
			t.Fatal(err)
		}
		wantEmptyStore(t, ctx, s, `key prefix "`+prefix+`"`)
		if _, err := g.Set(ctx, "r", 919, []byte("v"), "op"); err != nil {
			t.Fatal(err)
		}
		wantFloor(t, ctx, s, 919)
	})
}

func wantFloor(t *testing.T, ctx context.Context, s guardStore, want fence.Token) {
	t.Helper()
	got, err := s.maxToken(ctx, false)
	if err != nil || got != want {
		t.Fatalf("%s: max token %d, %v; want %d", s, got, err, want)
	}
}

func wantEmptyStore(t *testing.T, ctx context.Context, s guardStore, where string) {
	t.Helper()
	got, err := s.maxToken(ctx, false)
	var empty *EmptyStoreError
	if !errors.As(err, &empty) || empty.Where != where || !strings.Contains(err.Error(), "no tokens found in "+where) {
		t.Fatalf("%s, empty: %d, %v; want an EmptyStoreError naming %s", s, got, err, where)
	}
	if got, err := s.maxToken(ctx, true); got != 0 || err != nil {
		t.Fatalf("%s, empty, allowEmpty: %d, %v; want 0", s, got, err)
	}
}
