package sema

import (
	"errors"
	"testing"
)

// TestEnvURL: the flag, else $SEMA_BACKEND, else the user's state directory.
func TestEnvURL(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		flag    string
		env     map[string]string
		url     string
		dir     string
		wantErr bool
	}{
		{flag: "mem://", env: map[string]string{"SEMA_BACKEND": "file:///x"}, url: "mem://"},
		{env: map[string]string{"SEMA_BACKEND": "file:///x", "HOME": "/home/a"}, url: "file:///x"},
		{env: map[string]string{"XDG_STATE_HOME": "/st", "HOME": "/home/a"}, url: "file:///st/sema/locks", dir: "/st/sema/locks"},
		{env: map[string]string{"XDG_STATE_HOME": "rel/ative", "HOME": "/home/a"}, url: "file:///home/a/.local/state/sema/locks", dir: "/home/a/.local/state/sema/locks"},
		{env: map[string]string{"HOME": "/home/with space"}, url: "file:///home/with%20space/.local/state/sema/locks", dir: "/home/with space/.local/state/sema/locks"},
		{env: map[string]string{}, wantErr: true},
		{env: map[string]string{"HOME": "relative"}, wantErr: true},
	} {
		url, dir, err := envURL(tc.flag, env(tc.env))
		if tc.wantErr {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%+v: err %v, want ErrInvalidArgument", tc, err)
			}
			continue
		}
		if err != nil || url != tc.url || dir != tc.dir {
			t.Errorf("%+v: got %q %q %v", tc, url, dir, err)
		}
	}
}
