package harness

import (
	"strings"

	"github.com/fenceworks/fence/testkit/freeport"
)

// FreeAddr returns a loopback address (127.0.0.1:port) that was free a
// moment ago. Another process may take it before the caller binds it:
// Start retries on another port when it picked the port and the process
// says "address already in use".
// No address is handed out twice in one process (freeport.Pick), so the
// nodes of one cluster never share a port.
func FreeAddr() (string, error) { return freeport.Pick() }

func addrInUse(log string) bool { return strings.Contains(log, "address already in use") }
