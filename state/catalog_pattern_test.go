package state

import (
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The catalog pattern (docs/lock-boundaries.md): an SKU worker holds
// catalog shared and sku/N exclusive as one set; a full import holds
// catalog exclusive. Two SKU workers run side by side; the import waits
// for both, and SKU workers that come after it wait for it. A worker
// paused across the import wakes with a token older than the import's, so
// the store refuses its write.
func TestCatalogPattern(t *testing.T) {
	m := New()
	w1 := mustGrant(t, m, setAcq(0, "sku-worker-1", time.Second, 0, "", sharedSpec("catalog"), spec("sku/1")), 1)
	mustGrant(t, m, setAcq(0, "sku-worker-2", time.Second, 0, "", sharedSpec("catalog"), spec("sku/2")), 2)
	// The same SKU is exclusive: a second worker on sku/1 is busy.
	if r := m.Apply(setAcq(0, "sku-worker-3", time.Second, 0, "", sharedSpec("catalog"), spec("sku/1"))); !errorsIsBusy(r.Err) {
		t.Fatalf("two workers on sku/1: %s", describe(r))
	}
	mustOK(t, m, write(0, "sku/1", w1.Token, "stock=5", ""))
	// The import queues behind the readers; a later SKU worker queues
	// behind the import (no writer starvation).
	if r := mustOK(t, m, waitAcq(at(0.1), "catalog", "import", 5*time.Second, time.Minute, "import")); !r.Queued {
		t.Fatalf("import: %s", describe(r))
	}
	if r := mustOK(t, m, setAcq(at(0.1), "sku-worker-4", time.Second, time.Minute, "w4", sharedSpec("catalog"), spec("sku/4"))); !r.Queued {
		t.Fatalf("a worker passed the waiting import: %s", describe(r))
	}
	// Worker 1 pauses (no renew, no release); worker 2 releases. When
	// worker 1's lease expires the import gets the catalog.
	mustOK(t, m, rel(at(0.2), "catalog", 2))
	r := mustOK(t, m, tick(at(1)))
	var imp *fence.Lease
	for _, e := range r.Events {
		if e.RequestID == "import" {
			imp = e.Lease
		}
	}
	if imp == nil || imp.Token <= w1.Token {
		t.Fatalf("after worker 1 expired: %s, want the import granted a larger token", describe(r))
	}
	mustOK(t, m, write(at(1.1), "sku/1", imp.Token, "stock=0 (import)", ""))
	// Worker 1 wakes and writes with its old token: refused by the store.
	r = m.Apply(write(at(1.2), "sku/1", w1.Token, "stock=4", ""))
	if e := errAs[*fence.StaleTokenError](t, r.Err); e.Token != w1.Token || e.LastAccepted != imp.Token {
		t.Fatalf("paused worker's write: %v, want stale %d < %d", r.Err, w1.Token, imp.Token)
	}
	// The import ends: worker 4 gets catalog shared and sku/4.
	r = mustOK(t, m, rel(at(1.3), "catalog", imp.Token))
	if len(r.Events) != 1 || r.Events[0].RequestID != "w4" || len(r.Events[0].Lease.Locks) != 2 {
		t.Fatalf("import released: %s, want worker 4 granted its set", describe(r))
	}
}
