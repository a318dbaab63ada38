package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"

	"google.golang.org/protobuf/proto"
)

// leanConn is a minimal Connect unary client for benchmarks: binary
// protobuf over one HTTP/1.1 keep-alive connection, with buffers reused
// between calls. It understands only what the Fence server sends back to
// it (200 with Content-Length, or an error status); it is a load generator,
// not a general client.
type leanConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	host string
	out  []byte // request body
	in   []byte // response body
}

func dialLean(baseURL string) (*leanConn, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	return &leanConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn), host: u.Host}, nil
}

func (c *leanConn) close() error { return c.conn.Close() }

// call posts req to procedure and decodes the reply into resp.
func (c *leanConn) call(procedure string, req, resp proto.Message) error {
	var err error
	c.out, err = proto.MarshalOptions{}.MarshalAppend(c.out[:0], req)
	if err != nil {
		return err
	}
	w := c.w
	w.WriteString("POST ")
	w.WriteString(procedure)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(c.host)
	w.WriteString("\r\nContent-Type: application/proto\r\nConnect-Protocol-Version: 1\r\nContent-Length: ")
	w.Write(strconv.AppendInt(c.in[:0], int64(len(c.out)), 10))
	w.WriteString("\r\n\r\n")
	w.Write(c.out)
	if err := w.Flush(); err != nil {
		return err
	}

	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	ok := bytes.HasPrefix(line, []byte("HTTP/1.1 200 "))
	status := string(bytes.TrimSpace(line))
	length := -1
	for {
		line, err = c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if name, value, found := bytes.Cut(line, []byte(":")); found && bytes.EqualFold(name, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return fmt.Errorf("lean client: bad Content-Length %q", value)
			}
		}
	}
	if length < 0 {
		return fmt.Errorf("lean client: reply %q without Content-Length", status)
	}
	if cap(c.in) < length {
		c.in = make([]byte, length)
	}
	body := c.in[:length]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("lean client: %s: %s", status, body)
	}
	return proto.Unmarshal(body, resp)
}
