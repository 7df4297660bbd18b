package remote

// GiveBack exposes giveBack to the external tests.
func GiveBack(b *Backend, name, id string) { b.giveBack(name, id) }
