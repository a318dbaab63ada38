package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// BenchmarkGrantWithIdleWatches measures grants while N raw HTTP/1.1 SSE
// watches of a 20,480-lock prefix (GET /v1/watch?prefix=big/, client
// SO_RCVBUF 4096) never read: the grant's median and p99, the process's
// CPU seconds from opening the watches to the last grant (the clients
// only hold idle sockets: it is the server's), and the bytes the server's
// sockets hold unsent in the kernel once the grants are done
// (/proc/net/tcp tx_queue).
func BenchmarkGrantWithIdleWatches(b *testing.B) {
	for _, idle := range []int{0, 200} {
		b.Run(fmt.Sprintf("idle%d", idle), func(b *testing.B) {
			s, url := startServerOnNode(b, Config{})
			ctx := context.Background()
			var wg sync.WaitGroup
			sets := make(chan int, 320)
			for i := range 320 {
				sets <- i
			}
			close(sets)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range sets {
						locks := make([]fence.LockSpec, 64)
						for j := range locks {
							locks[j] = fence.LockSpec{Name: fmt.Sprintf("big/%04d/%02d", i, j)}
						}
						if _, err := s.Service().Acquire(ctx, fence.AcquireRequest{Locks: locks, Owner: "o", TTL: time.Hour}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if b.Failed() {
				b.FailNow()
			}
			addr := strings.TrimPrefix(url, "http://")
			d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
				return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			cpu0 := cpuTime()
			for range idle {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				fmt.Fprintf(c, "GET /v1/watch?prefix=big/ HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			}
			for s.watches.Load() < int64(idle) {
				time.Sleep(time.Millisecond)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				name := fmt.Sprintf("g/%d", i%16)
				start := time.Now()
				l, err := s.Service().Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "b", TTL: time.Minute})
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Service().Release(ctx, fence.ReleaseRequest{Name: name, Token: l.Lease.Token}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "grant-p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "grant-p99-µs")
			b.ReportMetric(cpu.Seconds(), "cpu-s")
			b.ReportMetric(float64(unsentBytes(addr))/float64(max(idle, 1)), "unsent-B/watch")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// unsentBytes sums the send queues of the sockets whose local address is
// addr (the server's side) in /proc/net/tcp.
func unsentBytes(addr string) int64 {
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	local := fmt.Sprintf("0100007F:%04X", p)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return -1
	}
	var sum int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != local {
			continue
		}
		q := strings.SplitN(f[4], ":", 2)
		n, _ := strconv.ParseInt(q[0], 16, 64)
		sum += n
	}
	return sum
}
