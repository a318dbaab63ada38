package client

import (
	"unicode/utf8"

	"github.com/fenceworks/fence"
)

// validateWireID checks a request_id or op_id as fence.ValidateID does, and
// also that it is valid UTF-8: the API carries both as protobuf strings, so
// other bytes would fail as an internal marshalling error naming no field.
func validateWireID(field, id string) error {
	if err := fence.ValidateID(field, id); err != nil {
		return err
	}
	if !utf8.ValidString(id) {
		return fence.Invalid(field, "valid UTF-8", "")
	}
	return nil
}
