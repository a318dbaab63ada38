package apierr

import (
	"encoding/base64"
	"unicode/utf8"

	"github.com/fenceworks/fence"
)

// pageTokenVersion is the first byte of a page token; the rest is the name
// of the last lock listed.
const pageTokenVersion = 1

// EncodePageToken is List's next_page_token that continues after the lock
// named after ("" when there is no next page). API clients treat tokens as
// opaque; the server and the remote fence.Service (which speaks
// fence.ListRequest.After, a name) share this encoding.
func EncodePageToken(after string) string {
	if after == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(append([]byte{pageTokenVersion}, after...))
}

// DecodePageToken returns the name a page token continues after ("" for
// the first page), or false if tok is not a token EncodePageToken made.
func DecodePageToken(tok string) (string, bool) {
	if tok == "" {
		return "", true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 2 || b[0] != pageTokenVersion || len(b)-1 > fence.MaxNameBytes || !utf8.Valid(b[1:]) {
		return "", false
	}
	return string(b[1:]), true
}
