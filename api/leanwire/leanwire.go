// Package leanwire is the framing of Fence's lean session port (fence
// serve --session-addr): session streams — the SessionRequest and
// SessionReply messages of SessionService.Stream, with the same meaning —
// over TCP or TLS without HTTP/2 and Connect.
//
// One connection carries one session stream. Each frame is
//
//	uvarint(n) kind payload
//
// where n (at least 1) counts the kind byte and the payload. Kinds:
//
//   - KindHello (client, first frame, exactly once): a protobuf message
//     {1: version (uint32, Version), 2: bearer token (string), 3: pongs
//     (bool)}. The
//     stream is authenticated as a Stream call with "Authorization:
//     Bearer <token>" (and the TLS client certificate, if any).
//   - KindRequest (client): a SessionRequest, exactly as on Stream (the
//     first names the session; call is the request id its reply echoes).
//   - KindPing (client, empty): sent when the client has sent nothing for
//     PingEvery; the server closes a connection silent for 3×PingEvery.
//     A client whose hello asks for pongs (field 3) also pings when it
//     has received nothing for a while, to learn that the server is
//     alive.
//   - KindPong (server, empty): only to a client whose hello asked for
//     them: one at once after the hello (so the client knows this server
//     answers pings), then one for every ping. A server that does not
//     know field 3 skips it and never sends one.
//   - KindReply (server): a SessionReply, exactly as on Stream.
//   - KindEnd (server, last frame): why the stream ended, as the status
//     of a Connect stream: {1: code (uint32, connect.Code), 2: message
//     (string), 3: detail (repeated {1: type (string), 2: value (bytes)},
//     google.protobuf.Any's fields)}.
//
// A frame whose payload (n - 1: the kind byte is not counted) is larger
// than the server's bound (4 MiB, a request message's bound on the API)
// ends the stream with INVALID_ARGUMENT naming "body", before its payload
// is read. So does a frame of length 0 or a length uvarint over 10 bytes;
// a frame of a kind the server does not expect ends it INVALID_ARGUMENT
// naming "kind". Every error ends the stream with an end frame, after
// which the server closes its sending side.
package leanwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Frame kinds.
const (
	KindHello   byte = 1
	KindRequest byte = 2
	KindPing    byte = 3
	KindReply   byte = 4
	KindEnd     byte = 5
	KindPong    byte = 6
)

// Version is the hello's version of this framing.
const Version = 1

// PingEvery: a client that has sent nothing for this long sends a ping.
const PingEvery = 10 * time.Second

// BufferSize is the read and write buffer of a connection's side.
const BufferSize = 32 << 10

// The frame errors ReadFrame returns (errors.Is): the stream cannot go
// on, its framing is lost. A server ends the stream with INVALID_ARGUMENT
// naming "body" for each.
var (
	// ErrTooLarge: a frame whose payload is over the reader's bound.
	ErrTooLarge = errors.New("leanwire: frame too large")
	// ErrEmpty: a frame of length 0 (no kind byte).
	ErrEmpty = errors.New("leanwire: empty frame (no kind)")
	// ErrLengthOverflow: a length uvarint longer than 10 bytes.
	ErrLengthOverflow = errors.New("leanwire: frame length overflows")
	// ErrVersion: a hello of a version this side does not speak
	// (ParseHello; the server's end frame names "version").
	ErrVersion = errors.New("leanwire: hello version not spoken")
)

// ReadFrame reads one frame from r into *buf (grown as needed and reused:
// the payload is valid until the next call). A frame whose payload is
// longer than max (n - 1 > max: the kind byte is not counted) is refused
// with ErrTooLarge before its payload is read.
func ReadFrame(r *bufio.Reader, max int, buf *[]byte) (kind byte, payload []byte, err error) {
	n, err := binaryUvarint(r)
	if err != nil {
		return 0, nil, err
	}
	if n == 0 {
		return 0, nil, ErrEmpty
	}
	if n > uint64(max)+1 {
		return 0, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n-1, max)
	}
	if uint64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return b[0], b[1:], nil
}

func binaryUvarint(r *bufio.Reader) (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < 10; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if b < 0x80 {
			return x | uint64(b)<<s, nil
		}
		x |= uint64(b&0x7f) << s
		s += 7
	}
	return 0, fmt.Errorf("%w: its uvarint is over 10 bytes", ErrLengthOverflow)
}

// WriteFrame writes one frame to w (buffered: the caller flushes).
func WriteFrame(w *bufio.Writer, kind byte, payload []byte) error {
	var hdr [11]byte
	h := protowire.AppendVarint(hdr[:0], uint64(len(payload))+1)
	h = append(h, kind)
	if _, err := w.Write(h); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// Hello is the first frame's content.
type Hello struct {
	Version uint32
	Token   string
	// Pongs asks the server to answer pings (KindPong).
	Pongs bool
}

// Append appends h's encoding to b.
func (h Hello) Append(b []byte) []byte {
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(h.Version))
	if h.Token != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, h.Token)
	}
	if h.Pongs {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

// ParseHello decodes a hello; unknown fields are skipped.
func ParseHello(b []byte) (Hello, error) {
	var h Hello
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) {
		switch {
		case num == 1 && typ == protowire.VarintType:
			h.Version = uint32(v)
		case num == 2 && typ == protowire.BytesType:
			h.Token = string(bs)
		case num == 3 && typ == protowire.VarintType:
			h.Pongs = v != 0
		}
	})
	if err == nil && h.Version != Version {
		err = fmt.Errorf("%w: hello version %d, this server speaks %d", ErrVersion, h.Version, Version)
	}
	return h, err
}

// End is the last frame's content: the status the stream ended with.
type End struct {
	Code    uint32
	Message string
	Details []Detail
}

// Detail is one error detail: google.protobuf.Any's type (without its
// URL prefix, as connect.ErrorDetail.Type) and value.
type Detail struct {
	Type  string
	Value []byte
}

// Append appends e's encoding to b.
func (e End) Append(b []byte) []byte {
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(e.Code))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, e.Message)
	for _, d := range e.Details {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, d.Type)
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		m = protowire.AppendBytes(m, d.Value)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

// ParseEnd decodes an end frame's content.
func ParseEnd(b []byte) (End, error) {
	var e End
	var derr error
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) {
		switch {
		case num == 1 && typ == protowire.VarintType:
			e.Code = uint32(v)
		case num == 2 && typ == protowire.BytesType:
			e.Message = string(bs)
		case num == 3 && typ == protowire.BytesType:
			var d Detail
			if err := fields(bs, func(num protowire.Number, typ protowire.Type, _ uint64, bs []byte) {
				switch {
				case num == 1 && typ == protowire.BytesType:
					d.Type = string(bs)
				case num == 2 && typ == protowire.BytesType:
					d.Value = append([]byte(nil), bs...)
				}
			}); err != nil {
				derr = err
			}
			e.Details = append(e.Details, d)
		}
	})
	if err == nil {
		err = derr
	}
	return e, err
}

// fields calls f for each field of the protobuf message b.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, bs []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			f(num, typ, v, nil)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			f(num, typ, 0, v)
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}
