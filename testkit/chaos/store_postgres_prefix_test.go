package chaos

import "testing"

// Two runs of one process never share PostgreSQL tables, even with one
// seed (FENCE_CHAOS_SEED, and the package's fault runs side by side): each
// run's prefix is its own, and a valid table prefix.
func TestRunPrefixOwnPerRun(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		p := runPrefix(42)
		if err := checkPrefix(p + "_stock"); err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("prefix %s handed to two runs with the same seed", p)
		}
		seen[p] = true
	}
	if p := runPrefix(1<<64 - 1); checkPrefix(p+"_guard") != nil {
		t.Fatalf("prefix %s with the largest seed: %v", p, checkPrefix(p+"_guard"))
	}
}
