package server

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/fenceworks/fence"
)

// List pages.
const (
	// DefaultPageSize is the page size of a List that sets none.
	DefaultPageSize = 1000
	// MaxPageSize is the largest page_size accepted.
	MaxPageSize = 10000
)

// pageTokenVersion is the first byte of a page token; the rest is the name
// of the last lock listed. Clients must treat tokens as opaque.
const pageTokenVersion = 1

// pageSize checks page_size: 0 means DefaultPageSize.
func pageSize(n uint32) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n > MaxPageSize:
		return 0, fence.Invalid("page_size", fmt.Sprintf("at most %d", MaxPageSize), fmt.Sprint(n))
	}
	return int(n), nil
}

// encodePageToken makes the page_token that continues after the lock
// named after ("" when there is no next page).
func encodePageToken(after string) string {
	if after == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(append([]byte{pageTokenVersion}, after...))
}

// decodePageToken returns the name a page_token continues after ("" for
// the first page).
func decodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	bad := fence.Invalid("page_token", "the next_page_token of an earlier List, unchanged", "")
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 2 || b[0] != pageTokenVersion || len(b)-1 > fence.MaxNameBytes || !utf8.Valid(b[1:]) {
		return "", bad
	}
	return string(b[1:]), nil
}
