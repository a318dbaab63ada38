package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// sseFrame is one SSE event as read off the wire.
type sseFrame struct{ id, event, data string }

// readSSE reads an SSE watch of url (GET, with auth if set) into a
// channel of events; the stream ends with the test.
func readSSE(t *testing.T, url, auth string) <-chan sseFrame {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	out := make(chan sseFrame, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		r := bufio.NewReader(resp.Body)
		var f sseFrame
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "" && f.event != "":
				select {
				case out <- f:
				case <-ctx.Done():
					return
				}
				f = sseFrame{}
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
	}()
	return out
}

func nextFrame(t *testing.T, evs <-chan sseFrame) sseFrame {
	t.Helper()
	select {
	case f, ok := <-evs:
		if !ok {
			t.Fatal("the watch ended")
		}
		return f
	case <-time.After(30 * time.Second):
		t.Fatal("no event in 30 s")
	}
	return sseFrame{}
}

// Watches share each change's encoding (docs/design.md, "Watch"), per
// change and per way it is shown, never across what one caller may see:
// an admin watching "" encodes first the changes of one command that
// locks jobs/x, other/y and jobs/z (so its batch is all three, and the
// shared bytes are its); a reader of jobs/ that then resumes from the
// same position gets only jobs/x and jobs/z, with the request id and
// session the admin saw blanked (the reader is not the lease's
// principal).
func TestWatchSharedEncodingsNeverCrossWhatACallerMaySee(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	f := authFixtureOn(t, s, url)
	admin := readSSE(t, url+"/v1/watch?prefix=", f.creds["admin"])
	st := nextFrame(t, admin)
	if st.event != "state" || st.id == "" {
		t.Fatalf("first event %+v; want the whole state, with an id", st)
	}
	f.must(fencev1connect.LockServiceAcquireProcedure, f.creds["admin"],
		`{"owner":"o","ttl":"60s","request_id":"secret-request","locks":[{"name":"jobs/x"},{"name":"other/y"},{"name":"jobs/z"}]}`)
	var adminGot []string
	for len(adminGot) < 3 {
		e := nextFrame(t, admin)
		if !strings.Contains(e.data, `"secret-request"`) {
			t.Fatalf("admin got %+v; want the request id shown to an admin", e)
		}
		adminGot = append(adminGot, e.data)
	}
	// The reader resumes after the admin's state: its changes come from
	// the ring, their shared encodings made by the admin's watch.
	reader := readSSE(t, url+"/v1/watch?prefix=jobs/&after="+st.id, f.creds["read"])
	var got []string
	for len(got) < 2 {
		e := nextFrame(t, reader)
		if e.event != "change" {
			t.Fatalf("reader got %+v; want changes", e)
		}
		if strings.Contains(e.data, "other/") || strings.Contains(e.data, "secret-request") || strings.Contains(e.data, `"session"`) {
			t.Fatalf("a reader of jobs/ got %s; want only jobs/ changes, their request id and session blanked", e.data)
		}
		got = append(got, e.data)
	}
	if !strings.Contains(got[0], `"jobs/x"`) || !strings.Contains(got[1], `"jobs/z"`) {
		t.Fatalf("reader got %v; want jobs/x then jobs/z", got)
	}
	// And one more change: nothing of other/y came between.
	f.must(fencev1connect.LockServiceAcquireProcedure, f.creds["admin"], `{"name":"jobs/last","owner":"o","ttl":"60s"}`)
	if e := nextFrame(t, reader); !strings.Contains(e.data, `"jobs/last"`) {
		t.Fatalf("reader got %+v; want jobs/last next", e)
	}
}

// flushCounter is a ResponseWriter that keeps what was written between
// flushes: each Flush hands on the bytes written since the last one.
type flushCounter struct {
	h       http.Header
	mu      sync.Mutex
	pending bytes.Buffer
	flushes chan string
}

func (c *flushCounter) Header() http.Header { return c.h }
func (c *flushCounter) WriteHeader(int)     {}
func (c *flushCounter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending.Write(b)
}
func (c *flushCounter) Flush() {
	c.mu.Lock()
	s := c.pending.String()
	c.pending.Reset()
	c.mu.Unlock()
	c.flushes <- s
}

// A batch of changes applied at once reaches an SSE watch as one write
// and one flush, not a flush per change: 8 locks acquired in one command
// (one applied entry, one wake) come in the first flush after the state,
// all 8 of them.
func TestWatchSSEWritesABatchWithOneFlush(t *testing.T) {
	s, _ := startServerOnNode(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	rw := &flushCounter{h: http.Header{}, flushes: make(chan string, 16)}
	req := httptestRequest(ctx, "/v1/watch?prefix=batch/")
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.sseWatch(rw, req)
	}()
	defer func() {
		cancel()
		for {
			select {
			case <-rw.flushes:
			case <-done:
				return
			}
		}
	}()
	next := func() string {
		select {
		case f := <-rw.flushes:
			return f
		case <-time.After(30 * time.Second):
			t.Fatal("no flush in 30 s")
		}
		return ""
	}
	for f := next(); !strings.Contains(f, "event: state"); f = next() {
	}
	locks := make([]fence.LockSpec, 8)
	for i := range locks {
		locks[i] = fence.LockSpec{Name: "batch/" + string(rune('a'+i))}
	}
	if _, err := s.Service().Acquire(context.Background(), fence.AcquireRequest{Owner: "o", TTL: time.Minute, Locks: locks}); err != nil {
		t.Fatal(err)
	}
	f := next()
	if n := strings.Count(f, "event: change"); n != len(locks) {
		t.Fatalf("the first flush after the state carried %d changes:\n%s\nwant all %d of the batch in one flush", n, f, len(locks))
	}
}

func httptestRequest(ctx context.Context, target string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://fence"+target, nil)
	return req
}

// The same over the streaming protocols (gRPC with protobuf, Connect
// with JSON): an admin's watch of "" reads a set acquire of jobs/x,
// other/y, jobs/z and ten more grants first; a reader of jobs/ resuming
// from the same position gets exactly the jobs/ changes, with the same
// tokens, the request id blanked.
func TestWatchStreamsShareEncodingsPerCaller(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	f := authFixtureOn(t, s, url)
	for _, pr := range []struct {
		name string
		opts []connect.ClientOption
	}{{"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"connect+json", []connect.ClientOption{connect.WithProtoJSON()}}} {
		t.Run(pr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
			defer cancel()
			c := fencev1connect.NewLockServiceClient(h2cClient(), url, pr.opts...)
			watch := func(who, prefix, after string) *connect.ServerStreamForClient[fencev1.WatchEvent] {
				req := connect.NewRequest(&fencev1.WatchRequest{Prefix: prefix, After: after})
				req.Header().Set("Authorization", f.creds[who])
				st, err := c.Watch(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}
			recv := func(st *connect.ServerStreamForClient[fencev1.WatchEvent]) *fencev1.WatchEvent {
				if !st.Receive() {
					t.Fatalf("the watch ended: %v", st.Err())
				}
				return st.Msg()
			}
			admin := watch("admin", "", "")
			var st *fencev1.WatchEvent
			for st = recv(admin); st.GetState().GetMore(); st = recv(admin) {
			}
			p := pr.name
			f.must(fencev1connect.LockServiceAcquireProcedure, f.creds["admin"],
				`{"owner":"o","ttl":"60s","request_id":"secret-`+p+`","locks":[{"name":"jobs/x`+p+`"},{"name":"other/y`+p+`"},{"name":"jobs/z`+p+`"}]}`)
			for i := range 10 {
				f.must(fencev1connect.LockServiceAcquireProcedure, f.creds["admin"], fmt.Sprintf(`{"name":"jobs/n%d%s","owner":"o","ttl":"60s"}`, i, p))
			}
			var want []string
			for len(want) < 12 {
				ch := recv(admin).GetChange()
				if ch.GetName() == "other/y"+p {
					if ch.GetRequestId() != "secret-"+p {
						t.Fatalf("admin got %v; want its request id", ch)
					}
					continue
				}
				want = append(want, fmt.Sprintf("%s %s %d", ch.GetKind(), ch.GetName(), ch.GetToken()))
			}
			reader := watch("read", "jobs/", st.GetPosition())
			var got []string
			for len(got) < 12 {
				ch := recv(reader).GetChange()
				if ch.GetRequestId() != "" || ch.GetSession() != 0 {
					t.Fatalf("a reader of jobs/ got %v; want its request id and session blanked", ch)
				}
				got = append(got, fmt.Sprintf("%s %s %d", ch.GetKind(), ch.GetName(), ch.GetToken()))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the reader got\n%v\nwant (the admin's jobs/ changes)\n%v", got, want)
			}
		})
	}
}
