package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// BenchmarkGrantWithWatchers measures one grant and its release (two
// applies) on a durable single node with no watcher, with one that never
// reads (stuck: the ring moves past it and it is cut when it next reads),
// with 1 or 1,000 watchers that read every change, and with 1,000 reading
// watchers of another prefix ("a/", which no grant here touches: they are
// never woken). It reports the median and p99 of a grant's latency.
func BenchmarkGrantWithWatchers(b *testing.B) {
	for _, c := range []struct {
		name           string
		reading, stuck int
		prefix         string
	}{{"none", 0, 0, "b/"}, {"stuck1", 0, 1, "b/"}, {"reading1", 1, 0, "b/"}, {"reading1000", 1000, 0, "b/"}, {"reading1000+stuck1", 1000, 1, "b/"},
		{"reading1000other", 1000, 0, "a/"}} {
		b.Run(c.name, func(b *testing.B) {
			n, err := Open(Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WatchHistory: 1024})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range c.stuck {
				w, err := n.Watch(ctx, WatchRequest{Prefix: "b/"})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
			}
			done := make(chan struct{}, c.reading)
			for range c.reading {
				w, err := n.Watch(ctx, WatchRequest{Prefix: c.prefix})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer w.Close()
					defer func() { done <- struct{}{} }()
					var buf []WatchEvent
					for {
						if buf, err = w.Next(ctx, buf); err != nil {
							return
						}
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				name := fmt.Sprintf("b/%d", i%16)
				start := time.Now()
				res, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: name, Owner: "b", TTL: time.Minute})
				lat = append(lat, time.Since(start))
				if err != nil || res.Err != nil {
					b.Fatal(err, res.Err)
				}
				if _, err := n.Apply(ctx, state.Command{Op: state.OpRelease, Name: name, Token: res.Lease.Token}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cancel()
			for range c.reading {
				<-done
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "grant-p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "grant-p99-µs")
		})
	}
}
