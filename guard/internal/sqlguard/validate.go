package sqlguard

import "github.com/fenceworks/fence"

// ValidateCheck checks the arguments of a guard check: the resource name
// (field "resource") and the token.
func ValidateCheck(resource string, token fence.Token) error {
	if err := fence.ValidateName("resource", resource); err != nil {
		return err
	}
	return fence.ValidateToken(token)
}

// ValidateOp checks the arguments of an idempotent operation: those of
// ValidateCheck, and an op_id that is not empty and at most
// fence.MaxIDBytes.
func ValidateOp(resource string, token fence.Token, opID string) error {
	if err := ValidateCheck(resource, token); err != nil {
		return err
	}
	if opID == "" {
		return fence.Invalid("op_id", "not empty", "")
	}
	return fence.ValidateID("op_id", opID)
}
