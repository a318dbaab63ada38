// Package plant switches on known faults ("planted bugs") in a build made
// with the plantbug tag, so that the chaos harness (testkit/chaos) can show
// that it catches them. A release build (no tag) cannot contain them: there
// [On] is a constant false that the compiler inlines, so every
//
//	if plant.On(plant.X) && ... { ... }
//
// branch and the helper it calls are compiled away (TestReleaseHasNoPlantedCode
// builds cmd/fence both ways and checks).
//
// In a plantbug build, the environment variable FENCE_PLANTBUG names the
// faults that are on, comma-separated (unset or empty: none). It is read
// once, when the program starts; an unknown name panics then, naming the
// known ones. A binary with a fault on says so on stderr at start, with the
// marker "fence-plantbug-active".
//
//	go build -tags plantbug -o bin/fence-plantbug ./cmd/fence
//	FENCE_PLANTBUG=skip-compare bin/fence-plantbug serve --listen 127.0.0.1:7420 --data-dir /tmp/d
//
// The faults (their hooks are in package state, each a one-line branch
// calling a helper named plant...):
//
//   - [IDsForgotten] "ids-forgotten": a remembered op_id, and a session's
//     saved result of a sequenced command, are forgotten by the next command
//     applied at a later server time (instead of after MinIDRetention), so a
//     write or add retried after a lost reply is applied again.
//   - [SkipCompare] "skip-compare": a fenced write, add or delete skips the
//     token compare: a token older than the resource's last accepted one is
//     accepted (always), and the resource's last token goes back to it. A
//     token never issued is still refused.
//   - [GrantHeld] "grant-held": an acquire of a lock held by another live
//     lease is granted when the last token issued is a multiple of 3 (about
//     every third acquire that would have had to wait or been busy); the
//     lease it displaces ends as if released, and its holder is not told.
//   - [SharedBeside] "shared-beside": a shared acquire of a lock held by
//     an exclusive lease (or queued for) is granted beside it when the last
//     token issued is a multiple of 3: an exclusive holder with company.
//   - [SetSplit] "set-split": a released set's lease stays on its locks
//     other than the first when the last token issued is a multiple of 3 —
//     the set is released on one lock and still held on the others.
//
// The planted logic is deterministic (it depends only on the machine's
// state and the command), so a replica replaying the log decides as the
// run did, as long as it runs with the same FENCE_PLANTBUG.
package plant

// Bug names a planted fault.
type Bug string

// The planted faults.
const (
	IDsForgotten Bug = "ids-forgotten"
	SkipCompare  Bug = "skip-compare"
	GrantHeld    Bug = "grant-held"
	SharedBeside Bug = "shared-beside"
	SetSplit     Bug = "set-split"
)

// Bugs lists every planted fault.
var Bugs = []Bug{IDsForgotten, SkipCompare, GrantHeld, SharedBeside, SetSplit}

// EnvVar is the environment variable naming the faults that are on.
const EnvVar = "FENCE_PLANTBUG"
