package ui

import "github.com/fenceworks/fence"

// Mode is what the page may do: --ui=off|read|full.
type Mode string

const (
	// Off serves nothing: /ui/ is 404.
	Off Mode = "off"
	// Read serves the page with every action hidden.
	Read Mode = "read"
	// Full serves the page with its actions (the release button, shown
	// only to an admin; the server judges the call as any other).
	Full Mode = "full"
)

// DefaultMode is the mode of a server given no --ui: the page shows, and
// acting from it is asked for explicitly.
const DefaultMode = Read

// ParseMode reads a --ui value; anything but off, read or full is an
// *fence.InvalidError naming config.ui.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Read, Full:
		return m, nil
	}
	return "", fence.Invalid("config.ui", "off, read or full", s)
}
