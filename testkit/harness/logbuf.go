package harness

import (
	"strings"
	"sync"
)

// logBuffer holds a process's output across its starts: all of it, or its
// last max bytes when max > 0. Safe for the copying goroutines of os/exec
// and a reader at once.
type logBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if l.max > 0 && len(l.b) > l.max {
		l.b = append(l.b[:0], l.b[len(l.b)-l.max:]...)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// since is the output since the last line starting with header (that line
// included), or all of it.
func (l *logBuffer) since(header string) string {
	s := l.String()
	if strings.HasPrefix(s, header) {
		s = s[len(header):]
		if i := strings.LastIndex(s, "\n"+header); i >= 0 {
			return s[i+1:]
		}
		return header + s
	}
	if i := strings.LastIndex(s, "\n"+header); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tail is the last n bytes of s, cut at a line start when one is near.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 200 {
		s = s[i+1:]
	}
	return "…\n" + s
}
