package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// BenchmarkAcquireRelease measures acquire+release cycles on distinct locks
// through the real API: HTTP on loopback, Connect (binary protobuf, HTTP/1.1
// keep-alive) with the connect-go client, durable raft log with fsync (the
// default store, raft-wal) in a temp dir. It reports cycles/s, the p50/p99
// latency of one cycle and the mean entries per raft batch. The client runs
// in the same process and shares the 2 cores and the garbage collector.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, url := startServer(b)
			// One HTTP/1.1 keep-alive connection per client. (Measured on 2
			// cores: h2c with one connection was ~15% slower, gRPC over h2c
			// ~30% slower; see docs/benchmarks.md.)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
			defer hc.CloseIdleConnections()
			lc := fencev1connect.NewLockServiceClient(hc, url)
			runCycles(b, s, clients, func() (cycle, error) {
				ctx := context.Background()
				return func(name string) error {
					a, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "bench", Ttl: durationpb.New(time.Minute)}))
					if err != nil {
						return err
					}
					_, err = lc.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: name, Token: a.Msg.Lease.Token}))
					return err
				}, nil
			})
		})
	}
}

// BenchmarkAcquireReleaseLeanClient is BenchmarkAcquireRelease with a
// minimal load generator instead of connect-go: the same requests on the
// wire (Connect unary, binary protobuf, one HTTP/1.1 keep-alive connection
// per client), but written and parsed by leanConn with reused buffers. The
// server does the same work; the client costs less CPU and garbage in the
// shared process, so this is closer to the server's capacity when its
// clients run elsewhere.
func BenchmarkAcquireReleaseLeanClient(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, url := startServer(b)
			runCycles(b, s, clients, func() (cycle, error) {
				c, err := dialLean(url)
				if err != nil {
					return nil, err
				}
				b.Cleanup(func() { c.close() })
				acq := &fencev1.AcquireRequest{Owner: "bench", Ttl: durationpb.New(time.Minute)}
				rel := &fencev1.ReleaseRequest{}
				var got fencev1.AcquireResponse
				var none fencev1.ReleaseResponse
				return func(name string) error {
					acq.Name = name
					if err := c.call(fencev1connect.LockServiceAcquireProcedure, acq, &got); err != nil {
						return err
					}
					rel.Name, rel.Token = name, got.GetLease().GetToken()
					return c.call(fencev1connect.LockServiceReleaseProcedure, rel, &none)
				}, nil
			})
		})
	}
}

// cycle runs one acquire+release of the named lock.
type cycle func(name string) error

// runCycles runs b.N cycles on distinct locks from clients goroutines, each
// with its own cycle from newCycle, and reports cycles/s, p50/p99 latency
// and entries per raft batch.
func runCycles(b *testing.B, s *Server, clients int, newCycle func() (cycle, error)) {
	cycles := make([]cycle, clients)
	for w := range cycles {
		c, err := newCycle()
		if err != nil {
			b.Fatal(err)
		}
		cycles[w] = c
	}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 32)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t0 := time.Now()
				buf = strconv.AppendInt(append(buf[:0], "bench-"...), i, 10)
				if err := cycles[w](string(buf)); err != nil {
					failed.Store(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
	b.ReportMetric(float64(all[len(all)*50/100].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds())/1000, "p99-ms")
	b.ReportMetric(meanBatch(s), "entries/batch")
}

// meanBatch is the mean number of log entries per applied FSM batch (how
// well concurrent proposals were group-committed).
func meanBatch(s *Server) float64 {
	mfs, _ := s.metrics.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "fence_raft_apply_batch_entries" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() > 0 {
				return h.GetSampleSum() / float64(h.GetSampleCount())
			}
		}
	}
	return 0
}
