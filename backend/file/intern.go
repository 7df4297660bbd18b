package file

// interner keeps the strings (lease IDs, owner and host labels) of the
// last record a nameFile decoded. Each step by another process rewrites a
// name's record with nearly the same entries, and every step here must
// decode it again: with the interner, a string seen before costs a map
// lookup, not an allocation and a check. It holds the strings of one
// record only, so it does not grow with the leases ever granted. It is
// used by one goroutine at a time (under the nameFile's lk).
type interner struct {
	name        string // the name whose records these are ("" if unknown)
	ids, labels strTable
	seen        map[string]bool // lease IDs of the record being decoded (see decodeState)
}

// strTable holds checked strings of one kind: those of the last record
// and those of the record being decoded.
type strTable struct{ prev, cur map[string]string }

func newInterner(name string) *interner {
	return &interner{
		name:   name,
		ids:    strTable{prev: map[string]string{}, cur: map[string]string{}},
		labels: strTable{prev: map[string]string{}, cur: map[string]string{}},
		seen:   map[string]bool{},
	}
}

// get returns the checked string equal to b, if there is one.
func (t *strTable) get(b []byte) (string, bool) {
	if s, ok := t.cur[string(b)]; ok {
		return s, true
	}
	if s, ok := t.prev[string(b)]; ok {
		t.cur[s] = s
		return s, true
	}
	return "", false
}

func (t *strTable) keep(s string) { t.cur[s] = s }

func (t *strTable) next() {
	t.prev, t.cur = t.cur, t.prev
	clear(t.cur)
}

// done starts the next record: this one's strings become the previous.
func (in *interner) done() {
	in.ids.next()
	in.labels.next()
	clear(in.seen)
}
