package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// serveStreams hands SessionService.Stream over HTTP/2 to stream, prepared
// for a request that lives as long as its client keeps it; every other
// request goes to rest. The limits of a unary request would cut such a
// stream, so it gets its own (see stream.go):
//   - its body is not capped as a whole: each message is, by its envelope
//     prefix (envelopeCap), at maxRequestBytes;
//   - the read deadline (ReadTimeout) bounds the wait for the first
//     message only (serveStream lifts it once that arrived);
//   - no write deadline runs while nothing is sent: each batch of replies
//     must be written within writeTimeout (streamConn.writeWithin);
//   - when the request's context ends (the client went away, or Shutdown
//     cancelled it) its body is closed, so a Receive blocked on it returns
//     and the handler ends.
//
// The deadline header is checked as for every API call (timeout.go).
// HTTP/1.x requests go to stream as they are: Connect answers them 505.
func serveStreams(stream, rest http.Handler, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != fencev1connect.SessionServiceStreamProcedure {
			rest.ServeHTTP(w, r)
			return
		}
		if bad := timeoutError(r.Header); bad != nil {
			refuse(w, r, apierr.ToConnect(bad))
			return
		}
		if r.ProtoMajor < 2 || r.Body == nil || r.Body == http.NoBody {
			stream.ServeHTTP(w, r)
			return
		}
		orig := r.Body
		defer func() { r.Body = orig }()
		r.Body = prefixedBody{Reader: &envelopeCap{r: orig, encoded: streamEncoded(r.Header)}, c: orig}
		c := &streamConn{rc: http.NewResponseController(w), body: orig, timeout: writeTimeout}
		stop := context.AfterFunc(r.Context(), c.closeBody)
		defer stop()
		stream.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), streamKey{}, c)))
	})
}

// streamConn is the HTTP side of one stream, for its handler. Its methods
// do nothing on a nil *streamConn (Handler mounted without serveStreams).
type streamConn struct {
	rc      *http.ResponseController
	body    io.Closer
	timeout time.Duration
	// http1: a watch's request came over HTTP/1.x (its connection
	// carries nothing else while it lasts); header: its response's.
	http1  bool
	header http.Header
}

type streamKey struct{}

// streamConnOf returns the streamConn of the request of ctx, or nil.
func streamConnOf(ctx context.Context) *streamConn {
	c, _ := ctx.Value(streamKey{}).(*streamConn)
	return c
}

// noReadDeadline lifts the request's read deadline.
func (c *streamConn) noReadDeadline() {
	if c != nil {
		_ = c.rc.SetReadDeadline(time.Time{})
	}
}

// writeWithin sets the write deadline d from now (0: none). Past it, the
// stream is reset.
func (c *streamConn) writeWithin(d time.Duration) {
	if c == nil {
		return
	}
	var at time.Time
	if d > 0 {
		at = time.Now().Add(d)
	}
	_ = c.rc.SetWriteDeadline(at)
}

// writeBy sets the write deadline at (zero: none).
func (c *streamConn) writeBy(at time.Time) {
	if c != nil {
		_ = c.rc.SetWriteDeadline(at)
	}
}

// closeBody closes the request body: a read blocked on it returns.
func (c *streamConn) closeBody() {
	if c != nil {
		_ = c.body.Close()
	}
}

// envelopeCap passes a streaming request body through unchanged, reading
// the prefix of each message (a flags byte and a big-endian uint32 length,
// in gRPC, gRPC-Web and Connect streaming alike): a message longer than
// maxRequestBytes is refused with tooLarge before Connect reads it, and so
// is a message with the compressed flag on a stream that named no
// compression (Connect answers that internal, a server fault); the
// refusal is sticky.
type envelopeCap struct {
	r       io.Reader
	encoded bool // the stream named a compression
	prefix  [grpcPrefixBytes]byte
	have    int    // bytes of the current prefix read
	left    uint32 // bytes of the current message still to pass
	err     error
}

func (e *envelopeCap) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.r.Read(p)
	for i := 0; i < n; {
		if e.left > 0 {
			skip := min(int(e.left), n-i)
			e.left -= uint32(skip)
			i += skip
			continue
		}
		e.prefix[e.have] = p[i]
		e.have++
		i++
		if e.have == grpcPrefixBytes {
			e.have = 0
			e.left = binary.BigEndian.Uint32(e.prefix[1:])
			if e.left > maxRequestBytes {
				e.err = tooLarge("")
				return 0, e.err
			}
			if e.prefix[0]&1 != 0 && !e.encoded {
				e.err = apierr.ToConnect(fence.Invalid("message flags", "no compressed flag unless the stream names a compression (Connect-Content-Encoding or grpc-encoding)", fmt.Sprintf("0x%02x", e.prefix[0])))
				return 0, e.err
			}
		}
	}
	return n, err
}

// streamEncoded reports whether a streaming request named a compression
// for its messages (Connect streaming: Connect-Content-Encoding; gRPC and
// gRPC-Web: Grpc-Encoding), other than identity.
func streamEncoded(h http.Header) bool {
	for _, k := range []string{"Connect-Content-Encoding", "Grpc-Encoding"} {
		if v := h.Get(k); v != "" && v != "identity" {
			return true
		}
	}
	return false
}
