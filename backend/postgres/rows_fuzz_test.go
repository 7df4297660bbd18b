package postgres

import (
	"errors"
	"testing"
)

// FuzzRows feeds the row readers answers that replaced functions or
// altered tables could give: they return an error wrapping errAnswer or
// rows they vouch for, never panic, and never pass on a lease with a token
// or weight below 1, no ID, or an expiry not after its grant.
func FuzzRows(f *testing.F) {
	f.Add(kindGranted, "id", int64(1), int64(1), int64(1), int64(0), int64(1795466085669684), int64(1795466095669684), kindHolder)
	f.Add(kindGrant, "id", int64(7), int64(2), int64(3), int64(0), int64(1795466085669684), int64(1795466095669684), kindHeld)
	f.Add(kindHeld, "", int64(0), int64(0), int64(3), int64(2), int64(0), int64(0), kindHolder)
	f.Add(kindGrant, "", int64(0), int64(-1), int64(0), int64(0), int64(5), int64(4), kindGranted)
	f.Fuzz(func(t *testing.T, kind, id string, token, weight, lim, n, t1, t3 int64, kind2 string) {
		r := row{kind: kind, name: "n", id: id, owner: "o", host: "h", pid: 1, weight: weight, token: token, lim: lim, n: n, t1: t1, t2: t1, t3: t3}
		r2 := r
		r2.kind = kind2
		for _, rs := range [][]row{{r}, {r, r2}, {r2, r}, nil} {
			grants, st, rest, err := status(rs)
			if err == nil && st.kind == kindGranted {
				err = st.checkLease()
			}
			if err != nil {
				if !errors.Is(err, errAnswer) {
					t.Fatalf("status(%+v): %v wraps no errAnswer", rs, err)
				}
				continue
			}
			if len(grants)+len(rest) > len(rs) {
				t.Fatalf("status(%+v) made up rows", rs)
			}
			leases := grants
			if st.kind == kindGranted {
				leases = append(leases, st)
			}
			for _, l := range leases {
				g := l.grant()
				if g.Token < 1 || g.Token > 1<<63-1 || g.Weight < 1 || g.ID == "" || !g.ExpiresAt.After(g.AcquiredAt) {
					t.Fatalf("status(%+v) passed on the lease %+v", rs, g)
				}
			}
			if st.kind == kindHeld {
				_ = heldError(st, rest).Error()
			}
		}
	})
}
