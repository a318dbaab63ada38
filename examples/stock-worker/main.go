// Command stock-worker is the paused-worker story on PostgreSQL: a worker takes
// the Fence lease for one SKU and writes its stock quantity in one
// PostgreSQL transaction guarded by guard/postgres, so that a worker whose
// lease has expired — paused, slow, partitioned — is refused by the database
// itself, whatever it believes about its lease.
//
//	stock-worker --sku sku-42 --qty 8                 # set the stock to 8
//	stock-worker --sku sku-42 --add -1 --op-id sale-1 # subtract 1, at most once
//	stock-worker --keys keys.json --sku sku-42 --qty 8  # verify the lease's proof first
//
// With --keys FILE (the cluster's key set: `fence keys --json`, or GET
// /v1/keys) the guard verifies the lease's signed token before it compares
// (G9): a token Fence did not grant for the lock "stock/SKU" — another
// cluster's, a tampered one, a made-up one — is refused FORGED_TOKEN and
// the row is unchanged. Without it the guard compares numbers only.
//
// Each run: connect to Fence and PostgreSQL, create the tables if needed,
// acquire the lease "stock/SKU", optionally wait for a line on stdin
// (--pause-before-write), write, release. It prints one line per step on
// stdout:
//
//	acquired lock=stock/sku-42 token=2 ttl=30s
//	written sku=sku-42 qty=8 token=2
//	refused reason=STALE_TOKEN token=1 last_accepted=2 (token 1 is older than accepted token 2)
//	applied op_id=sale-1 sku=sku-42 qty=7 token=2
//	replayed op_id=sale-1 sku=sku-42 qty=7 token=2
//
// Exit codes follow the fence CLI: 0 ok, 1 error, 2 usage, 3 busy (the lock
// is held, or the wait ran out), 4 refusal (stale token; an op_id reused for
// a different operation).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/guard/postgres"
)

// Exit codes, as the fence CLI's.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitBusy    = 3
	exitFencing = 4
)

type config struct {
	server, dsn       string
	table, guardTable string
	opsTable          string
	sku, owner, opID  string
	qty, add          int64
	setQty, addDelta  bool
	ttl, wait         time.Duration
	attempts          int
	pauseBeforeWrite  bool
	keys              string
	catalog           string // hold this lock shared beside the SKU's, as one set
	importAll         bool   // a full import: hold the catalog exclusive, write every SKU of --sku
}

func main() {
	os.Exit(run())
}

func run() int {
	var cfg config
	flag.StringVar(&cfg.server, "server", envOr("FENCE_SERVER", "http://127.0.0.1:7420"), "Fence server URL (env FENCE_SERVER)")
	flag.StringVar(&cfg.dsn, "postgres", envOr("FENCE_POSTGRES", "postgres://postgres@127.0.0.1:5432/test"), "PostgreSQL DSN (env FENCE_POSTGRES)")
	flag.StringVar(&cfg.table, "table", "stock", "the stock table (sku text primary key, qty bigint)")
	flag.StringVar(&cfg.guardTable, "guard-table", postgres.DefaultTable, "the guard table")
	flag.StringVar(&cfg.opsTable, "ops-table", postgres.DefaultOpsTable, "the op record table of idempotent operations")
	flag.StringVar(&cfg.sku, "sku", "sku-42", "the SKU whose stock this worker writes")
	flag.StringVar(&cfg.owner, "owner", "", "owner label of the lease (default hostname:pid)")
	flag.Int64Var(&cfg.qty, "qty", 0, "set the stock to this quantity")
	flag.Int64Var(&cfg.add, "add", 0, "add this delta to the stock (negative: a sale)")
	flag.StringVar(&cfg.opID, "op-id", "", "op_id: apply the write at most once (required with --attempts > 1)")
	flag.IntVar(&cfg.attempts, "attempts", 1, "send the same operation this many times, as a retry after a lost reply would")
	flag.DurationVar(&cfg.ttl, "ttl", 5*time.Second, "lease TTL")
	flag.DurationVar(&cfg.wait, "wait", 0, "queue for the lock up to this long (0: try once)")
	flag.BoolVar(&cfg.pauseBeforeWrite, "pause-before-write", false, "after acquiring, wait for a line on stdin before writing")
	flag.StringVar(&cfg.catalog, "catalog", "", "the catalog lock: a SKU worker holds it shared with its SKU's lock, as one set (docs/lock-boundaries.md)")
	flag.BoolVar(&cfg.importAll, "import", false, "a full import: hold --catalog exclusive and write every SKU of --sku (comma-separated)")
	flag.StringVar(&cfg.keys, "keys", "", "the Fence cluster's key set (`fence keys --json`): verify the lease's signed token before writing")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "qty":
			cfg.setQty = true
		case "add":
			cfg.addDelta = true
		}
	})
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "stock-worker:", err)
		flag.Usage()
		return exitUsage
	}

	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cfg.dsn)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	opts := postgres.Options{Table: cfg.guardTable, OpsTable: cfg.opsTable}
	if cfg.keys != "" {
		b, err := os.ReadFile(cfg.keys)
		if err != nil {
			return fail(err)
		}
		if opts.KeySet, err = fence.ParseKeySet(b); err != nil {
			return fail(fmt.Errorf("--keys %s: %w", cfg.keys, err))
		}
	}
	guard, err := postgres.New(opts)
	if err != nil {
		return fail(err)
	}
	store := &stock{pool: pool, guard: guard, table: cfg.table}
	if err := store.migrate(ctx); err != nil {
		return fail(err)
	}

	fc, err := client.New(cfg.server)
	if err != nil {
		return fail(err)
	}
	defer fc.Close()
	acq := []client.AcquireOption{client.TTL(cfg.ttl), client.Wait(cfg.wait)}
	if cfg.owner != "" {
		acq = append(acq, client.Owner(cfg.owner))
	}
	lock := "stock/" + cfg.sku
	var lease *client.Lease
	switch {
	case cfg.importAll: // the catalog pattern's import: the catalog alone, exclusive
		lock = cfg.catalog
		lease, err = fc.Acquire(ctx, lock, acq...)
	case cfg.catalog != "": // a SKU worker: the catalog shared and its SKU exclusive, one set
		lease, err = fc.AcquireSet(ctx, []fence.LockSpec{{Name: cfg.catalog, Mode: fence.Shared}, {Name: lock}}, acq...)
	default:
		lease, err = fc.Acquire(ctx, lock, acq...)
	}
	if err != nil {
		return fail(err)
	}
	defer lease.Release(context.WithoutCancel(ctx)) // refused if the lease was lost; nothing to do then
	fmt.Printf("acquired lock=%s token=%d ttl=%s\n", lock, lease.Token(), cfg.ttl)

	if cfg.pauseBeforeWrite {
		fmt.Fprintf(os.Stderr, "holding token %d; press Enter to write\n", lease.Token())
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fail(fmt.Errorf("waiting for Enter: %w", err))
		}
	}
	// An honest worker checks its lease here — and can still be paused right
	// after the check. The write below does not rely on it: the guard in the
	// transaction is what refuses a stale owner. We only report it.
	if lerr := lease.Err(); lerr != nil {
		fmt.Fprintf(os.Stderr, "note: the client already knows the lease is lost (%v); writing anyway to show the database refuse it\n", lerr)
	}

	for _, sku := range strings.Split(cfg.sku, ",") {
		one := cfg
		one.sku = sku
		// The proof of the SKU's own lock (a set's lease has one per
		// lock). The import's token is the catalog's: its writes carry
		// the catalog lease's proof.
		signed := lease.ProofFor("stock/" + sku)
		if cfg.importAll {
			signed = lease.SignedToken()
		}
		for i := 0; i < cfg.attempts; i++ {
			if code := store.apply(ctx, one, signed); code != exitOK {
				return code
			}
		}
	}
	return exitOK
}

func (c *config) validate() error {
	switch {
	case c.setQty == c.addDelta:
		return errors.New("give exactly one of --qty and --add")
	case c.attempts < 1:
		return fmt.Errorf("--attempts %d: must be at least 1", c.attempts)
	case c.attempts > 1 && c.opID == "":
		return errors.New("--attempts above 1 needs --op-id: without it every attempt applies")
	case c.importAll && c.catalog == "":
		return errors.New("--import needs --catalog: the import holds the catalog exclusive")
	case !c.importAll && strings.Contains(c.sku, ","):
		return errors.New("--sku names one SKU unless --import")
	}
	return nil
}

// fail prints err and returns the exit code for it.
func fail(err error) int {
	if r := fence.ReasonOf(err); r != "" {
		var stale *fence.StaleTokenError
		var forged *fence.ForgedTokenError
		switch {
		case errors.As(err, &stale):
			fmt.Printf("refused reason=%s token=%d last_accepted=%d (%v)\n", r, stale.Token, stale.LastAccepted, err)
		case errors.As(err, &forged):
			fmt.Printf("refused reason=%s token=%d why=%q (%v)\n", r, forged.Token, forged.Reason, err)
		default:
			fmt.Printf("refused reason=%s (%v)\n", r, err)
		}
		switch r {
		case fence.ReasonBusy:
			return exitBusy
		case fence.ReasonInvalid:
			return exitUsage
		case fence.ReasonStaleToken, fence.ReasonNotHolder, fence.ReasonLeaseExpired,
			fence.ReasonUnknownToken, fence.ReasonOpConflict, fence.ReasonForgedToken:
			return exitFencing
		}
		return exitError
	}
	fmt.Fprintln(os.Stderr, "stock-worker:", err)
	return exitError
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
