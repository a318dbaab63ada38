package server

import (
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

// List pages.
const (
	// DefaultPageSize is the page size of a List that sets none.
	DefaultPageSize = 1000
	// MaxPageSize is the largest page_size accepted.
	MaxPageSize = 10000
)

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
// named after ("" when there is no next page): api/apierr's encoding,
// shared with the remote fence.Service (client.NewService).
func encodePageToken(after string) string { return apierr.EncodePageToken(after) }

// decodePageToken returns the name a page_token continues after ("" for
// the first page); a token apierr.EncodePageToken did not make is refused
// naming page_token.
func decodePageToken(tok string) (string, error) {
	after, ok := apierr.DecodePageToken(tok)
	if !ok {
		return "", fence.Invalid("page_token", "the next_page_token of an earlier List, unchanged", "")
	}
	return after, nil
}
