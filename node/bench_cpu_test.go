package node

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used: a
// benchmark's CPU per operation depends much less on other load on the
// machine than its wall-clock rate does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
