package postgres

import (
	"strings"
	"unicode/utf8"

	"github.com/fenceworks/fence"
)

// validateText refuses what a PostgreSQL text column cannot store: a NUL
// byte in the resource, and a NUL byte or invalid UTF-8 in the op_id.
// Without it the statement fails with SQLSTATE 22021, an untyped error that
// names no field and aborts the caller's transaction.
func validateText(resource, opID string) error {
	if strings.IndexByte(resource, 0) >= 0 {
		return fence.Invalid("resource", "free of NUL bytes", "")
	}
	if strings.IndexByte(opID, 0) >= 0 || !utf8.ValidString(opID) {
		return fence.Invalid("op_id", "valid UTF-8 free of NUL bytes", "")
	}
	return nil
}
