//go:build e2e

package chaos

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/testutil"
)

// forgerRounds runs rounds of the forger against a real server and a real
// PostgreSQL guard (with the server's key set, or none) and judges them.
func forgerRounds(t *testing.T, fenceBin, dsn string, withKeys bool, rounds int) (forgeryReport, []Op) {
	t.Helper()
	url := startFence(t, fenceBin)
	prefix := testPrefix(t, dsn, 1)
	cfg := ForgerConfig{Server: url, PostgresDSN: dsn, PGPrefix: prefix, Seed: 7,
		History: filepath.Join(t.TempDir(), "history-forger.jsonl")}
	if withKeys {
		cfg.Keys = newKeyCache([]string{url}, nil, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := newForger(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rounds; i++ {
		if err := f.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.close()
	file, err := os.Open(cfg.History)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ops, err := ReadHistory(file)
	if err != nil {
		t.Fatal(err)
	}
	return checkForgeries(ops, 0), ops
}

// G9: the forger at a guard that holds the cluster's key set: every forgery
// (a made-up 2^53-1, a proof by its own key, a real proof with the number
// changed, another lock's real proof, another cluster's proof) is refused
// as FORGED_TOKEN with the stored tokens unchanged, and its own signed
// token is accepted every round. At a guard without keys (the control)
// every kind of forgery is accepted: the checker sees them.
func TestForgerRefusedWithKeysAcceptedWithout(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	fenceBin, _ := buildWorkerBins(t, t.TempDir())
	const rounds = 3

	t.Run("guard with the key set", func(t *testing.T) {
		r, ops := forgerRounds(t, fenceBin, dsn, true, rounds)
		if r.accepted != 0 || r.changed != 0 || r.misrefused != 0 || r.honestRefused != 0 || len(r.untried) != 0 {
			t.Fatalf("forgeries at a guard with keys: %+v\n%v\nhistory: %+v", r, r.problems, ops)
		}
		if r.honestOK != rounds || r.forgeries != rounds*len(ForgeKinds) {
			t.Fatalf("%d honest writes accepted, %d forgeries judged; want %d and %d: %+v", r.honestOK, r.forgeries, rounds, rounds*len(ForgeKinds), ops)
		}
		for _, o := range ops {
			if o.Forge != ForgeHonest && (o.Before == nil || o.Before.Guard == uint64(0) && o.Res != forgeMax) {
				t.Errorf("forgery %s at %s met no honest token in the guard row: %+v", o.Forge, o.Res, o.Before)
			}
		}
	})
	t.Run("guard without keys (control)", func(t *testing.T) {
		r, ops := forgerRounds(t, fenceBin, dsn, false, rounds)
		for _, k := range ForgeKinds {
			if r.acceptedBy[k] == 0 {
				t.Errorf("forgery %s never accepted by a guard without keys: the checker cannot be shown seeing it", k)
			}
		}
		if r.accepted == 0 || r.changed != 0 || r.honestRefused != 0 || len(r.untried) != 0 {
			t.Fatalf("control: %+v\n%v\nhistory: %+v", r, r.problems, ops)
		}
		if !slices.ContainsFunc(ops, func(o Op) bool { return o.Res == forgeMax && o.After != nil && o.After.Guard == 1<<53-1 }) {
			t.Errorf("control: 2^53-1 never stored at %s: %+v", forgeMax, ops)
		}
	})
}
