package state

import "strconv"

// SessionRequestID is the request_id of the session-bound acquire with
// sequence number seq on session: the machine gives such an acquire this
// id when it has none, and a node registers the acquire's waiter under it.
// It starts with a NUL byte, which no client request_id may contain.
func SessionRequestID(session, seq uint64) string {
	return "\x00s" + strconv.FormatUint(session, 10) + "." + strconv.FormatUint(seq, 10)
}

// STUB until the state helper lands sessions.
func (m *impl) sessionInfo(id uint64, now int64) (SessionInfo, bool) { return SessionInfo{}, false }
func (m *impl) sessionCount() int                                    { return 0 }
