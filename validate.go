package fence

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// ValidateName checks a lock or resource name: not empty, at most
// MaxNameBytes, valid UTF-8. field is the name used in the error.
func ValidateName(field, name string) error {
	switch {
	case name == "":
		return Invalid(field, "not empty", "")
	case len(name) > MaxNameBytes:
		return Invalid(field, fmt.Sprintf("at most %d bytes", MaxNameBytes), fmt.Sprintf("(%d bytes)", len(name)))
	case !utf8.ValidString(name):
		return Invalid(field, "valid UTF-8", "")
	}
	return nil
}

// ValidateOwner checks an owner label: at most MaxOwnerBytes of valid UTF-8
// (empty is allowed).
func ValidateOwner(owner string) error {
	switch {
	case len(owner) > MaxOwnerBytes:
		return Invalid("owner", fmt.Sprintf("at most %d bytes", MaxOwnerBytes), fmt.Sprintf("(%d bytes)", len(owner)))
	case !utf8.ValidString(owner):
		return Invalid("owner", "valid UTF-8", "")
	}
	return nil
}

// ValidateID checks a request_id or op_id: at most MaxIDBytes (empty means
// "none" and is allowed).
func ValidateID(field, id string) error {
	if len(id) > MaxIDBytes {
		return Invalid(field, fmt.Sprintf("at most %d bytes", MaxIDBytes), fmt.Sprintf("(%d bytes)", len(id)))
	}
	return nil
}

// ValidateTTL checks a lease TTL against [MinTTL, max].
func ValidateTTL(ttl, max time.Duration) error {
	if ttl < MinTTL {
		return Invalid("ttl", "at least "+MinTTL.String(), ttl.String())
	}
	if ttl > max {
		return Invalid("ttl", "at most "+max.String(), ttl.String())
	}
	return nil
}

// ValidateDuration checks an optional duration field (wait, lock_delay)
// against [0, max].
func ValidateDuration(field string, d, max time.Duration) error {
	if d < 0 {
		return Invalid(field, "at least 0s", d.String())
	}
	if d > max {
		return Invalid(field, "at most "+max.String(), d.String())
	}
	return nil
}

// ValidateToken checks that a token is not 0 and stays below 2^53.
func ValidateToken(t Token) error {
	if t == 0 {
		return Invalid("token", "at least 1", "0")
	}
	if t > MaxTokenJSONInt {
		return Invalid("token", fmt.Sprintf("at most %d", uint64(MaxTokenJSONInt)), t.String())
	}
	return nil
}

// ValidateValue checks a value written to a fenced resource.
func ValidateValue(v []byte) error {
	if len(v) > MaxValueBytes {
		return Invalid("value", fmt.Sprintf("at most %d bytes", MaxValueBytes), fmt.Sprintf("(%d bytes)", len(v)))
	}
	return nil
}
