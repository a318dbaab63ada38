package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// heapSlack is what the heap may grow under an attack besides the replies
// the budgets hold: the requests, their HTTP/2 streams and handlers (their
// goroutines' stacks are not heap).
const heapSlack = 8 << 20

// heapInuse is the heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// writeBig gives resource name a value of fence.MaxValueBytes (through the
// store: over HTTP its own reply deadline would be at stake).
func writeBig(t *testing.T, s *Server, name string) {
	t.Helper()
	ctx := context.Background()
	a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: name, TTL: time.Hour})
	if err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	v := bytes.Repeat([]byte{0xa5}, fence.MaxValueBytes)
	if w, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpWrite, Name: name, Token: a.Lease.Token, Value: v}); err != nil || w.Err != nil {
		t.Fatal(err, w.Err)
	}
}

// unreadConn is an HTTP/2 connection (h2c, prior knowledge) of a client
// that never reads: its streams' flow-control window is 0, so the server
// can send no reply data on it and holds every reply it made.
type unreadConn struct {
	t      testing.TB
	c      net.Conn
	fr     *http2.Framer
	addr   string
	scheme string
	next   uint32 // the next stream id
	auth   string // its requests' Authorization ("": none)
}

// dialUnread dials url: h2c for http://, TLS (ALPN h2, trusting roots)
// for https://.
func dialUnread(t testing.TB, url string, roots *x509.CertPool) *unreadConn {
	t.Helper()
	scheme, addr, _ := strings.Cut(url, "://")
	var c net.Conn
	var err error
	if scheme == "https" {
		c, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}})
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // before the server's Shutdown
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	return &unreadConn{t: t, c: c, fr: fr, addr: addr, scheme: scheme, next: 1}
}

// open starts a POST to path (content type ct) and returns its stream id.
func (u *unreadConn) open(path, ct string) uint32 {
	u.t.Helper()
	var hb bytes.Buffer
	e := hpack.NewEncoder(&hb)
	fields := [][2]string{{":method", "POST"}, {":scheme", u.scheme}, {":authority", u.addr}, {":path", path}, {"content-type", ct}}
	if u.auth != "" {
		fields = append(fields, [2]string{"authorization", u.auth})
	}
	for _, f := range fields {
		_ = e.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := u.next
	u.next += 2
	if err := u.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		u.t.Fatal(err)
	}
	return id
}

// reads sends n unary Reads of resource (Connect, JSON), none read.
func (u *unreadConn) reads(n int, resource string) {
	u.t.Helper()
	for range n {
		id := u.open(fencev1connect.ResourceServiceReadProcedure, "application/json")
		if err := u.fr.WriteData(id, true, []byte(fmt.Sprintf(`{"resource":%q}`, resource))); err != nil {
			u.t.Fatal(err)
		}
	}
}

// envelope is one message of a Connect stream.
func envelope(js string) []byte {
	b := make([]byte, 5, 5+len(js))
	binary.BigEndian.PutUint32(b[1:], uint32(len(js)))
	return append(b, js...)
}

// streamReads opens a SessionService.Stream of session and sends n reads
// of resource on it, none read.
func (u *unreadConn) streamReads(session uint64, n int, resource string) {
	u.t.Helper()
	id := u.open(fencev1connect.SessionServiceStreamProcedure, "application/connect+json")
	if err := u.fr.WriteData(id, false, envelope(fmt.Sprintf(`{"session":%d}`, session))); err != nil {
		u.t.Fatal(err)
	}
	for i := range n {
		if err := u.fr.WriteData(id, false, envelope(fmt.Sprintf(`{"call":%d,"read":{"resource":%q}}`, i+1, resource))); err != nil {
			u.t.Fatal(err)
		}
	}
}

// repliesAt waits until n large replies either hold reply bytes or wait
// for room, and returns the bytes held then.
func repliesAt(t *testing.T, s *Server, n int64) int64 {
	t.Helper()
	var used int64
	until(t, fmt.Sprintf("%d unread replies held or waiting", n), func() bool {
		u, holds, waiting := s.replies.state()
		used = u
		return holds+waiting == n
	})
	return used
}

// honestReads reads resource over its own connection k times; each reply
// is whole.
func honestReads(t *testing.T, rc fencev1connect.ResourceServiceClient, resource string, k int) {
	t.Helper()
	for range k {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		r, err := rc.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: resource}))
		cancel()
		if err != nil {
			t.Fatalf("an honest read during the attack: %v", err)
		}
		if len(r.Msg.GetState().GetValue()) != fence.MaxValueBytes {
			t.Fatalf("honest read: %d bytes, want %d", len(r.Msg.GetState().GetValue()), fence.MaxValueBytes)
		}
	}
}

// A client that asks for large replies on one connection and reads none
// makes the server hold at most the connection's reply budget (it held
// all of them: 250 streams of a 1 MiB read were 860 MB), and a client
// reading on another connection is served meanwhile. Once the attacker
// goes, every byte it held is given back.
func TestUnreadRepliesOfOneConnectionAreBounded(t *testing.T) {
	t.Run("h2c", func(t *testing.T) {
		s, url := startServerWith(t, Config{})
		unreadRepliesOfOneConnection(t, s, url, h2cClient(), nil)
	})
	// Under TLS the connection's budget is found under the TLS
	// connection and tlsListener's wrapper (it was not: every TLS
	// connection drew on the server's budget alone).
	t.Run("TLS", func(t *testing.T) {
		s, url, roots := startTLSServer(t, Config{})
		unreadRepliesOfOneConnection(t, s, url, h2TLSClient(roots), roots)
	})
}

func unreadRepliesOfOneConnection(t *testing.T, s *Server, url string, honest *http.Client, roots *x509.CertPool) {
	writeBig(t, s, "big")
	rc := fencev1connect.NewResourceServiceClient(honest, url)
	honestReads(t, rc, "big", 1) // warms what a read allocates once
	before := heapInuse()

	const streams = 100
	atk := dialUnread(t, url, roots)
	atk.reads(streams, "big")
	used := repliesAt(t, s, streams)
	honestReads(t, rc, "big", 3)
	grew := heapInuse() - before
	t.Logf("heap grew %d MiB; reply bytes held %d MiB", grew>>20, used>>20)
	if bound := int64(maxConnReplyBytes + heapSlack); grew > bound {
		t.Fatalf("the heap grew %d bytes under %d unread 1 MiB replies, want at most %d (the connection's budget and %d)", grew, streams, bound, heapSlack)
	}
	if used > maxConnReplyBytes {
		t.Fatalf("one connection holds %d reply bytes, over its budget %d", used, maxConnReplyBytes)
	}

	atk.c.Close()
	until(t, "the attacker's reply bytes given back", func() bool {
		u, holds, waiting := s.replies.state()
		return u == 0 && holds == 0 && waiting == 0
	})
}

// Many connections that do not read hold at most the server's reply
// budget together, and an honest client's acquires and reads on another
// connection are served meanwhile.
func TestUnreadRepliesOfManyConnectionsAreBounded(t *testing.T) {
	const budget = 2 * maxConnReplyBytes
	s, url := startServerWith(t, Config{MaxReplyBytes: budget})
	writeBig(t, s, "big")
	h := h2cClient()
	rc := fencev1connect.NewResourceServiceClient(h, url)
	lc := fencev1connect.NewLockServiceClient(h, url)
	honestReads(t, rc, "big", 1)
	before := heapInuse()

	const conns, streams = 12, 20
	for range conns {
		dialUnread(t, url, nil).reads(streams, "big")
	}
	used := repliesAt(t, s, conns*streams)
	// Small calls are never kept waiting by the full budget.
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: fmt.Sprintf("honest-%d", i), Ttl: durationpb.New(time.Minute)}))
		if err == nil {
			_, err = rc.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: "small"}))
		}
		cancel()
		if err != nil {
			t.Fatalf("an honest call during the attack: %v", err)
		}
	}
	grew := heapInuse() - before
	t.Logf("heap grew %d MiB; reply bytes held %d MiB", grew>>20, used>>20)
	if bound := int64(budget + heapSlack); grew > bound {
		t.Fatalf("the heap grew %d bytes under %d connections' unread replies, want at most %d (the server's budget and %d)", grew, conns, bound, heapSlack)
	}
	if used > budget {
		t.Fatalf("the server holds %d reply bytes, over its budget %d", used, budget)
	}
}

// A session stream whose replies are not read holds at most its
// connection's reply budget: its reads wait for room (they held 0.4 GB
// for 600 reads of 1 MiB).
func TestUnreadStreamRepliesAreBounded(t *testing.T) {
	s, url := startServerWith(t, Config{})
	writeBig(t, s, "big")
	h := h2cClient()
	rc := fencev1connect.NewResourceServiceClient(h, url)
	sc := fencev1connect.NewSessionServiceClient(h, url)
	honestReads(t, rc, "big", 1)
	o, err := sc.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	before := heapInuse()

	const reads = 200
	dialUnread(t, url, nil).streamReads(o.Msg.GetSession().GetId(), reads, "big")
	used := repliesAt(t, s, reads)
	honestReads(t, rc, "big", 3)
	grew := heapInuse() - before
	t.Logf("heap grew %d MiB; reply bytes held %d MiB", grew>>20, used>>20)
	if bound := int64(maxConnReplyBytes + heapSlack); grew > bound {
		t.Fatalf("the heap grew %d bytes under %d unread 1 MiB stream replies, want at most %d", grew, reads, bound)
	}
	if used > maxConnReplyBytes {
		t.Fatalf("one stream holds %d reply bytes, over its connection's budget %d", used, maxConnReplyBytes)
	}
}

// A client that reads its replies gets every one, however many large
// replies it asks for at once on one connection: beyond the budget they
// wait for the earlier ones to be written, none is refused.
func TestAReaderGetsEveryLargeReply(t *testing.T) {
	s, url := startServerWith(t, Config{})
	writeBig(t, s, "big")
	rc := fencev1connect.NewResourceServiceClient(h2cClient(), url) // one connection
	const reads = 24                                                // 24 × 3 MiB reserved: 4.5 budgets
	errs := make(chan error, reads)
	for range reads {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			r, err := rc.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: "big"}))
			if err == nil && len(r.Msg.GetState().GetValue()) != fence.MaxValueBytes {
				err = fmt.Errorf("%d bytes, want %d", len(r.Msg.GetState().GetValue()), fence.MaxValueBytes)
			}
			errs <- err
		}()
	}
	for range reads {
		if err := <-errs; err != nil {
			t.Fatalf("a read of a client that reads: %v", err)
		}
	}
	until(t, "every reply's bytes given back", func() bool {
		used, holds, waiting := s.replies.state()
		return used == 0 && holds == 0 && waiting == 0
	})
}
