package harness

import (
	"net"
	"strings"
)

// FreeAddr returns a loopback address (127.0.0.1:port) that was free a
// moment ago. Another process may take it before the caller binds it:
// Start retries on another port when it picked the port and the process
// says "address already in use".
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func addrInUse(log string) bool { return strings.Contains(log, "address already in use") }
