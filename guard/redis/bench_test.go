package redisguard

import (
	"testing"
	"time"
)

// BenchmarkGuardedVsPlainSet runs the guarded write (the script) and a plain
// SET of the same value alternately in one loop and reports both and their
// ratio, so that load on the shared machine hits both alike.
func BenchmarkGuardedVsPlainSet(b *testing.B) {
	g, rdb := newTestGuard(b, Options{})
	value := []byte("a stock level of 8 units")
	plainKey := resourceKey(g.Prefix(), "plain")
	var guarded, plain time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := g.Set(ctx, "bench", 7, value, ""); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := rdb.Set(ctx, plainKey, value, 0).Err(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		guarded += t1.Sub(t0)
		plain += t2.Sub(t1)
	}
	b.ReportMetric(float64(guarded.Nanoseconds())/float64(b.N), "guarded-ns/op")
	b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(guarded)/float64(plain), "guarded/plain")
}
