package rearm

import (
	"testing"
	"time"
)

func TestDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	d := 10 * time.Second
	for _, c := range []struct {
		name   string
		dl     time.Time
		d      time.Duration
		want   time.Time
		change bool
	}{
		{"none set", time.Time{}, d, now.Add(d), true},
		{"plenty left", now.Add(7 * time.Second), d, now.Add(7 * time.Second), false},
		{"half left", now.Add(5 * time.Second), d, now.Add(5 * time.Second), false},
		{"under half", now.Add(4 * time.Second), d, now.Add(d), true},
		{"passed", now.Add(-time.Second), d, now.Add(d), true},
		{"more than d", now.Add(time.Hour), d, now.Add(d), true},
		{"no timeout, one set", now.Add(time.Second), 0, time.Time{}, true},
		{"no timeout, none set", time.Time{}, 0, time.Time{}, false},
	} {
		got, change := Deadline(c.dl, c.d, now)
		if !got.Equal(c.want) || change != c.change {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, change, c.want, c.change)
		}
	}
}
