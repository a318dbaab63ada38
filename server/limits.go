package server

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

// Limits against slow and greedy clients. Each one ends what a single client
// can hold: a connection slot (MaxConns), a header (ReadHeaderTimeout,
// maxHeaderBytes), a request body (ReadTimeout, maxRequestBytes, also once
// decompressed), a reply it does not read (WriteTimeout, writes.go; the
// bytes of its large replies: reply_budget.go), an
// idle keep-alive connection (IdleTimeout).
//
// ReadTimeout bounds reading a request, body included, and nothing after it:
// a blocking acquire's body is small and read at once, then its handler
// waits as long as its wait. Over HTTP/1.1 the server clears the read
// deadline once the body is read (its background read, which notices a
// client that goes away, has no deadline); over HTTP/2 the per-stream read
// timer only closes a body that has not ended yet. So a wait longer than
// ReadTimeout is never cut by it (TestLongWaitOutlivesReadTimeout).
const (
	// DefaultMaxConns is the default cap on open client connections; more
	// wait in the kernel's accept queue until one closes.
	DefaultMaxConns = 4096
	// DefaultReadHeaderTimeout bounds reading a request's header.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultWriteTimeout bounds writing a reply once it is ready
	// (writes.go).
	DefaultWriteTimeout = 30 * time.Second

	// maxHeaderBytes bounds a request header (Connect and gRPC send well
	// under 1 KiB).
	maxHeaderBytes = 64 << 10
	// grpcPrefixBytes is the envelope prefix before a gRPC message: a flags
	// byte (bit 0: compressed) and a big-endian uint32 length.
	grpcPrefixBytes = 5
)

// tooLarge is the refusal of a request body over maxRequestBytes: a
// *connect.Error, so Connect passes it on unchanged when a body read returns
// it (invalid_argument with a detail naming the limit).
func tooLarge(what string) *connect.Error {
	return apierr.ToConnect(fence.Invalid("body", fmt.Sprintf("at most %d bytes%s", maxRequestBytes, what), ""))
}

// limitBodies refuses a request whose body (or gRPC message) is larger than
// maxRequestBytes with invalid_argument naming the limit, before Connect
// reads it (Connect's own limit answers resource_exhausted, BUSY's code, with
// no detail), and a gRPC message with the compressed flag but no
// grpc-encoding with invalid_argument (Connect answers internal).
func limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		grpc := strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
		limit := int64(maxRequestBytes)
		if grpc {
			limit += grpcPrefixBytes
		}
		if r.ContentLength > limit {
			refuse(w, r, tooLarge(""))
			return
		}
		orig := r.Body
		// net/http looks at the body it made once the handler returns (to
		// decide whether the connection can be reused): give it back.
		defer func() { r.Body = orig }()
		body := newLimitedBody(orig, limit)
		if r.ProtoMajor == 1 {
			body.h1 = w.Header()
		}
		r.Body = body
		if grpc {
			if err := checkGRPCPrefix(r, body); err != nil {
				refuse(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers err in the request's protocol (Connect, gRPC or gRPC-Web).
// The unread rest of the body is left to net/http (it drains a little for
// keep-alive, else closes the connection). Every refusal in front of
// Connect (limitBodies, apiFront) goes through it; a plain JSON call gets
// the refusal serveJSON would write (writeJSONError).
func refuse(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	if plainJSONCall(r) {
		writeJSONError(w, err)
		return
	}
	_ = errorWriter.Write(w, r, err)
}

// errorWriter is built once: an ErrorWriter holds no per-request state.
var errorWriter = connect.NewErrorWriter()

// checkGRPCPrefix reads a gRPC request's envelope prefix, refuses a
// compressed message with no compression named and a message over the limit,
// and puts the prefix back in front of the body.
func checkGRPCPrefix(r *http.Request, body *limitedBody) *connect.Error {
	var prefix [grpcPrefixBytes]byte
	n, err := io.ReadFull(body, prefix[:])
	if err == nil {
		enc := r.Header.Get("Grpc-Encoding")
		if prefix[0]&1 != 0 && (enc == "" || enc == "identity") {
			return apierr.ToConnect(fence.Invalid("grpc-encoding", "set (e.g. gzip) when a message has the compressed flag", ""))
		}
		if binary.BigEndian.Uint32(prefix[1:]) > maxRequestBytes {
			return tooLarge("")
		}
	}
	// A short or failed read is put back as it was: Connect reads the same
	// error and answers it in its own words.
	r.Body = prefixedBody{Reader: io.MultiReader(bytes.NewReader(prefix[:n]), body), c: body}
	return nil
}

type prefixedBody struct {
	io.Reader
	c io.Closer
}

func (b prefixedBody) Close() error { return b.c.Close() }

// capped reads at most left more bytes of r; a byte more is the refusal
// tooLarge(what), sticky. It is the one bound of limitedBody (on the wire)
// and limitedGzip (once decompressed).
type capped struct {
	r    io.Reader
	left int64
	what string
	over error
}

func (c *capped) Read(p []byte) (int, error) {
	if c.over != nil {
		return 0, c.over
	}
	if c.left <= 0 {
		// At the limit: only the end of the body is allowed.
		var one [1]byte
		for {
			n, err := c.r.Read(one[:])
			if n > 0 {
				c.over = tooLarge(c.what)
				return 0, c.over
			}
			if err != nil {
				return 0, err
			}
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// limitedBody is a request body capped at its limit. Over HTTP/1.x (h1 is
// the response header) a body that fails (too large, too slow: ReadTimeout,
// or cut) also ends the connection after the reply: net/http would
// otherwise keep it for the next request, so a client trickling bodies
// would hold its slot for IdleTimeout. Its failure is sticky.
type limitedBody struct {
	capped
	rc  io.ReadCloser
	err error
	h1  http.Header
}

func newLimitedBody(rc io.ReadCloser, limit int64) *limitedBody {
	return &limitedBody{capped: capped{r: rc, left: limit}, rc: rc}
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.capped.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
		if b.h1 != nil {
			b.h1.Set("Connection", "close")
		}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// limitedGzip is Connect's gzip decompressor with the same bound on what it
// inflates to, so a small compressed body cannot become a large message
// (Connect's own bound would answer resource_exhausted with no detail).
type limitedGzip struct {
	gz gzip.Reader
	capped
}

func newLimitedGzip() connect.Decompressor { return &limitedGzip{} }

func (d *limitedGzip) Reset(r io.Reader) error {
	d.capped = capped{r: &d.gz, left: maxRequestBytes, what: " once decompressed"}
	return d.gz.Reset(r)
}

func (d *limitedGzip) Close() error { return d.gz.Close() }

func newGzipCompressor() connect.Compressor { return gzip.NewWriter(io.Discard) }
