package file

// Wakeups returns how many times other processes woke b: rings of its
// doorbells and close events received.
func Wakeups(b *Backend) int64 { return b.wakes.Load() }

// Looks returns how many times b read a state after a close event.
func Looks(b *Backend) int64 { return b.looks.Load() }
