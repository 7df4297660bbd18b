package mem

// holderSet is the holders of one name by lease ID: a slice searched
// linearly while small (a mutex, a small semaphore: the common case, where
// a scan of a few IDs costs less than hashing one), with a map index once it
// grows past indexAt.
type holderSet struct {
	list  []*holder
	index map[string]int // ID → position in list; nil while the set is small
}

const indexAt = 16

func (s *holderSet) len() int { return len(s.list) }

func (s *holderSet) get(id string) *holder {
	if s.index != nil {
		if i, ok := s.index[id]; ok {
			return s.list[i]
		}
		return nil
	}
	for _, h := range s.list {
		if h.id == id {
			return h
		}
	}
	return nil
}

func (s *holderSet) add(h *holder) {
	s.list = append(s.list, h)
	if s.index != nil {
		s.index[h.id] = len(s.list) - 1
	} else if len(s.list) > indexAt {
		s.reindex()
	}
}

// remove deletes the holder id and returns it, or nil if there is none.
func (s *holderSet) remove(id string) *holder {
	i := -1
	if s.index != nil {
		if j, ok := s.index[id]; ok {
			i = j
		}
	} else {
		for j, h := range s.list {
			if h.id == id {
				i = j
				break
			}
		}
	}
	if i < 0 {
		return nil
	}
	h := s.list[i]
	last := len(s.list) - 1
	s.list[i] = s.list[last]
	s.list[last] = nil
	s.list = s.list[:last]
	if s.index != nil {
		delete(s.index, id)
		if i < last {
			s.index[s.list[i].id] = i
		}
	}
	return h
}

// filter keeps the holders for which keep returns true, in place.
func (s *holderSet) filter(keep func(*holder) bool) {
	n := 0
	for _, h := range s.list {
		if keep(h) {
			s.list[n] = h
			n++
		}
	}
	if n == len(s.list) {
		return
	}
	clear(s.list[n:])
	s.list = s.list[:n]
	s.reindex()
}

// reindex rebuilds the index, or drops it once the set is small again.
func (s *holderSet) reindex() {
	if len(s.list) <= indexAt/2 {
		s.index = nil
		return
	}
	s.index = make(map[string]int, len(s.list))
	for i, h := range s.list {
		s.index[h.id] = i
	}
}
