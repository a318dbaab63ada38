package state

// STUB: replaced by the real implementation.

import (
	"io"

	"github.com/fenceworks/fence"
)

type impl struct{}

func newMachine(cfg Config) *Machine                      { return &Machine{} }
func (m *impl) apply(cmd Command) Result                  { panic("unimplemented") }
func (m *impl) now() int64                                { panic("unimplemented") }
func (m *impl) lastToken() fence.Token                    { panic("unimplemented") }
func (m *impl) nextDeadline() (int64, bool)               { panic("unimplemented") }
func (m *impl) lock(name string, now int64) LockInfo      { panic("unimplemented") }
func (m *impl) locks(prefix string, now int64) []LockInfo { panic("unimplemented") }
func (m *impl) resource(name string) ResourceState        { panic("unimplemented") }
func (m *impl) snapshot(w io.Writer) error                { panic("unimplemented") }
func (m *impl) restore(r io.Reader) error                 { panic("unimplemented") }
func encodeCommand(c Command) ([]byte, error)             { panic("unimplemented") }
func decodeCommand(c *Command, b []byte) error            { panic("unimplemented") }
