//go:build e2e

// Package phpstock holds the test of the PHP example in this directory
// (worker.php, lib/): it runs the example with Debian's php-cli, php-curl and
// php-mysql against a real `fence serve` process and the real MariaDB.
package phpstock

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	mysqlguard "github.com/fenceworks/fence/guard/mysql"
	"github.com/fenceworks/fence/testkit/harness"
	_ "github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBuilds()
	os.Exit(code)
}

// TestPHPWorkerStoryPause is the paused-worker story with PHP workers on MariaDB.
// The server first grants 98 leases of other locks, so that the workers'
// tokens are 99 and 100: the pair on which a comparison of strings is wrong.
//
//   - A takes the SKU's lease for 1 s and is frozen (SIGSTOP) before it writes.
//   - B queues for the lock and is granted it — A's lease has ended without a
//     release — and holds it (waiting on stdin before its write).
//   - C tries the lock: BUSY, with B as holder, B's token and Retry-After.
//   - B writes 8 and releases.
//   - A resumes (SIGCONT): it sees the lock's last token 100 > its 99 (ints),
//     writes anyway, and the guard in MariaDB refuses it (STALE_TOKEN, 99 <
//     100, exit 4); its release is refused with the reason and the last
//     token read from the Fence-Reason and Fence-Last-Token headers, without
//     protobuf. The stock is 8, the guard row 100.
//
// Then a sale of 1 (--add -1 --op-id sale-1) is sent twice by one worker, as
// a retry after a lost reply, and once more by a later worker with a newer
// token: applied once (stock 7, not 6 or 5), the repeats replayed; the op_id
// reused for a sale of 2 is refused (OP_CONFLICT, exit 4).
//
// Then the Go guard (guard/mysql) on the PHP's tables agrees: Check refuses
// 99, MaxToken (fence restore --floor-from mysql://) reads the last token,
// Do replays sale-1's result without calling its function and refuses the
// other payload, and an op Go's Do applied (sale-2) is replayed by a PHP
// worker's repeat; the tables the PHP created are the ones guard/mysql's
// Migrate creates.
func TestPHPWorkerStoryPause(t *testing.T) {
	php := requirePHP(t)
	db := testDB(t)
	suffix := randomSuffix(t)
	stockTable, guardTable, opsTable := "php_stock_"+suffix, "php_guard_"+suffix, "php_ops_"+suffix
	goGuardTable, goOpsTable := "php_goguard_"+suffix, "php_goops_"+suffix
	t.Cleanup(func() {
		for _, tbl := range []string{stockTable, guardTable, opsTable, goGuardTable, goOpsTable} {
			db.Exec("DROP TABLE IF EXISTS `" + tbl + "`")
		}
	})
	srv := harness.StartT(t, harness.Config{})
	warmUp(t, srv.URL(), 98)

	const sku = "sku-42"
	lockName := "stock/" + sku
	worker := func(name string, args ...string) *proc {
		args = append([]string{"worker.php", "--server", srv.URL(), "--dsn", phpDSN(t),
			"--stock-table", stockTable, "--guard-table", guardTable, "--ops-table", opsTable, "--sku", sku}, args...)
		return startProc(t, name, php, args...)
	}

	a := worker("worker A", "--owner", "worker-a", "--ttl", "1", "--qty", "5", "--pause-before-write")
	acq := a.expect("acquired")
	if acq["lock"] != lockName || acq["token"] != "99" || acq["owner"] != "worker-a" {
		t.Fatalf("worker A: %v, want lock=%s token=99 owner=worker-a", acq, lockName)
	}
	a.signal(syscall.SIGSTOP)

	b := worker("worker B", "--owner", "worker-b", "--ttl", "30", "--wait", "30", "--qty", "8", "--pause-before-write")
	if got := b.expect("acquired"); got["token"] != "100" {
		t.Fatalf("worker B: %v, want token=100 (granted once A's lease ended)", got)
	}

	c := worker("worker C", "--owner", "worker-c", "--qty", "1")
	busy := c.expect("busy")
	if busy["holder"] != "worker-b" || busy["holder_token"] != "100" {
		t.Fatalf("worker C's try: %v, want busy holder=worker-b holder_token=100", busy)
	}
	if n, err := strconv.Atoi(busy["retry_after"]); err != nil || n < 1 || n > 30 {
		t.Fatalf("worker C's try: retry_after=%q, want whole seconds 1..30 (B's 30 s lease, rounded up)", busy["retry_after"])
	}
	c.wait(3)

	b.send("")
	if got := b.expect("written"); got["qty"] != "8" || got["token"] != "100" {
		t.Fatalf("worker B: %v, want written qty=8 token=100", got)
	}
	b.expect("released")
	b.wait(0)

	a.signal(syscall.SIGCONT)
	a.send("")
	if got := a.expect("note"); got["lease_lost"] != "true" || got["last_token"] != "100" || got["mine"] != "99" {
		t.Fatalf("worker A after SIGCONT: %v, want note lease_lost=true last_token=100 mine=99", got)
	}
	if got := a.expect("refused"); got["reason"] != "STALE_TOKEN" || got["token"] != "99" || got["last_accepted"] != "100" {
		t.Fatalf("worker A's late write: %v, want refused reason=STALE_TOKEN token=99 last_accepted=100", got)
	}
	if got := a.expect("release_refused"); got["reason"] != "STALE_TOKEN" || got["last_token"] != "100" {
		t.Fatalf("worker A's release: %v, want release_refused reason=STALE_TOKEN last_token=100", got)
	}
	a.wait(4)

	stockRow := func() (qty int, last int64) {
		t.Helper()
		if err := db.QueryRow("SELECT qty FROM `"+stockTable+"` WHERE sku = ?", sku).Scan(&qty); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT last_token FROM `"+guardTable+"` WHERE resource = ?", lockName).Scan(&last); err != nil {
			t.Fatal(err)
		}
		return qty, last
	}
	if qty, last := stockRow(); qty != 8 || last != 100 {
		t.Fatalf("after A's late write: stock %d, guard last_token %d; want 8 and 100", qty, last)
	}

	// A sale of 1, retried with the same op_id by the same worker and token,
	// then by a later worker.
	retry := worker("worker B retry", "--owner", "worker-b", "--ttl", "30", "--wait", "30",
		"--add", "-1", "--op-id", "sale-1", "--attempts", "2")
	if got := retry.expect("acquired"); got["token"] != "101" {
		t.Fatalf("retrying worker: %v, want token=101", got)
	}
	for _, want := range []string{"applied", "replayed"} {
		if got := retry.expect(want); got["op_id"] != "sale-1" || got["qty"] != "7" || got["token"] != "101" {
			t.Fatalf("retrying worker: %v, want %s op_id=sale-1 qty=7 token=101", got, want)
		}
	}
	retry.expect("released")
	retry.wait(0)
	later := worker("later worker", "--owner", "worker-c", "--ttl", "30", "--wait", "30", "--add", "-1", "--op-id", "sale-1")
	later.expect("acquired")
	if got := later.expect("replayed"); got["qty"] != "7" || got["token"] != "102" {
		t.Fatalf("later worker: %v, want replayed qty=7 token=102", got)
	}
	later.expect("released")
	later.wait(0)
	conflict := worker("conflicting worker", "--owner", "worker-c", "--ttl", "30", "--wait", "30", "--add", "-2", "--op-id", "sale-1")
	conflict.expect("acquired")
	if got := conflict.expect("refused"); got["reason"] != "OP_CONFLICT" || got["op_id"] != "sale-1" {
		t.Fatalf("op_id sale-1 reused for a sale of 2: %v, want refused reason=OP_CONFLICT op_id=sale-1", got)
	}
	conflict.expect("released")
	conflict.wait(4)
	// A replay or a refusal rolls back the token's advance with everything else.
	if qty, last := stockRow(); qty != 7 || last != 101 {
		t.Fatalf("after the sale and its repeats: stock %d, guard last_token %d; want 7 (applied once) and 101 (the applying worker's)", qty, last)
	}

	// The Go guard on the PHP's tables.
	ctx := context.Background()
	g, err := mysqlguard.New(mysqlguard.Options{Table: guardTable, OpsTable: opsTable})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleTokenError
	if err := g.Check(ctx, tx, lockName, 99); !errors.As(err, &stale) || stale.LastAccepted != 101 {
		t.Fatalf("guard/mysql Check of token 99 on the PHP's table: %v, want a stale token error with last accepted 101", err)
	}
	tx.Rollback()
	if max, err := g.MaxToken(ctx, db); err != nil || max != 101 {
		t.Fatalf("guard/mysql MaxToken of the PHP's table: %d, %v; want 101", max, err)
	}
	sale := mysqlguard.Op{Resource: lockName, Token: 99, ID: "sale-1", Payload: []byte("sku=" + sku + " add=-1")}
	result, replayed, err := g.Do(ctx, db, sale, func(*sql.Tx) ([]byte, error) {
		t.Error("guard/mysql Do applied sale-1 again")
		return nil, nil
	})
	if err != nil || !replayed || string(result) != "7" {
		t.Fatalf("guard/mysql Do of the PHP's sale-1: %q, replayed %v, %v; want \"7\" replayed", result, replayed, err)
	}
	sale.Payload = []byte("sku=" + sku + " add=-2")
	var conflictErr *fence.OpConflictError
	if _, _, err := g.Do(ctx, db, sale, func(*sql.Tx) ([]byte, error) { return nil, nil }); !errors.As(err, &conflictErr) {
		t.Fatalf("guard/mysql Do of sale-1 with another payload: %v, want an op conflict", err)
	}
	goGuard, err := mysqlguard.New(mysqlguard.Options{Table: goGuardTable, OpsTable: goOpsTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := goGuard.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	// And the other way round: an op Go applied, which a PHP worker's repeat replays.
	sale = mysqlguard.Op{Resource: lockName, Token: 101, ID: "sale-2", Payload: []byte("sku=" + sku + " add=-1")}
	result, replayed, err = g.Do(ctx, db, sale, func(tx *sql.Tx) ([]byte, error) {
		if _, err := tx.ExecContext(ctx, "UPDATE `"+stockTable+"` SET qty = qty - 1 WHERE sku = ?", sku); err != nil {
			return nil, err
		}
		return []byte("6"), nil
	})
	if err != nil || replayed || string(result) != "6" {
		t.Fatalf("guard/mysql Do of sale-2: %q, replayed %v, %v; want \"6\" applied", result, replayed, err)
	}
	repeat := worker("PHP repeat of Go's sale-2", "--owner", "worker-c", "--ttl", "30", "--wait", "30", "--add", "-1", "--op-id", "sale-2")
	repeat.expect("acquired")
	if got := repeat.expect("replayed"); got["qty"] != "6" {
		t.Fatalf("PHP repeat of Go's sale-2: %v, want replayed qty=6", got)
	}
	repeat.expect("released")
	repeat.wait(0)
	if qty, _ := stockRow(); qty != 6 {
		t.Fatalf("after sale-2 and its PHP repeat: stock %d, want 6", qty)
	}

	for _, pair := range [][2]string{{guardTable, goGuardTable}, {opsTable, goOpsTable}} {
		if php, goDDL := showCreate(t, db, pair[0]), showCreate(t, db, pair[1]); php != goDDL {
			t.Fatalf("the PHP's table differs from guard/mysql's:\n%s\n---\n%s", php, goDDL)
		}
	}
}

// TestPHPWorkerSnapshotIsolationRetry: MariaDB 11.8 turns
// innodb_snapshot_isolation on by default; the worker's session turns it on
// here (--init-sql). Worker A reads the stock first in its transaction
// (--read-first, the Bitrix flow: read the product, then guard + write) and
// pauses there holding that REPEATABLE READ snapshot; worker B, whose older
// lease ended while it paused before its transaction, then writes with its
// older token (accepted: nothing newer reached the guard yet). A's check of
// its NEWER token then meets error 1020 ("record has changed since last
// read"): FenceGuard::check throws RetryableException, and the worker rolls
// back and runs the transaction again — read, check, write — and writes.
// Without the mapping A would end with a raw PDOException (exit 1); without
// the retry, exit 1 too.
func TestPHPWorkerSnapshotIsolationRetry(t *testing.T) {
	php := requirePHP(t)
	db := testDB(t)
	var v string
	if err := db.QueryRow("SELECT @@innodb_snapshot_isolation").Scan(&v); err != nil {
		unavailable(t, "MariaDB with innodb_snapshot_isolation (10.6.18+, 10.11.8+, 11.x): %v", err)
	}
	suffix := randomSuffix(t)
	stockTable, guardTable, opsTable := "php_stock_"+suffix, "php_guard_"+suffix, "php_ops_"+suffix
	t.Cleanup(func() {
		for _, tbl := range []string{stockTable, guardTable, opsTable} {
			db.Exec("DROP TABLE IF EXISTS `" + tbl + "`")
		}
	})
	srv := harness.StartT(t, harness.Config{})
	const sku = "sku-7"
	lockName := "stock/" + sku
	worker := func(name string, args ...string) *proc {
		args = append([]string{"worker.php", "--server", srv.URL(), "--dsn", phpDSN(t),
			"--stock-table", stockTable, "--guard-table", guardTable, "--ops-table", opsTable, "--sku", sku}, args...)
		return startProc(t, name, php, args...)
	}
	tok := func(m map[string]string) int {
		t.Helper()
		n, err := strconv.Atoi(m["token"])
		if err != nil {
			t.Fatalf("token in %v: %v", m, err)
		}
		return n
	}

	// The rows exist, as in a running shop.
	first := worker("first worker", "--owner", "worker-0", "--qty", "1")
	t0 := tok(first.expect("acquired"))
	first.expect("written")
	first.expect("released")
	first.wait(0)

	b := worker("worker B", "--owner", "worker-b", "--ttl", "1", "--qty", "5", "--pause-before-write")
	tb := tok(b.expect("acquired"))
	a := worker("worker A", "--owner", "worker-a", "--ttl", "30", "--wait", "30", "--qty", "8",
		"--read-first", "--pause-before-write", "--init-sql", "SET SESSION innodb_snapshot_isolation=ON")
	ta := tok(a.expect("acquired")) // once B's 1 s lease ended
	if !(t0 < tb && tb < ta) {
		t.Fatalf("tokens %d, %d, %d: want increasing", t0, tb, ta)
	}
	if got := a.expect("read"); got["qty"] != "1" || got["try"] != "1" {
		t.Fatalf("worker A: %v, want read qty=1 try=1", got)
	}

	b.send("")
	b.expect("note") // lease_lost: A's newer grant
	if got := b.expect("written"); got["qty"] != "5" || tok(got) != tb {
		t.Fatalf("worker B: %v, want written qty=5 token=%d (nothing newer reached the guard yet)", got, tb)
	}
	b.expect("release_refused")
	b.wait(0)

	a.send("")
	if got := a.expect("retry"); got["mysql_error"] != "1020" || got["try"] != "1" {
		t.Fatalf("worker A's check of its newer token %d: %v, want retry mysql_error=1020 try=1", ta, got)
	}
	if got := a.expect("read"); got["qty"] != "5" || got["try"] != "2" {
		t.Fatalf("worker A's second run: %v, want read qty=5 try=2 (B's write)", got)
	}
	if got := a.expect("written"); got["qty"] != "8" || tok(got) != ta {
		t.Fatalf("worker A's second run: %v, want written qty=8 token=%d", got, ta)
	}
	a.expect("released")
	a.wait(0)

	var qty int
	var last int64
	if err := db.QueryRow("SELECT qty FROM `"+stockTable+"` WHERE sku = ?", sku).Scan(&qty); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT last_token FROM `"+guardTable+"` WHERE resource = ?", lockName).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if qty != 8 || last != int64(ta) {
		t.Fatalf("stock %d, guard last_token %d; want 8 and %d", qty, last, ta)
	}
}

// requirePHP returns the php binary, or skips loudly (fails under CI=true,
// where .ci/run installs it) when php or its curl, pdo_mysql or sodium
// (built into Debian's php-cli) is missing.
func requirePHP(t *testing.T) string {
	t.Helper()
	php, err := exec.LookPath("php")
	if err == nil {
		out, cerr := exec.Command(php, "-r", `foreach (["curl", "pdo_mysql", "sodium"] as $e) if (!extension_loaded($e)) { echo $e; exit(1); }`).CombinedOutput()
		if cerr != nil {
			err = fmt.Errorf("php extension %s missing (%v)", out, cerr)
		}
	}
	if err != nil {
		unavailable(t, "php-cli, php-curl and php-mysql (apt-get install php-cli php-curl php-mysql): %v", err)
	}
	return php
}

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and unavailable: "+format, args...)
	}
	t.Skipf("!!! SKIPPING — unavailable (set CI=true to make this fail): "+format, args...)
}

// testDSN is FENCE_TEST_MYSQL (a go-sql-driver DSN) or the local MariaDB.
func testDSN() string {
	if dsn := os.Getenv("FENCE_TEST_MYSQL"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

func testDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testDSN())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		unavailable(t, "MySQL/MariaDB at %s (FENCE_TEST_MYSQL): %v", testDSN(), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// phpDSN is the test database as PDO's DSN (its user and password are the
// worker's --user/--password; root with no password here).
func phpDSN(t *testing.T) string {
	t.Helper()
	if os.Getenv("FENCE_TEST_MYSQL") != "" {
		t.Skip("FENCE_TEST_MYSQL is set: the PHP worker is run against the local MariaDB only")
	}
	return "mysql:host=127.0.0.1;port=3306;dbname=test;charset=utf8mb4"
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func showCreate(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE `"+table+"`").Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(ddl, table, "T") // the table's name and its index's
}

// warmUp has the server grant n leases of other locks, one at a time.
func warmUp(t *testing.T, url string, n int) {
	t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"name":"warm-up/%d","owner":"test","ttl":"60s"}`, i)
		resp, err := http.Post(url+"/fence.v1.LockService/Acquire", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("warm-up acquire %d: %d %s", i, resp.StatusCode, out)
		}
	}
}

// proc is a PHP worker process: its stdout read line by line, its stdin
// written by send.
type proc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}

	mu     sync.Mutex
	stderr strings.Builder
	seen   []string
}

func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = "." // the test runs in examples/php-stock
	p.cmd.Stderr = (*lockedWriter)(p)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s (%s): stdout so far %q, stderr %q", p.name, strings.Join(args, " "), p.seen, p.stderr.String())
			p.mu.Unlock()
		}
	})
	return p
}

type lockedWriter proc

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderr.Write(b)
}

// guard bounds every wait for the process so that a hang fails the test
// with what was seen instead of the package's timeout; it is not what the
// test measures.
const guard = 2 * time.Minute

// expect reads the next line, which must start with word, and returns its
// key=value fields (a parenthesised message at the end is left out).
func (p *proc) expect(word string) map[string]string {
	p.t.Helper()
	var line string
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%s: output ended, want a %q line", p.name, word)
		}
		line = l
	case <-time.After(guard):
		p.t.Fatalf("%s: no line in %v, want a %q line", p.name, guard, word)
	}
	p.mu.Lock()
	p.seen = append(p.seen, line)
	p.mu.Unlock()
	if i := strings.Index(line, " ("); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != word {
		p.t.Fatalf("%s: %q, want a %q line", p.name, line, word)
	}
	kv := map[string]string{}
	for _, s := range f[1:] {
		k, v, _ := strings.Cut(s, "=")
		kv[k] = v
	}
	return kv
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("%s: writing to stdin: %v", p.name, err)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: %v: %v", p.name, sig, err)
	}
}

// wait waits for the process to exit with code want, after the lines it
// still prints (none expected).
func (p *proc) wait(want int) {
	p.t.Helper()
	var extra []string
	deadline := time.After(guard)
	for open := true; open; {
		select {
		case l, ok := <-p.lines:
			if open = ok; ok {
				extra = append(extra, l)
			}
		case <-deadline:
			p.t.Fatalf("%s: still running after %v, want exit code %d", p.name, guard, want)
		}
	}
	err := p.cmd.Wait()
	close(p.done)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	if code != want || len(extra) > 0 {
		p.t.Fatalf("%s: exit code %d, more output %q; want exit code %d and no more output", p.name, code, extra, want)
	}
}
