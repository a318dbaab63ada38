package fence

import "strconv"

// Token is a fencing token: a number that strictly grows with each grant of any
// lock in one Fence store. The first token of a new store is 1; 0 is never a
// valid token. Tokens stay below 2^53 so that they are exact in JSON and
// JavaScript.
type Token uint64

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }
