package fence

import "time"

// Input bounds. Requests outside them are refused with an *InvalidError that
// names the field and the bound; nothing is changed.
const (
	MinTTL          = 10 * time.Millisecond     // least TTL of a lease
	DefaultMaxTTL   = 24 * time.Hour            // default greatest TTL (the server may be configured lower or higher)
	LongestMaxTTL   = 10 * 365 * 24 * time.Hour // the greatest MaxTTL a store may be configured with (ten years)
	MaxWait         = 24 * time.Hour            // greatest wait of a blocking acquire
	MaxLockDelay    = 24 * time.Hour            // greatest lock-delay
	MaxNameBytes    = 512                       // lock and resource names
	MaxOwnerBytes   = 256                       // owner labels
	MaxIDBytes      = 256                       // request_id and op_id
	MaxValueBytes   = 1 << 20                   // values written to fenced resources (1 MiB)
	MaxTokenJSONInt = 1<<53 - 1                 // tokens stay exact in JSON below this
)
