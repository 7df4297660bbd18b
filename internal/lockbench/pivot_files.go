package lockbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The pivot files of sema bench pivot: one global JSON file with every
// server's status, or one file per server, always replaced atomically.

// serverStatus is one server's entry in a pivot file.
type serverStatus struct {
	ID      int                `json:"id"`
	Status  string             `json:"status"`
	Worker  int                `json:"worker"`
	Updates int                `json:"updates"`
	Updated time.Time          `json:"updated"`
	Metrics map[string]float64 `json:"metrics"`
}

func newServerStatus(id, payload int) serverStatus {
	st := serverStatus{ID: id, Status: "up", Metrics: map[string]float64{}}
	for i := 0; i*32 < payload; i++ { // ~32 bytes of JSON per metric
		st.Metrics[fmt.Sprintf("metric_%04d", i)] = float64(i) * 1.5
	}
	return st
}

var errLostUpdates = errors.New("lost updates")

// countUpdates sums the update counters of every server in the files.
func countUpdates(dir string, servers int, layout string) (int, error) {
	n := 0
	if layout == "global" {
		var all map[string]serverStatus
		b, err := os.ReadFile(pivotPath(dir, layout, 0))
		if err == nil {
			err = json.Unmarshal(b, &all)
		}
		for _, st := range all {
			n += st.Updates
		}
		return n, err
	}
	for i := range servers {
		var st serverStatus
		b, err := os.ReadFile(pivotPath(dir, layout, i))
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			return 0, err
		}
		n += st.Updates
	}
	return n, nil
}

// pivotPath is the data file guarded by key's lock.
func pivotPath(dir, layout string, srv int) string {
	if layout == "global" {
		return filepath.Join(dir, "server_status.json")
	}
	return filepath.Join(dir, "status", fmt.Sprintf("server_%d.json", srv))
}

func setupPivotFiles(dir string, servers int, layout string, payload int) error {
	if err := os.MkdirAll(filepath.Join(dir, "status"), 0o700); err != nil {
		return err
	}
	if layout == "global" {
		all := make(map[string]serverStatus, servers)
		for i := range servers {
			all[fmt.Sprint(i)] = newServerStatus(i, payload)
		}
		return writeJSONAtomic(pivotPath(dir, layout, 0), all)
	}
	for i := range servers {
		if err := writeJSONAtomic(pivotPath(dir, layout, i), newServerStatus(i, payload)); err != nil {
			return err
		}
	}
	return nil
}

// updatePivot is the critical section: read, decode, change one server,
// encode, write atomically.
func updatePivot(dir, layout string, srv, worker int) error {
	path := pivotPath(dir, layout, srv)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	touch := func(st *serverStatus) {
		st.Worker, st.Updates, st.Updated = worker, st.Updates+1, time.Now()
		for k := range st.Metrics {
			st.Metrics[k]++
			break
		}
	}
	if layout == "global" {
		var all map[string]serverStatus
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		st := all[fmt.Sprint(srv)]
		touch(&st)
		all[fmt.Sprint(srv)] = st
		return writeJSONAtomic(path, all)
	}
	var st serverStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	touch(&st)
	return writeJSONAtomic(path, st)
}

// writeJSONAtomic writes v to a temporary file and renames it over path, so
// readers never see a partial file.
func writeJSONAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
