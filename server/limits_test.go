package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// hangGuard bounds waits for something the server must do (close a
// connection, answer). It is not a timing assertion: a hung server fails the
// test instead of the -timeout killing the binary.
const hangGuard = 30 * time.Second

// checkBodyLimit: err is invalid_argument with a detail for field "body"
// naming the byte limit, and no leaked read-after-close error.
func checkBodyLimit(t *testing.T, err error) {
	t.Helper()
	var inv *fence.InvalidError
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !errors.As(apierr.FromConnect(err), &inv) ||
		inv.Field != "body" || !strings.Contains(inv.Bound, fmt.Sprint(maxRequestBytes)) {
		t.Fatalf("err = %v, want invalid_argument naming the %d-byte body limit", err, maxRequestBytes)
	}
	if strings.Contains(err.Error(), "closed Body") {
		t.Fatalf("err = %v leaks a read on a closed body", err)
	}
}

// A message over the limit is refused with invalid_argument naming the limit
// (it was resource_exhausted, BUSY's code, with no detail, and a leaked
// "invalid Read on closed Body"), whatever the protocol, whether its length
// is announced or not, and whether it is large on the wire or only once
// decompressed. The server keeps serving.
func TestBodyOverLimit(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	big := &fencev1.WriteRequest{Resource: "r", Token: 1, Value: make([]byte, maxRequestBytes+1)}
	h1 := &http.Client{Transport: &http.Transport{}}
	defer h1.CloseIdleConnections()
	for _, c := range []struct {
		name string
		res  fencev1connect.ResourceServiceClient
		gzip bool // small on the wire: refused by limitedGzip, once decompressed
	}{
		{"connect-proto", fencev1connect.NewResourceServiceClient(h1, url), false},
		{"connect-json", fencev1connect.NewResourceServiceClient(h1, url, connect.WithProtoJSON()), false},
		{"connect-gzip", fencev1connect.NewResourceServiceClient(h1, url, connect.WithSendGzip()), true},
		{"grpc-h2c", fencev1connect.NewResourceServiceClient(h2cClient(), url, connect.WithGRPC()), false},
		{"grpc-h2c-gzip", fencev1connect.NewResourceServiceClient(h2cClient(), url, connect.WithGRPC(), connect.WithSendGzip()), true},
		{"grpc-web", fencev1connect.NewResourceServiceClient(h1, url, connect.WithGRPCWeb()), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.res.Write(ctx, connect.NewRequest(big))
			checkBodyLimit(t, err)
			if got := strings.Contains(err.Error(), "once decompressed"); got != c.gzip {
				t.Fatalf("err = %v: names the decompressed size %v, want %v", err, got, c.gzip)
			}
			if _, err := c.res.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: "r"})); err != nil {
				t.Fatalf("server not serving after an oversized body: %v", err)
			}
		})
	}

	// Raw POSTs: a length announced over the limit (refused before the body
	// is read), and a chunked body of unknown length.
	for _, tc := range []struct {
		name   string
		ctype  string
		length int64
	}{
		{"announced json", "application/json", maxRequestBytes + 1},
		{"chunked json", "application/json", -1},
		{"chunked proto", "application/proto", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := io.MultiReader(strings.NewReader(`{"resource":"r","value":"`), strings.NewReader(strings.Repeat("A", maxRequestBytes)), strings.NewReader(`"}`))
			req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.ResourceServiceWriteProcedure, body)
			req.Header.Set("Content-Type", tc.ctype)
			req.ContentLength = tc.length
			if tc.length > 0 {
				req.Body = io.NopCloser(io.LimitReader(body, tc.length))
			}
			resp, err := h1.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(raw, []byte(`"invalid_argument"`)) ||
				!bytes.Contains(raw, []byte(fmt.Sprint(maxRequestBytes))) || bytes.Contains(raw, []byte("closed Body")) {
				t.Fatalf("status %d body %.300s; want 400 invalid_argument naming %d bytes", resp.StatusCode, raw, maxRequestBytes)
			}
		})
	}
}

// A gRPC message with the compressed flag but no grpc-encoding is the
// client's error: invalid_argument naming grpc-encoding (it was internal).
func TestGRPCCompressedFlagWithoutEncoding(t *testing.T) {
	_, url := startServer(t)
	msg := []byte{0x0a, 0x01, 'x'} // ReadRequest{resource: "x"}
	for _, enc := range []string{"", "identity"} {
		var body bytes.Buffer
		body.WriteByte(1) // compressed
		binary.Write(&body, binary.BigEndian, uint32(len(msg)))
		body.Write(msg)
		req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.ResourceServiceReadProcedure, &body)
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		if enc != "" {
			req.Header.Set("Grpc-Encoding", enc)
		}
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status := resp.Trailer.Get("Grpc-Status") + resp.Header.Get("Grpc-Status")
		msg := resp.Trailer.Get("Grpc-Message") + resp.Header.Get("Grpc-Message")
		if status != fmt.Sprint(int(connect.CodeInvalidArgument)) || !strings.Contains(msg, "grpc-encoding") {
			t.Fatalf("grpc-encoding %q: grpc-status %q message %q; want %d (invalid_argument) naming grpc-encoding",
				enc, status, msg, connect.CodeInvalidArgument)
		}
	}
}

// rawConn dials the server and returns a reader of what it answers.
func rawConn(t *testing.T, url string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(hangGuard))
	return c, bufio.NewReader(c)
}

// untilClosed reads until the server closes c and returns what it sent;
// the hang guard expiring is a failure.
func untilClosed(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	got, err := io.ReadAll(r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close a slow connection within %s (got %q)", hangGuard, got)
	}
	return string(got)
}

// A client that trickles its header or its body, or sends a header over
// the limit, loses its connection; the server keeps serving.
func TestSlowAndGreedyClientsAreCut(t *testing.T) {
	_, url := startServerWith(t, Config{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond})

	// Half a header, then nothing.
	c, r := rawConn(t, url)
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\n", fencev1connect.LockServiceAcquireProcedure)
	untilClosed(t, c, r)

	// A whole header announcing 100 bytes, 10 of them sent.
	c, r = rawConn(t, url)
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":\"x", fencev1connect.LockServiceAcquireProcedure)
	untilClosed(t, c, r)

	// A header over the limit: 431.
	c, r = rawConn(t, url)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("b", maxHeaderBytes+8192))
	if got := untilClosed(t, c, r); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Fatalf("oversized header answered %.80q, want 431", got)
	}

	// Over h2c a trickled body ends its stream: the request is answered
	// (deadline_exceeded) although the body never ends.
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(`{"name":"x`))
	req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.LockServiceAcquireProcedure, pr)
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	resp, err := h2cClient().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("h2c request with a trickled body: %v (not answered within %s?)", err, hangGuard)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || !strings.Contains(string(body), "deadline_exceeded") {
		t.Fatalf("h2c trickled body answered %s %d %s, want HTTP/2 deadline_exceeded", resp.Proto, resp.StatusCode, body)
	}

	lc := protocols(url)[0].locks
	if _, err := lc.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: "ok", Ttl: durationpb.New(time.Second)})); err != nil {
		t.Fatalf("server not serving after slow clients: %v", err)
	}
}

// ReadTimeout bounds reading a request, not the wait that follows: a
// blocking acquire whose wait outlasts it is granted, over HTTP/1.1 and h2c.
func TestLongWaitOutlivesReadTimeout(t *testing.T) {
	const readTimeout = 200 * time.Millisecond
	_, url := startServerWith(t, Config{ReadTimeout: readTimeout})
	ctx := context.Background()
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			name := "long-" + c.name
			held, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Ttl: durationpb.New(time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				owner string
				err   error
			}
			done := make(chan result, 1)
			go func() {
				r, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "w", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Minute)}))
				if err != nil {
					done <- result{"", err}
					return
				}
				done <- result{r.Msg.GetLease().GetOwner(), nil}
			}()
			// Once the waiter is queued, the holder's lease is cut to end
			// 4 read timeouts from now: the wait lasts at least that long
			// however slow the machine (a lease of 4 read timeouts from
			// the start could end before a slow waiter even came).
			until(t, "the acquire waits", func() bool { return lockOf(t, url, name).GetWaiters() == 1 })
			if _, err := c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: name, Token: held.Msg.GetLease().GetToken(), Ttl: durationpb.New(4 * readTimeout)})); err != nil {
				t.Fatal(err)
			}
			if r := <-done; r.err != nil || r.owner != "w" {
				t.Fatalf("waiting acquire = %q, %v; want granted after the holder's lease ended", r.owner, r.err)
			}
		})
	}
}

// At most MaxConns connections are served at once; more wait for a slot and
// are served once one frees (here: two silent connections cut by the header
// timeout).
func TestMaxConns(t *testing.T) {
	s, url := startServerWith(t, Config{MaxConns: 2, ReadHeaderTimeout: 300 * time.Millisecond})
	for range 2 {
		c, r := rawConn(t, url)
		go func() { untilClosed(t, c, r) }()
	}
	// Both taken: the most ever open at once is a high-water mark, so it
	// cannot be missed as the open count can (the two are cut by the
	// header timeout, maybe before a look).
	until(t, "both silent connections are taken", func() bool { return s.conns.peak.Load() >= 2 })
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Transport: &http.Transport{}}
			defer hc.CloseIdleConnections()
			lc := fencev1connect.NewLockServiceClient(hc, url)
			_, err := lc.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: fmt.Sprint("c", i), Ttl: durationpb.New(time.Hour)}))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("request after the slots freed: %v", err)
		}
	}
	if peak := s.conns.peak.Load(); peak != 2 {
		t.Fatalf("peak open connections = %d, want 2 (MaxConns)", peak)
	}
}
