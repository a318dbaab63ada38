package cluster

import (
	"net"
	"strconv"
	"strings"
	"unicode"

	"github.com/fenceworks/fence"
)

// maxIDBytes bounds a member id (raft keeps it in every configuration).
const maxIDBytes = 128

// idBound is the rule a member id must follow: it appears in --peers lists
// ("id=addr,...") and in logs, so no separators, spaces or control bytes.
const idBound = "1 to 128 bytes, no spaces, control characters, ',' or '='"

// ValidateID checks a member id (field names the request field or flag).
func ValidateID(field, id string) error {
	if id == "" || len(id) > maxIDBytes {
		return fence.Invalid(field, idBound, id)
	}
	if strings.ContainsFunc(id, func(r rune) bool {
		return r == ',' || r == '=' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
	}) {
		return fence.Invalid(field, idBound, id)
	}
	return nil
}

// addrBound is the rule a raft address must follow.
const addrBound = "HOST:PORT with a host other nodes can dial (not 0.0.0.0 or ::) and a port 1-65535"

// ValidateRaftAddr checks a member's raft address: what other nodes dial,
// so an unspecified host (0.0.0.0, ::) or a missing port is refused.
func ValidateRaftAddr(field, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fence.Invalid(field, addrBound, addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fence.Invalid(field, addrBound, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fence.Invalid(field, addrBound, addr)
	}
	return nil
}
