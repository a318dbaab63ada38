package client

import (
	"crypto/rand"
	"fmt"
	"os"
	"sync"
)

// newID returns a fresh random id for request_id and op_id (26 characters
// of base32, 130 bits).
func newID() string { return rand.Text() }

// DefaultOwner is the owner label an acquire gets when it names none:
// "hostname:pid".
func DefaultOwner() string { return defaultOwner() }

// defaultOwner is "hostname:pid".
var defaultOwner = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
})
