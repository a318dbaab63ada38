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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/fenceworks/fence/guard/sqlite"
)

// storedToken is one resource of a guard store and its last token.
type storedToken struct {
	Resource string
	Token    fence.Token
}

// repairer is an open guard store that repair reads and lowers.
type repairer interface {
	above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]storedToken, error)
	lower(ctx context.Context, s storedToken, ceiling fence.Token) (bool, error)
	close()
}

// extraRepair holds the repairers of the stores registered by other files
// (mysql), by kind: open(ctx, conn, table).
var extraRepair = map[string]func(ctx context.Context, conn, table string) (repairer, error){}

// openRepair opens s for a repair.
func (s guardStore) openRepair(ctx context.Context) (repairer, error) {
	switch s.kind {
	case "postgres":
		g, err := postgres.New(postgres.Options{Table: s.table})
		if err != nil {
			return nil, err
		}
		conn, err := pgx.Connect(ctx, s.conn)
		if err != nil {
			return nil, err
		}
		return pgRepairer{g, conn}, nil
	case "sqlite":
		g, err := sqlite.New(sqlite.Options{Table: s.table})
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(s.conn); err != nil { // never create an empty database
			return nil, err
		}
		db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: s.conn}).EscapedPath()+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, err
		}
		return sqliteRepairer{g, db}, nil
	case "redis":
		opts := &redis.Options{Addr: s.conn}
		if strings.Contains(s.conn, "://") {
			var err error
			if opts, err = redis.ParseURL(s.conn); err != nil {
				return nil, fence.Invalid("redis", "host:port or a redis:// URL", redactDSN(s.conn))
			}
		}
		opts.MaxRetries = -1
		return redisRepairer{redis.NewClient(opts), s.prefix}, nil
	}
	if f := extraRepair[s.kind]; f != nil {
		return f(ctx, s.conn, s.table)
	}
	return nil, fmt.Errorf("guard store kind %q is not built in", s.kind)
}

type pgRepairer struct {
	g    *postgres.Guard
	conn *pgx.Conn
}

func (r pgRepairer) above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]storedToken, error) {
	rows, err := r.g.Above(ctx, r.conn, resource, prefix, ceiling)
	out := make([]storedToken, len(rows))
	for i, s := range rows {
		out[i] = storedToken(s)
	}
	return out, err
}

func (r pgRepairer) lower(ctx context.Context, s storedToken, ceiling fence.Token) (bool, error) {
	return r.g.Lower(ctx, r.conn, postgres.Stored(s), ceiling)
}

func (r pgRepairer) close() { r.conn.Close(context.Background()) }

type sqliteRepairer struct {
	g  *sqlite.Guard
	db *sql.DB
}

func (r sqliteRepairer) above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]storedToken, error) {
	rows, err := r.g.Above(ctx, r.db, resource, prefix, ceiling)
	out := make([]storedToken, len(rows))
	for i, s := range rows {
		out[i] = storedToken(s)
	}
	return out, err
}

func (r sqliteRepairer) lower(ctx context.Context, s storedToken, ceiling fence.Token) (bool, error) {
	return r.g.Lower(ctx, r.db, sqlite.Stored(s), ceiling)
}

func (r sqliteRepairer) close() { r.db.Close() }

type redisRepairer struct {
	rdb    *redis.Client
	prefix string
}

func (r redisRepairer) above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]storedToken, error) {
	rows, err := redisguard.Above(ctx, r.rdb, r.prefix, resource, prefix, ceiling)
	out := make([]storedToken, len(rows))
	for i, s := range rows {
		out[i] = storedToken(s)
	}
	return out, err
}

func (r redisRepairer) lower(ctx context.Context, s storedToken, ceiling fence.Token) (bool, error) {
	return redisguard.Lower(ctx, r.rdb, r.prefix, redisguard.Stored(s), ceiling)
}

func (r redisRepairer) close() { r.rdb.Close() }

// NothingToRepairError: the resource's stored token (or every token under
// the prefix) is at or below the ceiling. Nothing was changed.
type NothingToRepairError struct {
	Store    string
	Resource string // "" for a prefix
	Prefix   string
	Stored   fence.Token // the resource's token (0: no such resource)
	Ceiling  fence.Token
}

func (e *NothingToRepairError) Error() string {
	if e.Resource == "" {
		return fmt.Sprintf("no stored token above the ceiling %d under prefix %q in %s: nothing to repair", e.Ceiling, e.Prefix, e.Store)
	}
	if e.Stored == 0 {
		return fmt.Sprintf("resource %q has no stored token in %s: nothing to repair", e.Resource, e.Store)
	}
	return fmt.Sprintf("the stored token %d of %q in %s is at or below the ceiling %d: nothing to repair", e.Stored, e.Resource, e.Store, e.Ceiling)
}

// MixedClustersError: the --server nodes a ceiling was read from belong
// to more than one cluster (their status reports different cluster ids).
// Their largest lastToken is no bound on what one cluster issued (a
// staging cluster may be far ahead of production), so nothing is read
// from them and nothing is changed.
type MixedClustersError struct {
	ClusterIDs map[string]string // node URL -> its cluster id
}

func (e *MixedClustersError) Error() string {
	urls := make([]string, 0, len(e.ClusterIDs))
	for u := range e.ClusterIDs {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	parts := make([]string, len(urls))
	for i, u := range urls {
		parts[i] = u + " is cluster " + strconv.Quote(e.ClusterIDs[u])
	}
	return "the --server nodes belong to different clusters (" + strings.Join(parts, ", ") + "): give the nodes of the one cluster whose tokens this store holds, or --ceiling N"
}

// StatusNeedsAdminError: the node answered NodeStatus with a non-admin's
// view (role and ready only, under authentication), which holds no last
// token or cluster id; reading them needs an admin token.
type StatusNeedsAdminError struct{ URL string }

func (e *StatusNeedsAdminError) Error() string {
	return "NodeStatus of " + e.URL + " shows this token only role and ready: the cluster's last token needs an admin token (--auth-token or FENCE_AUTH_TOKEN)"
}

// clusterLastToken is the largest lastToken the --server nodes report
// (fence status): no token the cluster has issued is above it. Nodes of
// different clusters are refused (*MixedClustersError); a node that does
// not answer is named in a warning on warn (prog: the command), since a
// lagging follower's lastToken may be below the leader's: the ceiling is
// then the largest of those that did answer.
func clusterLastToken(ctx context.Context, g *globals, warn io.Writer, prog string) (fence.Token, error) {
	if err := g.normalizeServer(); err != nil {
		return 0, err
	}
	hc := g.httpClient()
	defer hc.CloseIdleConnections()
	var (
		last     fence.Token
		answered bool
		errs     []error
		ids      = map[string]string{}
		distinct = map[string]bool{}
	)
	urls := strings.Split(g.server, ",")
	for _, u := range urls {
		st, err := nodeStatus(ctx, hc, u)
		if err == nil && limitedStatus(st) {
			// Role and ready only: its lastToken is absent, not 0.
			err = &StatusNeedsAdminError{URL: u}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", u, err))
			continue
		}
		answered = true
		if id := st.GetClusterId(); id != "" {
			ids[u], distinct[id] = id, true
		}
		if t := fence.Token(st.GetLastToken()); t > last {
			last = t
		}
	}
	if !answered {
		return 0, fmt.Errorf("reading the cluster's last token (fence status): %w", errors.Join(errs...))
	}
	if len(distinct) > 1 {
		return 0, &MixedClustersError{ClusterIDs: ids}
	}
	for _, err := range errs {
		fmt.Fprintf(warn, "%s: WARNING: %v: the cluster's last token is the largest of the %d of %d nodes that did (%d); if the leader was not among them it may have issued more\n",
			prog, err, len(urls)-len(errs), len(urls), uint64(last))
	}
	return last, nil
}

// guardRepairCmd lowers the tokens above a ceiling in one guard store.
func guardRepairCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fence guard repair", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), guardUsage) }
	registerHelp(fs, stdout)
	var (
		pgDSN, mysqlDSN, redisAddr, redisPrefix, sqlitePath, table string
		resource, prefix, ceilingArg                               string
		asJSON, dryRun                                             bool
		timeout                                                    time.Duration
	)
	fs.StringVar(&pgDSN, "postgres", "", "PostgreSQL `DSN`")
	fs.StringVar(&mysqlDSN, "mysql", "", "MySQL/MariaDB `DSN`")
	fs.StringVar(&redisAddr, "redis", "", "Redis `ADDR` or URL")
	fs.StringVar(&redisPrefix, "redis-prefix", redisguard.DefaultPrefix, "Redis key `prefix`")
	fs.StringVar(&sqlitePath, "sqlite", "", "SQLite database `PATH`")
	fs.StringVar(&table, "table", "", "guard `table` (default fence_guard)")
	fs.StringVar(&resource, "resource", "", "the `resource` to repair")
	fs.StringVar(&prefix, "prefix", "", "repair every resource starting with `P`")
	fs.StringVar(&ceilingArg, "ceiling", "", "lower to `N` (default: the cluster's last token)")
	fs.BoolVar(&dryRun, "dry-run", false, "print what would change; change nothing")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per resource")
	durationVar(fs, &timeout, "timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	if err := checkHelp(fs); err != nil {
		return usageExit(err)
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "fence guard repair: %s\n%s", msg, guardUsage)
		return exitUsage
	}
	prefixSet := false
	fs.Visit(func(f *flag.Flag) { prefixSet = prefixSet || f.Name == "prefix" })
	n := 0
	for _, s := range []string{pgDSN, mysqlDSN, redisAddr, sqlitePath} {
		if s != "" {
			n++
		}
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case n != 1:
		return usage("give exactly one of --postgres, --mysql, --redis, --sqlite")
	case (resource == "") == !prefixSet:
		return usage(`give exactly one of --resource R and --prefix P (--prefix "" repairs every resource)`)
	case table != "" && redisAddr != "":
		return usage("--table applies to --postgres, --mysql and --sqlite")
	case redisPrefix != redisguard.DefaultPrefix && redisAddr == "":
		return usage("--redis-prefix applies to --redis")
	case timeout <= 0:
		return usage("--timeout must be positive")
	}
	if resource != "" {
		if err := fence.ValidateName("resource", resource); err != nil {
			return guardFail(stdout, stderr, asJSON, err)
		}
	}
	var ceiling fence.Token
	if ceilingArg != "" {
		c, err := strconv.ParseUint(ceilingArg, 10, 64)
		if err != nil || c == 0 || c > uint64(fence.MaxTokenJSONInt) {
			return guardFail(stdout, stderr, asJSON, fence.Invalid("ceiling", fmt.Sprintf("a decimal number in [1, %d]", uint64(fence.MaxTokenJSONInt)), strconv.Quote(ceilingArg)))
		}
		ceiling = fence.Token(c)
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
	fromCluster := ceiling == 0
	if fromCluster {
		last, err := clusterLastToken(ctx, g, stderr, "fence guard repair")
		if err != nil {
			return guardFail(stdout, stderr, asJSON, fmt.Errorf("no --ceiling: %w", err))
		}
		if last == 0 {
			return guardFail(stdout, stderr, asJSON, errors.New("no --ceiling, and the cluster has issued no token yet (lastToken 0): give --ceiling N"))
		}
		ceiling = last
	}
	r, err := store.openRepair(ctx)
	if err != nil {
		return guardFail(stdout, stderr, asJSON, fmt.Errorf("%s: %w", store, err))
	}
	defer r.close()
	found, err := r.above(ctx, resource, prefix, ceiling)
	if err != nil {
		return guardFail(stdout, stderr, asJSON, fmt.Errorf("%s: %w", store, err))
	}
	if fromCluster && len(found) > 0 {
		// Read the last token again after the scan: a token the scan saw was
		// issued before it was read, so it is at or below this one, and an
		// honest owner's write made while the scan ran is never lowered.
		last, err := clusterLastToken(ctx, g, stderr, "fence guard repair")
		if err != nil {
			return guardFail(stdout, stderr, asJSON, fmt.Errorf("no --ceiling: %w", err))
		}
		ceiling = max(ceiling, last)
		found = slicesFilter(found, func(s storedToken) bool { return s.Token > ceiling })
	}
	if len(found) == 0 {
		nothing := &NothingToRepairError{Store: store.String(), Resource: resource, Prefix: prefix, Ceiling: ceiling}
		if resource != "" {
			if all, err := r.above(ctx, resource, "", 1); err == nil && len(all) == 1 {
				nothing.Stored = all[0].Token
			}
		}
		return guardFail(stdout, stderr, asJSON, nothing)
	}
	for _, s := range found {
		verb, lowered := "would lower", false
		if !dryRun {
			if lowered, err = r.lower(ctx, s, ceiling); err != nil {
				return guardFail(stdout, stderr, asJSON, fmt.Errorf("%s: lowering %q: %w", store, s.Resource, err))
			}
			verb = "lowered"
			if !lowered {
				verb = "left (changed since it was read)"
			}
		}
		if asJSON {
			_ = json.NewEncoder(stdout).Encode(map[string]any{"store": store.kind, "resource": s.Resource,
				"stored": uint64(s.Token), "ceiling": uint64(ceiling), "dryRun": dryRun, "lowered": lowered})
		} else {
			fmt.Fprintf(stdout, "%s %s: %d -> %d\n", verb, strconv.Quote(s.Resource), uint64(s.Token), uint64(ceiling))
		}
	}
	return exitOK
}

// slicesFilter keeps the elements of s that keep reports true for.
func slicesFilter[T any](s []T, keep func(T) bool) []T {
	out := s[:0]
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
