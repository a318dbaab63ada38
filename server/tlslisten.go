package server

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"time"
)

// PlaintextToTLS is what a TLS port answers a client that spoke plain HTTP
// to it: the debug data of a GOAWAY to cleartext HTTP/2 (h2c), the message
// of a 400 (Connect's error JSON) to HTTP/1.1; the handshake error logged
// says it too.
const PlaintextToTLS = "plain HTTP sent to a TLS port: use https://"

var (
	errPlaintextH2    = errors.New(PlaintextToTLS + " (HTTP/2, answered GOAWAY)")
	errPlaintextHTTP1 = errors.New(PlaintextToTLS + " (HTTP/1.1, answered 400)")
)

// plaintextBody is the 400's body: Connect's error JSON, so that Connect
// clients (and curl) read the message.
const plaintextBody = `{"code":"failed_precondition","message":"Client sent an HTTP request to an HTTPS server: ` + PlaintextToTLS + `"}`

// tlsListener is tls.NewListener with one addition: a connection that
// starts with HTTP/2's cleartext preface (a client with prior knowledge,
// given an http:// URL) is answered with an empty SETTINGS frame and a
// GOAWAY whose debug data says what happened, so the client's error names
// the cause instead of "EOF".
type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&plaintextCheck{Conn: c}, l.cfg), nil
}

// plaintextCheck looks at the first bytes a connection sends.
type plaintextCheck struct {
	net.Conn
	checked bool
}

func (c *plaintextCheck) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.checked || n == 0 {
		return n, err
	}
	c.checked = true
	if looksLikeHTTP1(p[:n]) {
		c.refuse([]byte("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(plaintextBody)) + "\r\n\r\n" + plaintextBody))
		return 0, errPlaintextHTTP1
	}
	if !bytes.HasPrefix(p[:n], []byte("PRI *")) {
		return n, err
	}
	debug := []byte(PlaintextToTLS)
	n8 := 8 + len(debug)
	frames := []byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}                                    // SETTINGS, empty, stream 0
	frames = append(frames, byte(n8>>16), byte(n8>>8), byte(n8), 0x7, 0, 0, 0, 0, 0) // GOAWAY, stream 0
	frames = binary.BigEndian.AppendUint32(frames, 0)                                // last stream id
	frames = binary.BigEndian.AppendUint32(frames, 0x1)                              // PROTOCOL_ERROR
	frames = append(frames, debug...)
	c.refuse(frames)
	return 0, errPlaintextH2
}

// refuse sends reply and closes the connection once the client has sent
// everything.
func (c *plaintextCheck) refuse(reply []byte) {
	c.Conn.SetDeadline(time.Now().Add(time.Second))
	c.Conn.Write(reply)
	// Close the sending side and read what the client sent, so that the
	// close does not reset the connection before the client read the
	// GOAWAY.
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, c.Conn)
}

// looksLikeHTTP1 is net/http's test of a TLS record header that is a
// plain HTTP/1.x request instead.
func looksLikeHTTP1(b []byte) bool {
	if len(b) < 5 {
		return false
	}
	switch string(b[:5]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}
