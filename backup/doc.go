// Package backup writes, reads and restores Fence backup files.
//
// A backup file is one stream, written while the node goes on applying:
//
//  1. the magic line "FENCE-BACKUP 1\n";
//  2. the header: one JSON line (Header) and "\n";
//  3. the state: the bytes state.SnapshotView.WriteTo writes, in frames of
//     a 4-byte big-endian length and that many bytes (at most MaxFrame);
//     a frame of length 0 ends the state;
//  4. the trailer: one JSON line (Trailer: the state's length and the
//     SHA-256, in hex, of every byte of the file before the trailer) and
//     "\n". Nothing follows it.
//
// Reading refuses a wrong magic, a bad header, a frame or line past the
// end of the file (*FileError wrapping ErrTruncated), a checksum mismatch,
// a bad trailer and bytes after it (ErrCorrupt), naming the byte offset and
// what is wrong. A file is only trusted once its trailer has been checked:
// Verify reads it whole; Reader's state bytes end in io.EOF only after the
// trailer matched.
//
// Restore builds a fresh data dir from a backup file, raising the token
// counter so the first token after the restore is above every token issued
// before it (docs/design.md §3, "Restore never rolls back"):
//
//	first = 1 + max(backup's last token, every Floor, unix_ms(now) × 1024)
package backup
