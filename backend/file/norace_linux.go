//go:build !race

package file

// raceSync is a no-op outside the race detector (see race_linux.go).
func (nf *nameFile) raceSync() {}
