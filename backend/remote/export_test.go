package remote

// GiveBack exposes giveBack to the external tests.
func GiveBack(b *Backend, name, id string) { b.giveBack(name, id) }

// PipesDialed reports how many connections the backend's pipes (pipe.go)
// have dialed.
func PipesDialed(b *Backend) int64 { return b.pipes.dialed.Load() }

// PipeAlways sends every release of b on a pipe, overlapping another or
// not.
func PipeAlways(b *Backend) { b.pipeAlways = true }
