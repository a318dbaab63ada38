package server

import (
	"context"
	"fmt"
	rtmetrics "runtime/metrics"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// BenchmarkUnreadListsAttack is the outside attack on the reply budget:
// 200 connections each pipelining Lists of 10,000 locks (of 100,000)
// and reading none, against the default --max-reply-bytes. It reports
// the live heap's peak (as of each collection) and the heap's peak in
// objects (live and not yet swept) over the heap before, the reply bytes
// held, and how long an honest Acquire took meanwhile. One attack per
// run: -benchtime 1x.
func BenchmarkUnreadListsAttack(b *testing.B) {
	s, url := startServerWith(b, Config{})
	ctx := context.Background()
	const locks = 100000
	for i := range locks {
		if a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("lock-%06d", i), Owner: "owner", TTL: time.Hour}); err != nil || a.Err != nil {
			b.Fatal(err, a.Err)
		}
	}
	lc := fencev1connect.NewLockServiceClient(h2cClient(), url)
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "warm", Ttl: durationpb.New(time.Minute)})); err != nil {
		b.Fatal(err)
	}
	const conns, lists = 200, 4
	b.ResetTimer()
	for i := range b.N {
		base := heapAllocAfterGC()
		var peakLive, peakObjects int64
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			m := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
			for {
				rtmetrics.Read(m)
				peakLive = max(peakLive, int64(m[0].Value.Uint64()))
				peakObjects = max(peakObjects, int64(m[1].Value.Uint64()))
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		var atks []*unreadConn
		for range conns {
			atk := dialUnread(b, url, nil)
			atk.lists(lists, MaxPageSize)
			atks = append(atks, atk)
		}
		start := time.Now()
		_, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: fmt.Sprintf("honest-%d", i), Ttl: durationpb.New(time.Minute)}))
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		// Until every List holds or waits (at most a minute).
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, holds, waiting := s.replies.state(); holds+waiting == conns*lists {
				break
			}
		}
		used, holds, waiting := s.replies.state()
		close(stop)
		<-done
		b.ReportMetric(float64(peakLive-base)/(1<<20), "MiB-live-peak")
		b.ReportMetric(float64(peakObjects-base)/(1<<20), "MiB-objects-peak")
		b.ReportMetric(float64(used)/(1<<20), "MiB-held")
		b.ReportMetric(float64(took.Milliseconds()), "ms-acquire")
		b.Logf("held %d MiB, %d holding, %d waiting of %d", used>>20, holds, waiting, conns*lists)
		for _, a := range atks {
			a.c.Close()
		}
	}
}
