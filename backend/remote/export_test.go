package remote

// GiveBack exposes giveBack to the external tests.
func GiveBack(b *Backend, name, id string) { b.giveBack(name, id) }

// MuxDialed reports how many sema-mux connections b has opened.
func MuxDialed(b *Backend) int64 { return b.mux.dialed.Load() }

// NoMux makes b speak HTTP only.
func NoMux(b *Backend) { b.noMux = true }
