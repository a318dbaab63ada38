//go:build e2e

package system_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// The catalog pattern (docs/lock-boundaries.md) with real processes and a
// real PostgreSQL guard: SKU worker A holds the catalog shared and
// stock/sku-1 exclusive as one set, with a 1s lease, and is frozen with
// SIGSTOP in its write window. SKU worker B, on another SKU, runs beside it
// (both hold the catalog shared). A full import queues for the catalog
// exclusive (seen queued while A's lease runs: the catalog excludes it),
// is granted once A's lease has expired, with a larger token,
// and writes every SKU. A resumes and writes: PostgreSQL's guard refuses
// it (STALE_TOKEN, the import's token as the last accepted) and the row
// keeps the import's quantity.
func TestCatalogPatternPausedWorker(t *testing.T) {
	conn, url, stockTable, guardTable, worker := stockWorkers(t, "--catalog", "catalog")

	// A's lease runs 5s: time enough to see the import queued behind it.
	a := worker("SKU worker A", "--sku", "sku-1", "--owner", "worker-a", "--ttl", "5s", "--qty", "5", "--pause-before-write")
	tokenA := fieldUint(t, a.Line(), "token")
	a.Signal(syscall.SIGSTOP)

	b := worker("SKU worker B", "--sku", "sku-2", "--owner", "worker-b", "--ttl", "30s", "--qty", "3")
	b.Line() // acquired: the catalog shared beside A
	if line := b.Line(); !strings.HasPrefix(line, "written ") || field(t, line, "qty") != "3" {
		t.Fatalf("SKU worker B beside A: %q, want written qty=3", line)
	}
	if code := b.Wait(); code != 0 {
		t.Fatalf("SKU worker B exit code %d", code)
	}

	imp := worker("import", "--import", "--sku", "sku-1,sku-2", "--owner", "import", "--ttl", "30s", "--wait", "60s", "--qty", "100")
	fc, err := client.New(url, client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	untilT(t, "the import queued behind A's shared hold of the catalog", func() bool {
		li, err := fc.Get(context.Background(), "catalog")
		return err == nil && li.Waiters == 1 && len(li.Holders) == 1 && li.Holders[0].Token == fenceToken(tokenA)
	})
	tokenI := fieldUint(t, imp.Line(), "token")
	if tokenI <= tokenA {
		t.Fatalf("the import's token %d is not greater than A's %d", tokenI, tokenA)
	}
	for _, sku := range []string{"sku-1", "sku-2"} {
		if line := imp.Line(); !strings.HasPrefix(line, "written ") || field(t, line, "sku") != sku || field(t, line, "qty") != "100" {
			t.Fatalf("import: %q, want written sku=%s qty=100", line, sku)
		}
	}
	if code := imp.Wait(); code != 0 {
		t.Fatalf("import exit code %d", code)
	}

	a.Signal(syscall.SIGCONT)
	a.Send("")
	line := a.Line()
	if !strings.HasPrefix(line, "refused ") || field(t, line, "reason") != "STALE_TOKEN" ||
		fieldUint(t, line, "token") != tokenA || fieldUint(t, line, "last_accepted") != tokenI {
		t.Fatalf("SKU worker A after SIGCONT: %q, want refused reason=STALE_TOKEN token=%d last_accepted=%d", line, tokenA, tokenI)
	}
	if code := a.Wait(); code != 4 {
		t.Fatalf("SKU worker A exit code %d, want 4", code)
	}
	if qty, last := stockRow(t, conn, stockTable, guardTable, "sku-1"); qty != 100 || last != int64(tokenI) {
		t.Fatalf("sku-1 after A's late write: qty %d, guard last_token %d; want 100 and %d", qty, last, tokenI)
	}
}

// fenceToken is a token read from a worker's line as the client reports it.
func fenceToken(v uint64) fence.Token { return fence.Token(v) }
