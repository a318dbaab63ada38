package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/fenceworks/fence/guard/sqlite"
)

// guardStore is one guard store whose largest accepted token is a floor of
// a restore: `fence guard max-token` prints it, `fence restore
// --floor-from` raises the counter above it.
type guardStore struct {
	kind   string // "postgres", "sqlite", "redis" (, "mysql")
	conn   string // what the driver opens: the DSN without Fence's own parameters, or the SQLite path
	table  string // the guard table (postgres, sqlite, mysql); "" is the guard's default
	prefix string // the key prefix (redis); "" is the guard's default
	shown  string // the store as printed: the DSN with its password redacted
}

// where names what was read: the table or the key prefix, default filled in.
func (s guardStore) where() string {
	switch s.kind {
	case "redis":
		p := s.prefix
		if p == "" {
			p = redisguard.DefaultPrefix
		}
		return fmt.Sprintf("key prefix %q", p)
	default:
		t := s.table
		if t == "" {
			t = postgres.DefaultTable
		}
		return fmt.Sprintf("table %q", t)
	}
}

// String is the store as a report prints it: its DSN (password redacted)
// and what was read in it.
func (s guardStore) String() string {
	if strings.Contains(s.shown, "table=") || strings.Contains(s.shown, "prefix=") {
		return s.shown // it names its table or prefix itself
	}
	return s.shown + " (" + s.where() + ")"
}

// EmptyStoreError: a guard store where no accepted token was found — the
// table or prefix is empty, or (much more likely when an operator reads a
// floor) it is not the one the guards write. A 0 printed instead would be
// trusted as a floor and the restore would roll the counter back.
type EmptyStoreError struct {
	Store string // the store as printed (password redacted)
	Where string // `table "x"` or `key prefix "p"`
}

func (e *EmptyStoreError) Error() string {
	return fmt.Sprintf("no tokens found in %s of %s: wrong table or prefix?", e.Where, e.Store)
}

// maxToken returns the largest token the store has accepted; a store where
// none was found is an *EmptyStoreError unless allowEmpty (then 0).
func (s guardStore) maxToken(ctx context.Context, allowEmpty bool) (fence.Token, error) {
	var (
		max fence.Token
		err error
	)
	switch s.kind {
	case "postgres":
		max, err = postgresMaxToken(ctx, s.conn, s.table)
	case "sqlite":
		max, err = sqliteMaxToken(ctx, s.conn, s.table)
	case "redis":
		max, err = redisMaxToken(ctx, s.conn, s.prefix)
	default:
		if f := extraMaxToken[s.kind]; f != nil {
			max, err = f(ctx, s.conn, s.table)
		} else {
			err = fmt.Errorf("guard store kind %q is not built in", s.kind)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s, err)
	}
	if max == 0 && !allowEmpty {
		return 0, &EmptyStoreError{Store: s.shown, Where: s.where()}
	}
	return max, nil
}

// extraMaxToken holds the guard stores registered by other files of the
// command (mysql), by kind: func(ctx, conn, table).
var extraMaxToken = map[string]func(ctx context.Context, conn, table string) (fence.Token, error){}

// extraFloorSchemes maps a --floor-from URL scheme registered by another
// file to a parser of the whole DSN.
var extraFloorSchemes = map[string]func(dsn, table string) (guardStore, error){}

const floorFromForms = "postgres://…[?table=T], postgresql://…, sqlite:PATH[?table=T], sqlite://PATH, " +
	"redis://HOST:PORT[/DB][?prefix=P], rediss://…"

// parseFloorFrom reads a --floor-from DSN: its scheme names the store;
// Fence's own parameters (table, prefix) are taken out before the driver
// sees it. table is the default table (--table) for a DSN without ?table=.
func parseFloorFrom(dsn, table string) (guardStore, error) {
	scheme, _, ok := strings.Cut(dsn, ":")
	if !ok || scheme == "" {
		return guardStore{}, fence.Invalid("floor-from", "a DSN with a scheme: "+floorFromForms, dsn)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		u, err := url.Parse(dsn)
		if err != nil {
			return guardStore{}, fence.Invalid("floor-from", "a postgres:// URL ("+err.Error()+")", redactDSN(dsn))
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return guardStore{}, fence.Invalid("floor-from", "a postgres:// URL ("+err.Error()+")", u.Redacted())
		}
		s := guardStore{kind: "postgres", table: table, shown: u.Redacted()}
		if t, ok := takeParam(q, "table"); ok {
			s.table = t
		}
		u.RawQuery = q.Encode()
		s.conn = u.String()
		return s, checkTable(s)
	case "sqlite":
		rest := strings.TrimPrefix(dsn[len(scheme)+1:], "//")
		path, query, _ := strings.Cut(rest, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return guardStore{}, fence.Invalid("floor-from", "sqlite:PATH[?table=T] ("+err.Error()+")", dsn)
		}
		s := guardStore{kind: "sqlite", conn: path, table: table, shown: "sqlite:" + path}
		if t, ok := takeParam(q, "table"); ok {
			s.table = t
		}
		if len(q) > 0 {
			return guardStore{}, fence.Invalid("floor-from", "sqlite:PATH[?table=T] (no other parameter)", dsn)
		}
		if path == "" {
			return guardStore{}, fence.Invalid("floor-from", "sqlite:PATH with a path", dsn)
		}
		return s, checkTable(s)
	case "redis", "rediss":
		u, err := url.Parse(dsn)
		if err != nil {
			return guardStore{}, fence.Invalid("floor-from", "a redis:// URL ("+err.Error()+")", redactDSN(dsn))
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return guardStore{}, fence.Invalid("floor-from", "a redis:// URL ("+err.Error()+")", u.Redacted())
		}
		s := guardStore{kind: "redis", shown: u.Redacted()}
		if p, ok := takeParam(q, "prefix"); ok {
			s.prefix = p
		}
		u.RawQuery = q.Encode()
		s.conn = u.String()
		if _, err := redis.ParseURL(s.conn); err != nil {
			return guardStore{}, fence.Invalid("floor-from", "a redis://HOST:PORT[/DB][?prefix=P] URL ("+err.Error()+")", s.shown)
		}
		return s, nil // --table is for the SQL stores: a Redis store has ?prefix=
	}
	if p := extraFloorSchemes[strings.ToLower(scheme)]; p != nil {
		return p(dsn, table)
	}
	return guardStore{}, fence.Invalid("floor-from", "one of "+floorFromForms, redactDSN(dsn))
}

// takeParam removes key from q and returns its value, if it was there.
func takeParam(q url.Values, key string) (string, bool) {
	if !q.Has(key) {
		return "", false
	}
	v := q.Get(key)
	q.Del(key)
	return v, true
}

// checkTable refuses a table name the store's guard would refuse, before
// anything is opened.
func checkTable(s guardStore) error {
	var err error
	switch s.kind {
	case "postgres":
		_, err = postgres.New(postgres.Options{Table: s.table})
	case "sqlite":
		_, err = sqlite.New(sqlite.Options{Table: s.table})
	}
	return err
}

// redactDSN hides the password of a DSN for a message: a URL's, or a
// password=… of a keyword/value DSN ("host=h password=p").
func redactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			return u.Redacted()
		}
		if i := strings.LastIndexByte(dsn, '@'); i >= 0 {
			return "…@" + dsn[i+1:]
		}
		return dsn
	}
	return passwordKV.ReplaceAllString(dsn, "${1}xxxxx")
}

var passwordKV = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

func postgresMaxToken(ctx context.Context, dsn, table string) (fence.Token, error) {
	g, err := postgres.New(postgres.Options{Table: table})
	if err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	return g.MaxToken(ctx, conn)
}

func redisMaxToken(ctx context.Context, addr, prefix string) (fence.Token, error) {
	opts := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opts, err = redis.ParseURL(addr); err != nil {
			return 0, fence.Invalid("redis", "host:port or a redis:// URL", redactDSN(addr))
		}
	}
	opts.MaxRetries = -1 // one honest attempt; the caller retries
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	return redisguard.MaxToken(ctx, rdb, prefix)
}

// sqliteMaxToken opens an existing database read-only: a mistyped path must
// fail, not create an empty database that reports 0.
func sqliteMaxToken(ctx context.Context, path, table string) (fence.Token, error) {
	g, err := sqlite.New(sqlite.Options{Table: table})
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return g.MaxToken(ctx, db)
}
