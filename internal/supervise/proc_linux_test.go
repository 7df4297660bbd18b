package supervise

import "testing"

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in    string
		state byte
		pgrp  int
		ok    bool
	}{
		{"123 (sleep) S 1 123 123 0", 'S', 123, true},
		{"7 (a) b) (c) Z 1 42 7", 'Z', 42, true},
		{"7 (x", 0, 0, false},
		{"7 (x) R 1", 0, 0, false},
		{"7 (x) R 1 notanumber", 0, 0, false},
	} {
		state, pgrp, ok := parseStat([]byte(tc.in))
		if state != tc.state || pgrp != tc.pgrp || ok != tc.ok {
			t.Errorf("%q: got %c %d %v", tc.in, state, pgrp, ok)
		}
	}
}
