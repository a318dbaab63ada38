package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/fenceworks/fence/guard/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"
)

const guardUsage = `usage: fence guard max-token (--postgres DSN | --redis ADDR [--redis-prefix P] | --sqlite PATH) [--table T] [--json] [--timeout D]

max-token prints the largest fencing token a guard store has accepted
(0 if none). A planned command, fence restore --floor-from (it does not
exist yet), will use it as the token floor when a server is restored from
a backup.
  --postgres DSN     a PostgreSQL connection string (guard table, default fence_guard)
  --redis ADDR       a Redis address host:port or redis:// URL (keys under --redis-prefix, default "fence")
  --sqlite PATH      an existing SQLite database file (opened read-only)
  --table T          the guard table of --postgres or --sqlite
`

// guardCmd runs "fence guard ...". The global flags are not passed here;
// max-token takes its own --json.
func guardCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, guardUsage)
		return exitUsage
	}
	switch args[0] {
	case "max-token":
		return guardMaxTokenCmd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, guardUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "fence guard: unknown command %q\n%s", args[0], guardUsage)
	return exitUsage
}

// guardMaxTokenCmd prints the largest token one guard store has accepted.
func guardMaxTokenCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fence guard max-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), guardUsage) }
	registerHelp(fs, stdout)
	var (
		pgDSN, redisAddr, redisPrefix, sqlitePath, table string
		asJSON                                           bool
		timeout                                          time.Duration
	)
	fs.StringVar(&pgDSN, "postgres", "", "PostgreSQL `DSN`")
	fs.StringVar(&redisAddr, "redis", "", "Redis `ADDR` or URL")
	fs.StringVar(&redisPrefix, "redis-prefix", redisguard.DefaultPrefix, "Redis key `prefix`")
	fs.StringVar(&sqlitePath, "sqlite", "", "SQLite database `PATH`")
	fs.StringVar(&table, "table", "", "guard `table` (default fence_guard)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	durationVar(fs, &timeout, "timeout", 10*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	if err := checkHelp(fs); err != nil {
		return usageExit(err)
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "fence guard max-token: %s\n%s", msg, guardUsage)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	n := 0
	for _, s := range []string{pgDSN, redisAddr, sqlitePath} {
		if s != "" {
			n++
		}
	}
	switch {
	case n != 1:
		return usage("give exactly one of --postgres, --redis, --sqlite")
	case table != "" && redisAddr != "":
		return usage("--table applies to --postgres and --sqlite")
	case redisPrefix != redisguard.DefaultPrefix && redisAddr == "":
		return usage("--redis-prefix applies to --redis")
	case timeout <= 0:
		return usage("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		store string
		max   fence.Token
		err   error
	)
	switch {
	case pgDSN != "":
		store = "postgres"
		max, err = postgresMaxToken(ctx, pgDSN, table)
	case redisAddr != "":
		store = "redis"
		max, err = redisMaxToken(ctx, redisAddr, redisPrefix)
	default:
		store = "sqlite"
		max, err = sqliteMaxToken(ctx, sqlitePath, table)
	}
	if err != nil {
		return guardFail(stdout, stderr, asJSON, err)
	}
	if asJSON {
		_ = json.NewEncoder(stdout).Encode(map[string]any{"store": store, "maxToken": uint64(max)})
	} else {
		fmt.Fprintln(stdout, uint64(max))
	}
	return exitOK
}

func guardFail(stdout, stderr io.Writer, asJSON bool, err error) int {
	reason := fence.ReasonOf(err)
	if reason != "" {
		fmt.Fprintf(stderr, "%s: %v\n", reason, err)
	} else {
		fmt.Fprintf(stderr, "fence: %v\n", err)
	}
	if asJSON {
		e := map[string]any{"message": err.Error()}
		if reason != "" {
			e["reason"] = string(reason)
		}
		var inv *fence.InvalidError
		if errors.As(err, &inv) {
			e["field"], e["bound"] = inv.Field, inv.Bound
		}
		_ = json.NewEncoder(stdout).Encode(map[string]any{"error": e})
	}
	if reason == fence.ReasonInvalid {
		return exitUsage
	}
	return exitError
}

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
			return 0, fence.Invalid("redis", "host:port or a redis:// URL", addr)
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
