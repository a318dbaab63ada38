package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
			s, url := startServerOnNode(b, Config{})
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
			s, url := startServerOnNode(b, Config{})
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
	start, cpu0 := time.Now(), processCPU()
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
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
	// The process's CPU per cycle, clients' and server's: other load on
	// the machine moves it much less than cycles/s.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/cycle")
	b.ReportMetric(float64(all[len(all)*50/100].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds())/1000, "p99-ms")
	b.ReportMetric(meanBatch(s), "entries/batch")
	if st := nodeOf(s).Status(); st.Groups > 0 {
		b.ReportMetric(float64(st.Proposals)/float64(st.Groups), "cmds/group")
	}
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

// BenchmarkStreamAcquireRelease is BenchmarkAcquireRelease over one
// SessionService.Stream (Connect streaming, binary protobuf, h2c): clients
// goroutines share the stream of one session, each running acquire+release
// cycles (session-bound, not sequenced) and waiting for its own replies.
// The server runs each request in its own goroutine, so entries/batch
// shows the group commit of what one stream carries.
func BenchmarkStreamAcquireRelease(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, url := startServerOnNode(b, Config{})
			sc := fencev1connect.NewSessionServiceClient(h2cClient(), url)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			open, err := sc.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Hour)}))
			if err != nil {
				b.Fatal(err)
			}
			st := sc.Stream(ctx)
			if err := st.Send(&fencev1.SessionRequest{Session: open.Msg.Session.GetId()}); err != nil {
				b.Fatal(err)
			}
			mux := newReplyMux(st)
			defer func() {
				cancel()
				_ = st.CloseResponse()
				<-mux.done
			}()
			runCycles(b, s, clients, func() (cycle, error) {
				return func(name string) error {
					a, err := mux.call(&fencev1.SessionRequest{Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: name, Owner: "bench"}}})
					if err != nil {
						return err
					}
					_, err = mux.call(&fencev1.SessionRequest{Op: &fencev1.SessionRequest_Release{Release: &fencev1.ReleaseRequest{Name: name, Token: a.GetAcquire().GetLease().GetToken()}}})
					return err
				}, nil
			})
		})
	}
}

// replyMux lets goroutines share one stream: call sends a request with a
// fresh call id and waits for its reply.
type replyMux struct {
	st      *connect.BidiStreamForClient[fencev1.SessionRequest, fencev1.SessionReply]
	send    sync.Mutex
	mu      sync.Mutex
	waiting map[uint64]chan *fencev1.SessionReply // nil once the stream ended
	calls   atomic.Uint64
	done    chan struct{}
}

func newReplyMux(st *connect.BidiStreamForClient[fencev1.SessionRequest, fencev1.SessionReply]) *replyMux {
	m := &replyMux{st: st, waiting: map[uint64]chan *fencev1.SessionReply{}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			r, err := st.Receive()
			m.mu.Lock()
			if err != nil {
				for _, ch := range m.waiting {
					close(ch)
				}
				m.waiting = nil
				m.mu.Unlock()
				return
			}
			ch := m.waiting[r.GetCall()]
			delete(m.waiting, r.GetCall())
			m.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
	}()
	return m
}

func (m *replyMux) call(req *fencev1.SessionRequest) (*fencev1.SessionReply, error) {
	req.Call = m.calls.Add(1)
	ch := make(chan *fencev1.SessionReply, 1)
	m.mu.Lock()
	if m.waiting == nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("stream ended")
	}
	m.waiting[req.Call] = ch
	m.mu.Unlock()
	m.send.Lock()
	err := m.st.Send(req)
	m.send.Unlock()
	if err != nil {
		return nil, err
	}
	r, ok := <-ch
	switch {
	case !ok:
		return nil, fmt.Errorf("stream ended before the reply to call %d", req.Call)
	case r.GetError() != nil:
		return nil, fmt.Errorf("call %d refused: %s", req.Call, r.GetMessage())
	}
	return r, nil
}

// BenchmarkAcquireReleaseJSON is BenchmarkAcquireRelease as a curl or
// fetch client sends it: plain JSON POSTs (application/json, a number of
// seconds for the TTL, the token read back as a JSON number) over one
// HTTP/1.1 keep-alive connection per client. Against
// BenchmarkAcquireRelease in the same run it shows what the JSON path
// costs on top of binary protobuf.
func BenchmarkAcquireReleaseJSON(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, url := startServerOnNode(b, Config{})
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
			defer hc.CloseIdleConnections()
			post := func(path, body string, out any) error {
				resp, err := hc.Post(url+path, "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
				}
				return json.NewDecoder(resp.Body).Decode(out)
			}
			runCycles(b, s, clients, func() (cycle, error) {
				return func(name string) error {
					var a struct {
						Lease struct {
							Token uint64 `json:"token"`
						} `json:"lease"`
					}
					if err := post(fencev1connect.LockServiceAcquireProcedure, `{"name":"`+name+`","owner":"bench","ttl":60}`, &a); err != nil {
						return err
					}
					var none struct{}
					return post(fencev1connect.LockServiceReleaseProcedure, `{"name":"`+name+`","token":`+strconv.FormatUint(a.Lease.Token, 10)+`}`, &none)
				}, nil
			})
		})
	}
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
