package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// BenchmarkGrantsWithUIPages measures what open operator pages cost the
// grants: 8 clients acquire and release locks under ui/ over JSON POSTs
// (as curl or the page would) while 0 or 100 "pages" follow ui/ — each
// what the page's Locks view costs the server: one SSE watch of the
// prefix (GET /v1/watch?prefix=ui/, HTTP/1.1, its own connection), every
// event read as it comes (the readers run in the benchmark's process, so
// its CPU includes reading their bytes). 1,000 locks under ui/ are held
// first, so each page reads a state of four pages. Reported: grants/s
// (acquire+release cycles a second), the process's CPU per grant, and the
// events each page received. Run both in one command:
//
//	go test -run '^$' -bench BenchmarkGrantsWithUIPages -benchtime 4000x -count 2 ./server/
func BenchmarkGrantsWithUIPages(b *testing.B) {
	for _, pages := range []int{0, 100} {
		b.Run(fmt.Sprintf("pages%d", pages), func(b *testing.B) {
			s, url := startServerOnNode(b, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for i := range 1000 / 50 {
				locks := make([]fence.LockSpec, 50)
				for j := range locks {
					locks[j] = fence.LockSpec{Name: fmt.Sprintf("ui/held/%03d/%02d", i, j)}
				}
				if _, err := s.Service().Acquire(ctx, fence.AcquireRequest{Locks: locks, Owner: "held", TTL: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
			var events atomic.Int64
			var ready sync.WaitGroup
			var readers sync.WaitGroup
			for range pages {
				ready.Add(1)
				readers.Add(1)
				go func() {
					defer readers.Done()
					followLikeThePage(ctx, b, url+"/v1/watch?prefix=ui/", &events, ready.Done)
				}()
			}
			ready.Wait()
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			defer hc.CloseIdleConnections()
			var next atomic.Int64
			cpu0 := cpuTime()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
						name := fmt.Sprintf("ui/w%d/%d", w, n%64)
						var acq struct {
							Lease struct{ Token uint64 } `json:"lease"`
						}
						if err := postJSONTo(hc, url, "fence.v1.LockService/Acquire", map[string]any{"name": name, "ttl": "10s", "owner": "bench"}, &acq); err != nil {
							b.Error(err)
							return
						}
						if err := postJSONTo(hc, url, "fence.v1.LockService/Release", map[string]any{"name": name, "token": acq.Lease.Token}, nil); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "grants/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/grant")
			if pages > 0 {
				b.ReportMetric(float64(events.Load())/float64(pages), "events/page")
			}
			cancel()
			readers.Wait()
		})
	}
}

// followLikeThePage reads an SSE watch as the page's script does: lines,
// events at a blank line (their JSON is left to the browser, as it is
// not the server's work). ready is called once the state's last page
// came.
func followLikeThePage(ctx context.Context, b *testing.B, url string, events *atomic.Int64, ready func()) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		b.Error(err)
		ready()
		return
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var data []byte
	once := sync.OnceFunc(ready)
	defer once()
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0 && len(data) > 0:
			// The decoding is the browser's work, not the server's: only
			// the state's last page is looked for here, so the process's
			// CPU is the server's plus reading the bytes.
			events.Add(1)
			if bytes.Contains(data, []byte(`"state":`)) && !bytes.Contains(data, []byte(`"more":true`)) {
				once()
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[6:]...)
		}
	}
}

// postJSONTo calls a unary procedure with a JSON body; out, when not nil,
// receives the reply.
func postJSONTo(hc *http.Client, url, proc string, in, out any) error {
	body, _ := json.Marshal(in)
	resp, err := hc.Post(url+"/"+proc, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", proc, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
