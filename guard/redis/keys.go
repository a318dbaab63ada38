package redisguard

import "encoding/hex"

// resourceKey is the hash holding a resource's value, token and version.
// The whole key is the hash tag, so every key of the resource shares its
// Redis Cluster slot.
func resourceKey(prefix, resource string) string {
	return "{" + prefix + ":" + resource + "}"
}

// opKey is the saved result of one op_id on one resource. The op_id is
// hex-encoded: it cannot contain '}' and so cannot be mistaken for a
// resource key, whatever bytes the caller used.
func opKey(prefix, resource, opID string) string {
	return resourceKey(prefix, resource) + ":op:" + hex.EncodeToString([]byte(opID))
}

// scanPattern matches every key of every resource under prefix; MaxToken
// keeps only hashes (resource keys), never the string op records.
func scanPattern(prefix string) string {
	return "{" + prefix + ":*"
}
