//go:build e2e

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenceworks/fence/backup"
	redisguard "github.com/fenceworks/fence/guard/redis"
	"github.com/fenceworks/fence/guard/sqlite"
	"github.com/fenceworks/fence/state"
)

// backupFile writes a backup of a small state (last token 3) taken at
// wall time wall, and returns its path. (The system tests take real ones
// with fence backup; these tests are about the command's arguments and
// report.)
func backupFile(t *testing.T, wall time.Time) string {
	t.Helper()
	m := state.NewWithConfig(state.DefaultConfig())
	for _, c := range []state.Command{
		{Op: state.OpConfig, Config: state.DefaultConfig(), ClusterID: "cli-test"},
		{Op: state.OpAcquire, Name: "a", Owner: "o", TTL: time.Hour},
		{Op: state.OpAcquire, Name: "b", Owner: "o", TTL: time.Hour},
		{Op: state.OpAcquire, Name: "c", Owner: "o", TTL: time.Hour},
	} {
		c.Now = int64(time.Second)
		if r := m.Apply(c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var b bytes.Buffer
	h := backup.Header{ClusterID: m.ClusterID(), NodeID: "n1", Role: "leader", AppliedIndex: 9, Term: 2,
		LastToken: m.LastToken(), ServerTimeNS: m.Now(), WallUnixMS: wall.UnixMilli(), Version: "test"}
	if err := backup.Write(&b, h, m.SnapshotView()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.fence")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runRestore(args ...string) (code int, stdout, stderr string) {
	return runCLI(append([]string{"restore"}, args...)...)
}

// Bad arguments are usage errors (exit 2) that name the flag and bound,
// found before anything is read or written.
func TestRestoreUsage(t *testing.T) {
	file := backupFile(t, time.Now())
	dir := filepath.Join(t.TempDir(), "new")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "FILE"},
		{[]string{file}, "--data-dir is required"},
		{[]string{file, "--data-dir", dir, "--floor", "0"}, "want a token from 1 to 9007199254740991"},
		{[]string{file, "--data-dir", dir, "--floor", "12x"}, "want a token"},
		{[]string{file, "--data-dir", dir, "--floor", "9007199254740992"}, "want a token"},
		{[]string{file, "--data-dir", dir, "--log-store", "rocks"}, "--log-store"},
		{[]string{file, "--data-dir", dir, "--node-id", "a b"}, "--node-id"},
		{[]string{file, "--data-dir", dir, "--raft-addr", "0.0.0.0:7000"}, "--raft-addr"},
		{[]string{file, "--data-dir", dir, "--raft-addr", "host-without-port"}, "--raft-addr"},
		{[]string{file, "--data-dir", dir, "--floor-from", "guard.db"}, "floor-from"},
		{[]string{file, "--data-dir", dir, "--floor-from", "postgres://u:s3cret@db/x?table=bad%3Bname"}, "table"},
		{[]string{file, "--data-dir", dir, "--floor-from", "oracle://u:s3cret@db/x"}, "floor-from"},
		{[]string{file, "extra", "--data-dir", dir}, "want 1 argument"},
		{[]string{"-", "--data-dir", dir}, "fence restore reads FILE twice (it checks the whole file before writing anything): save the stream to a file first, e.g. fence backup - > f"},
	} {
		code, out, errs := runRestore(tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || strings.Contains(errs+out, "s3cret") {
			t.Errorf("restore %q: exit %d, stderr %q; want exit 2 naming %q (and no password)", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("restore %q created %s", tc.args, dir)
		}
	}
	t.Setenv(envClockOffset, "yesterday")
	if code, _, errs := runRestore(file, "--data-dir", dir); code != exitUsage || !strings.Contains(errs, envClockOffset) {
		t.Errorf("bad %s: exit %d, %q", envClockOffset, code, errs)
	}
	if code, out, _ := runRestore("--help"); code != 0 || !strings.Contains(out, "--floor-from") || !strings.Contains(out, "unix_ms(now) × 1024") {
		t.Errorf("restore --help: exit %d\n%s", code, out)
	}
	if _, out, _ := runCLI("--help"); !strings.Contains(out, "restore FILE --data-dir DIR") {
		t.Errorf("fence --help does not list restore:\n%s", out)
	}
}

// Floors from a SQLite and a Redis guard store and --floor go into one
// restore: the report lists each (the store with its table or prefix,
// password redacted), the wall clock's, and the first token above the
// largest; --json says the same in numbers. A store that is unreachable or
// holds no token fails the restore before anything is written.
func TestRestoreFloorsReport(t *testing.T) {
	ctx := context.Background()
	file := backupFile(t, time.Now().Add(-time.Minute))

	// SQLite guard store that accepted token W+500, W the wall floor now:
	// it decides the first token.
	dbPath := filepath.Join(t.TempDir(), "guard.db")
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	big := backup.WallFloor(time.Now()) + 500_000_000 // about 5 days of wall floor ahead
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlite.Check(ctx, tx, "r", big); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// Redis guard store with a smaller token.
	addr := os.Getenv("FENCE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(addr, "redis://")})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		storeUnavailable(t, "Redis at %s (FENCE_TEST_REDIS): %v", addr, err)
	}
	prefix := "restoretest." + randName()
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
	if _, err := g.Set(ctx, "r", 1234, []byte("v"), "op"); err != nil {
		t.Fatal(err)
	}
	// An unreachable store fails the restore; its password is not shown.
	code, out, errs := runRestore(file, "--data-dir", filepath.Join(t.TempDir(), "x"), "--timeout", "5s",
		"--floor-from", "redis://:pw-s3cret@127.0.0.1:1/0?prefix="+prefix)
	if code != exitError || strings.Contains(out+errs, "pw-s3cret") || !strings.Contains(errs, "nothing was written") {
		t.Errorf("restore --floor-from an unreachable Redis: exit %d, stderr %q; want exit 1, password redacted", code, errs)
	}
	redisDSN := "redis://" + strings.TrimPrefix(addr, "redis://") + "/0?prefix=" + prefix

	// A mistyped prefix: nothing found, an error, nothing written.
	dir := filepath.Join(t.TempDir(), "restored")
	code, _, errs = runRestore(file, "--data-dir", dir, "--floor-from", redisDSN+"x", "--floor-from", "sqlite:"+dbPath)
	if code != exitError || !strings.Contains(errs, "no tokens found in key prefix \""+prefix+"x\"") {
		t.Errorf("restore --floor-from a mistyped prefix: exit %d, stderr %q; want exit 1, no tokens found", code, errs)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("the failed restore created %s", dir)
	}

	code, out, errs = runRestore(file, "--data-dir", dir, "--floor", "99", "--floor-from", redisDSN, "--floor-from", "sqlite:"+dbPath)
	if code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"old counter:  3", "--floor", "99", "?prefix=" + prefix, "1234",
		`sqlite:` + dbPath + ` (table "fence_guard")`, big.String(), "wall-clock",
		"first token:  " + (big + 1).String() + " (sqlite:" + dbPath + ` (table "fence_guard") + 1)`,
		"start it:     fence serve --data-dir " + dir,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The data dir holds what fence serve opens, and the RESTORED marker.
	if _, err := os.Stat(filepath.Join(dir, backup.RestoredFile)); err != nil {
		t.Errorf("restored dir: %v", err)
	}

	code, out, _ = runRestore(file, "--data-dir", filepath.Join(t.TempDir(), "j"), "--json", "--floor", "99",
		"--node-id", "n7", "--raft-addr", "10.0.0.7:7000")
	var rep struct {
		OldCounter uint64 `json:"oldCounter"`
		FirstToken uint64 `json:"firstToken"`
		Chosen     string `json:"chosen"`
		NodeID     string `json:"nodeId"`
		RaftAddr   string `json:"raftAddr"`
		Floors     []struct {
			Source string `json:"source"`
			Token  uint64 `json:"token"`
		} `json:"floors"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("restore --json: exit %d %q", code, out)
	}
	if rep.OldCounter != 3 || rep.Chosen != "wall-clock" || len(rep.Floors) != 3 || rep.FirstToken != rep.Floors[2].Token+1 ||
		rep.NodeID != "n7" || rep.RaftAddr != "10.0.0.7:7000" {
		t.Errorf("restore --json: %+v", rep)
	}
}

// An unreadable or missing backup file is an error (1), not a refusal.
func TestRestoreMissingFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	code, _, errs := runRestore(filepath.Join(t.TempDir(), "nope.fence"), "--data-dir", dir)
	if code != exitError || !strings.Contains(errs, "no such file") {
		t.Errorf("missing file: exit %d %q", code, errs)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("created %s", dir)
	}
}
