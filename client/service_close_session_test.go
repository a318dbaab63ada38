package client_test

import (
	"errors"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestServiceCloseSessionRefusedIsTyped: the remote Service's CloseSession
// passes the server's refusal on as the typed error: closing a session the
// server does not have is refused with ErrSessionExpired, not reported as
// closed.
//
// Kills the negation mutant of service.go's CloseSession `err != nil`: it
// reads the reply of a refused call (nil) and panics.
func TestServiceCloseSessionRefusedIsTyped(t *testing.T) {
	svc := client.NewService(serverURL)
	_, err := svc.CloseSession(ctxFor(t), fence.CloseSessionRequest{ID: 1 << 62})
	if !errors.Is(err, fence.ErrSessionExpired) {
		t.Fatalf("closing an unknown session = %v, want fence.ErrSessionExpired", err)
	}
}
