package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A stream message with the compressed flag, on a stream that named no
// compression, is the client's error: the stream ends invalid_argument
// naming the message flags (Connect answered internal, a server fault an
// operator is told to alert on). With a compression named, the flag is
// Connect's to read. The server keeps serving.
func TestStreamCompressedFlagWithoutEncodingIsInvalid(t *testing.T) {
	_, url := startServer(t)
	payload := []byte(`{"session":"1","call":"1","keepAlive":{}}`)
	env := append([]byte{0x01, 0, 0, 0, 0}, payload...)
	binary.BigEndian.PutUint32(env[1:5], uint32(len(payload)))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+fencev1connect.SessionServiceStreamProcedure, bytes.NewReader(env))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	res, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), `"code":"invalid_argument"`) || !strings.Contains(string(body), "message flags") {
		t.Fatalf("a compressed flag with no encoding: %d %q, want the stream ended invalid_argument naming the message flags", res.StatusCode, body)
	}
	if _, err := protocols(url)[0].locks.List(context.Background(), connect.NewRequest(&fencev1.ListRequest{})); err != nil {
		t.Fatalf("the server after the refusal: %v", err)
	}
}
