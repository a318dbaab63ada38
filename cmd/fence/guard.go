package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/fenceworks/fence"
	redisguard "github.com/fenceworks/fence/guard/redis"
	_ "modernc.org/sqlite"
)

const guardUsage = `usage: fence guard max-token (--postgres DSN | --mysql DSN | --redis ADDR [--redis-prefix P] | --sqlite PATH) [--table T] [--allow-empty] [--json] [--timeout D]
       fence [--server URL] guard repair (--postgres DSN | --mysql DSN | --redis ADDR [--redis-prefix P] | --sqlite PATH) [--table T]
             (--resource R | --prefix P) [--ceiling N] [--dry-run] [--json] [--timeout D]

max-token prints the largest fencing token a guard store has accepted: the
floor a restore of the server must stay above (fence restore --floor-from
reads it itself). A store where no token is found — an empty table, or far
more likely a mistyped table or prefix — is an error (exit 1, "no tokens
found in ...: wrong table or prefix?"), not a 0 an operator would trust.
  --postgres DSN     a PostgreSQL connection string (guard table, default fence_guard)
  --mysql DSN        a MySQL/MariaDB DSN, mysql://user:pw@host:3306/db or user:pw@tcp(host:3306)/db
                     ([?table=T]; guard table, default fence_guard)
  --redis ADDR       a Redis address host:port or redis:// URL (keys under --redis-prefix, default "fence")
  --sqlite PATH      an existing SQLite database file (opened read-only)
  --table T          the guard table of --postgres, --mysql or --sqlite
  --allow-empty      print 0 and exit 0 when no token is found (for scripts that expect it)
With a server (--server before "guard", or FENCE_SERVER) max-token also
reads the cluster's last token (fence status lastToken) and says on stderr
(and with --json in "aboveLastToken") when the store holds a larger one: a
token Fence never issued, accepted by a guard without a key set — see
repair. A server that does not answer is noted on stderr, not an error.

repair lowers the stored tokens above a ceiling — tokens Fence never issued,
which refuse every honest owner — to the ceiling, per resource (--resource)
or for every resource starting with --prefix ("" : all). The ceiling is
--ceiling N, or by default the cluster's last token (the largest lastToken
the --server nodes report, read again after the scan so that a token
issued meanwhile is never lowered). A resource whose stored token is at or
below the ceiling is refused (exit 1, nothing changed), and so is a prefix
with no such resource. --dry-run prints what it would do and changes
nothing. Each change is one conditional update (a token that changed since
it was read is left alone) and one line on stdout ("lowered R: A -> C"; with
--json one object per resource). After a repair the owner's next token (above
the ceiling) is accepted; a token at or below it stays refused, so current
holders renew-acquire. Give guards a key set (docs/guards.md) so it does not
happen again.
  --resource R       the one resource to repair
  --prefix P         every resource whose name starts with P
  --ceiling N        lower to N (default: the cluster's last token)
  --dry-run          print what would change; change nothing
`

// guardCmd runs "fence guard ...". The global flags are not passed here;
// max-token takes its own --json.
func guardCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, guardUsage)
		return exitUsage
	}
	switch args[0] {
	case "max-token":
		return guardMaxTokenCmd(g, args[1:], stdout, stderr)
	case "repair":
		return guardRepairCmd(g, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, guardUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "fence guard: unknown command %q\n%s", args[0], guardUsage)
	return exitUsage
}

// guardMaxTokenCmd prints the largest token one guard store has accepted.
func guardMaxTokenCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fence guard max-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), guardUsage) }
	registerHelp(fs, stdout)
	var (
		pgDSN, mysqlDSN, redisAddr, redisPrefix, sqlitePath, table string
		asJSON, allowEmpty                                         bool
		timeout                                                    time.Duration
	)
	fs.StringVar(&pgDSN, "postgres", "", "PostgreSQL `DSN`")
	fs.StringVar(&mysqlDSN, "mysql", "", "MySQL/MariaDB `DSN`")
	fs.StringVar(&redisAddr, "redis", "", "Redis `ADDR` or URL")
	fs.StringVar(&redisPrefix, "redis-prefix", redisguard.DefaultPrefix, "Redis key `prefix`")
	fs.StringVar(&sqlitePath, "sqlite", "", "SQLite database `PATH`")
	fs.StringVar(&table, "table", "", "guard `table` (default fence_guard)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.BoolVar(&allowEmpty, "allow-empty", false, "print 0 when no token is found")
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
	for _, s := range []string{pgDSN, mysqlDSN, redisAddr, sqlitePath} {
		if s != "" {
			n++
		}
	}
	switch {
	case n != 1:
		return usage("give exactly one of --postgres, --mysql, --redis, --sqlite")
	case table != "" && redisAddr != "":
		return usage("--table applies to --postgres, --mysql and --sqlite")
	case redisPrefix != redisguard.DefaultPrefix && redisAddr == "":
		return usage("--redis-prefix applies to --redis")
	case timeout <= 0:
		return usage("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var store guardStore
	switch {
	case mysqlDSN != "":
		var err error
		if store, err = mysqlStore(mysqlDSN, table, false); err != nil {
			return guardFail(stdout, stderr, asJSON, err)
		}
	case pgDSN != "":
		store = guardStore{kind: "postgres", conn: pgDSN, table: table, shown: redactDSN(pgDSN)}
	case redisAddr != "":
		store = guardStore{kind: "redis", conn: redisAddr, prefix: redisPrefix, shown: redactDSN(redisAddr)}
	default:
		store = guardStore{kind: "sqlite", conn: sqlitePath, table: table, shown: sqlitePath}
	}
	if err := checkTable(store); err != nil {
		return guardFail(stdout, stderr, asJSON, err)
	}
	max, err := store.maxToken(ctx, allowEmpty)
	if err != nil {
		return guardFail(stdout, stderr, asJSON, err)
	}
	above := map[string]any{}
	if g.serverSet {
		if last, err := clusterLastToken(ctx, g, stderr, "fence guard max-token"); err != nil {
			fmt.Fprintf(stderr, "fence guard max-token: not compared with the cluster's last token: %v\n", err)
		} else {
			above["lastToken"], above["aboveLastToken"] = uint64(last), max > last
			if max > last {
				fmt.Fprintf(stderr, "fence guard max-token: WARNING: %s holds token %d, above the cluster's last token %d: a token Fence never issued (forged, foreign or made up) was accepted by a guard without a key set; it refuses every honest owner (fence guard repair lowers it)\n", store, uint64(max), uint64(last))
			}
		}
	}
	if asJSON {
		obj := map[string]any{"store": store.kind, "maxToken": uint64(max)}
		for k, v := range above {
			obj[k] = v
		}
		_ = json.NewEncoder(stdout).Encode(obj)
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
		var (
			inv   *fence.InvalidError
			empty *EmptyStoreError
		)
		if errors.As(err, &inv) {
			e["field"], e["bound"] = inv.Field, inv.Bound
		}
		if errors.As(err, &empty) {
			e["empty"], e["where"] = true, empty.Where
		}
		_ = json.NewEncoder(stdout).Encode(map[string]any{"error": e})
	}
	if reason == fence.ReasonInvalid {
		return exitUsage
	}
	return exitError
}
