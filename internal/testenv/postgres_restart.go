package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RestartErr stops the server — a fast shutdown, or kill -9 of the
// postmaster if crash (the next start then runs crash recovery) — and
// starts it again on the same port and data directory, waiting until it
// accepts connections. After a kill -9 the postmaster's children still
// hold its shared memory until they notice its death, and a start before
// that fails: it is tried again for up to 30 s. It returns an error
// instead of failing the test, so that fault injectors can call it.
func (p *Postgres) RestartErr(crash bool) error {
	if crash {
		p.Kill()
	} else {
		p.Stop(2) // SIGINT: fast shutdown
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_ = os.Remove(filepath.Join(p.Dir, "data", "postmaster.pid"))
		err := p.Start()
		if err == nil {
			err = p.waitReady(p.readyErr)
		}
		if err == nil || !strings.Contains(err.Error(), "shared memory block") || time.Now().After(deadline) {
			return err
		}
		p.Stop(0) // it exited: forget it
		time.Sleep(100 * time.Millisecond)
	}
}
