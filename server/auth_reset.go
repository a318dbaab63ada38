package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fenceworks/fence"
)

// The recovery of a lost admin token (docs/security.md, "Bootstrap and
// recovery"): someone with a shell on a server writes into the reset file
// (Config.AuthResetFile) the store's bootstraps so far and a secret of
// their own, "N SECRET", and bootstraps with both. The index alone is no
// proof of anything: the store's count is easy to learn (a refused
// bootstrap says it). The secret is what only a shell on the server can
// know, so it is required, at least MinResetSecretLen characters, and
// compared in constant time.

// MinResetSecretLen is the shortest secret a reset file may hold: 128
// bits written in hex (`openssl rand -hex 16`).
const MinResetSecretLen = 32

// MinResetSecretDistinct is how many different characters a reset secret
// must have: 32 of one letter are 32 characters and no secret (an outside
// test's "aaaa…"); hex from a random source has all 16 nearly always.
const MinResetSecretDistinct = 8

// distinct counts the different bytes of s.
func distinct(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}

// resetRefusal is a refused reset, saying which part was wrong and never
// what the file holds.
func resetRefusal(why string) error {
	return &fence.PermissionDeniedError{What: "bootstrap", Name: why}
}

// checkReset permits one more bootstrap naming idx when this node's reset
// file holds idx and secret.
func (s *Server) checkReset(idx uint64, secret string) error {
	if s.cfg.AuthResetFile == "" {
		return resetRefusal("no reset file on this node")
	}
	fi, err := os.Stat(s.cfg.AuthResetFile)
	if err != nil {
		return resetRefusal("no reset file on this node")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		// Readable or writable by others than its owner: its secret is
		// no proof of a shell on the server (an outside test's 0644).
		return resetRefusal(fmt.Sprintf("the reset file is readable or writable by others (mode %#o): chmod 600 it", fi.Mode().Perm()))
	}
	b, err := os.ReadFile(s.cfg.AuthResetFile)
	if err != nil {
		return resetRefusal("no reset file on this node")
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return resetRefusal(fmt.Sprintf("the reset file is not \"N SECRET\" (the store's bootstraps so far and a secret of at least %d characters)", MinResetSecretLen))
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return resetRefusal("the reset file's first word is not a number (want \"N SECRET\")")
	}
	if len(f[1]) < MinResetSecretLen || distinct(f[1]) < MinResetSecretDistinct {
		return resetRefusal(fmt.Sprintf("the reset file's secret is too weak: at least %d characters, %d of them different (e.g. openssl rand -hex 16)", MinResetSecretLen, MinResetSecretDistinct))
	}
	// Hashed first, so the comparison takes the same time whatever the
	// lengths.
	want, got := sha256.Sum256([]byte(f[1])), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		return resetRefusal("wrong reset secret (not the one in the reset file)")
	}
	if n != idx {
		return resetRefusal("wrong reset index (not the one in the reset file)")
	}
	return nil
}
