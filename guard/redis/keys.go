package redisguard

import (
	"encoding/hex"
	"strconv"
)

// Key layout, for prefix P (n = len(P) in decimal) and resource R:
//
//	{n:P:R}                 the resource hash: value, token, version
//	{n:P:R}:op:<hex op_id>  the saved result of one op_id
//
// The encoding is injective: the length fixes where P ends, so prefix "a"
// with resource "x:R" ({1:a:x:R}) and prefix "a:x" with resource "R"
// ({3:a:x:R}) are different keys; an op key ends in a hex digit and a
// resource key in '}', and hex has no '}', so the last '}' of any key closes
// its resource. Every key of a resource starts with the same "{n:P:R", so
// its Redis Cluster hash tag (the text between the first '{' and the next
// '}') is the same and both keys live in one slot, whatever R contains.
//
// Keys of the first layout ({P:R}, before the length) are not read.

// resourceKey is the hash holding a resource's value, token and version.
func resourceKey(prefix, resource string) string {
	return keyStart(prefix) + resource + "}"
}

// opKey is the saved result of one op_id on one resource. The op_id is
// hex-encoded: it cannot contain '}' and so cannot be mistaken for a
// resource key, whatever bytes the caller used.
func opKey(prefix, resource, opID string) string {
	return resourceKey(prefix, resource) + ":op:" + hex.EncodeToString([]byte(opID))
}

// keyStart is what every key under prefix starts with.
func keyStart(prefix string) string {
	return "{" + strconv.Itoa(len(prefix)) + ":" + prefix + ":"
}

// scanPattern matches every key of every resource under prefix, and no key
// of another prefix (the prefix has no glob characters, and its length is in
// the pattern); MaxToken keeps only hashes (resource keys).
func scanPattern(prefix string) string {
	return keyStart(prefix) + "*"
}

// KeyPattern is a SCAN/KEYS glob matching every key a guard with this
// prefix ("" means DefaultPrefix) writes, and no key of another prefix: for
// operators who inspect, back up or delete a guard's keys. An invalid
// prefix is refused with *fence.InvalidError.
func KeyPattern(prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return "", err
	}
	return scanPattern(prefix), nil
}
