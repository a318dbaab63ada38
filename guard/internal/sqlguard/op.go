package sqlguard

import (
	"bytes"
	"crypto/sha256"

	"github.com/fenceworks/fence"
)

// PayloadHash is what an op record keeps of the request that applied it:
// the SHA-256 of its payload. A retry must carry the same payload.
func PayloadHash(payload []byte) []byte {
	h := sha256.Sum256(payload)
	return h[:]
}

// Replay decides what a found op record means for a request with the given
// payload hash: the saved result (same payload), or *fence.OpConflictError
// (a different one).
func Replay(opID string, savedHash, hash, savedResult []byte) ([]byte, error) {
	if !bytes.Equal(savedHash, hash) {
		return nil, &fence.OpConflictError{Field: "op_id", ID: opID}
	}
	return savedResult, nil
}
