package backup

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// A restore keeps the backup's keys public-only (a proof made before the
// backup still verifies under the restored key set, which lists the old
// cluster id as restored_from, but the restored store holds none of their
// seeds: a staging cluster restored from production cannot sign what
// production's guards accept) and signs from then on with a fresh key:
// every grant, also of a lease carried over, is signed by it under the new
// cluster id, which the backed-up cluster's key set refuses. The carried-
// over lease stays counted on its old key, so a retire of that key waits
// for it. A second restore of the same backup draws another key.
func TestRestoreAddsAFreshSigningKey(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()
	before, err := n.Service().Acquire(ctx, fence.AcquireRequest{Name: "held", Owner: "a", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	oldSet := n.KeySet()
	file := filepath.Join(t.TempDir(), "b.fence")
	takeBackup(t, n, file)
	n.Close()

	oldKey := oldSet.Keys[0].ID
	restore := func(name string) (Report, *fence.KeySet, fence.LockInfo, fence.Grant) {
		dir := filepath.Join(t.TempDir(), name)
		rep, err := Restore(ctx, file, RestoreOptions{DataDir: dir, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		r := openNode(t, dir)
		li, err := r.Service().Get(ctx, "held")
		if err != nil || li.Lease == nil {
			t.Fatalf("held after the restore: %+v, %v", li, err)
		}
		g, err := r.Service().Acquire(ctx, fence.AcquireRequest{Name: "new", Owner: "b", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ks := r.KeySet()
		for _, k := range r.SigningKeys() {
			if k.PublicOnly != (k.ID == oldKey) {
				t.Fatalf("restored key %s: public-only %v (the old key must have no seed, the fresh one must)", k.ID, k.PublicOnly)
			}
			if k.ID == oldKey && k.Leases != 1 {
				t.Fatalf("the old key counts %d live leases after the restore, want 1 (held keeps its key)", k.Leases)
			}
		}
		if _, err := r.RetireKey(ctx, oldKey, false); err != nil {
			t.Fatal(err)
		}
		if ks := r.KeySet(); len(ks.Keys) != 2 {
			t.Fatalf("retiring the old key with a live lease dropped it: %+v", ks.Keys)
		}
		r.Close()
		return rep, ks, li, g
	}
	rep, ks, li, g := restore("r1")
	if rep.SigningKey == "" || ks.ClusterID != rep.ClusterID || !slices.Equal(ks.RestoredFrom, []string{oldSet.ClusterID}) || len(ks.Keys) != 2 {
		t.Fatalf("restored key set %+v (report %+v), want the old key, the fresh one, restored_from %s", ks, rep, oldSet.ClusterID)
	}
	if err := ks.Verify(before.Lease.Signed, "held"); err != nil {
		t.Fatalf("a proof made before the backup, under the restored key set: %v", err)
	}
	for what, l := range map[string]fence.Lease{"carried-over lease": *li.Lease, "new grant": g.Lease} {
		if l.Signed.KeyID != rep.SigningKey || l.Signed.ClusterID != rep.ClusterID {
			t.Fatalf("%s signed by %s under %s, want the fresh key %s under %s", what, l.Signed.KeyID, l.Signed.ClusterID, rep.SigningKey, rep.ClusterID)
		}
		if err := ks.Verify(l.Signed, l.Name); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := oldSet.Verify(l.Signed, l.Name); err == nil {
			t.Fatalf("%s of the restored cluster verifies under the backed-up cluster's key set", what)
		}
	}
	rep2, ks2, _, _ := restore("r2")
	if rep2.SigningKey == rep.SigningKey || ks2.ClusterID == ks.ClusterID {
		t.Fatalf("two restores of one backup sign alike: key %s, cluster %s", rep2.SigningKey, ks2.ClusterID)
	}
	if err := ks2.Verify(g.Lease.Signed, "new"); err == nil {
		t.Fatal("the first restored cluster's proof verifies under the second's key set")
	}
}
