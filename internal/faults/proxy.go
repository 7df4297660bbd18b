package faults

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from clients to a server on loopback and
// breaks them on demand: it resets connections (RST to both ends, calls in
// flight included) and pauses them — stops forwarding the client's
// requests, or stops reading the server's answers as a client that no
// longer reads would — then resumes or resets them.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[*pconn]struct{}
	wg    sync.WaitGroup
}

// Direction says which way a pause stops the bytes.
type Direction int

// Directions.
const (
	Up   Direction = 1 << iota // client → server: requests are held back
	Down                       // server → client: answers are not read
	Both = Up | Down
)

type pconn struct {
	client, server *net.TCPConn
	gates          [2]gate      // Up, Down
	halves         atomic.Int32 // directions that ended with a FIN
	once           sync.Once
}

// gate holds bytes back while closed: a goroutine passes it only when it is
// open.
type gate struct {
	mu   sync.Mutex
	wait chan struct{} // nil when open; closed when it opens again
}

func (g *gate) pass(dead <-chan struct{}) bool {
	g.mu.Lock()
	ch := g.wait
	g.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-dead:
		return false
	}
}

func (g *gate) close() {
	g.mu.Lock()
	if g.wait == nil {
		g.wait = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	if g.wait != nil {
		close(g.wait)
		g.wait = nil
	}
	g.mu.Unlock()
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pconn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil { // the server is down (restarting): the client sees a reset
			reset(c.(*net.TCPConn))
			continue
		}
		pc := &pconn{client: c.(*net.TCPConn), server: s.(*net.TCPConn)}
		dead := make(chan struct{})
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, pc.client, pc.server, &pc.gates[0], dead)
		go p.pipe(pc, pc.server, pc.client, &pc.gates[1], dead)
	}
}

// pipe copies src to dst, holding bytes back while g is closed, until
// either side fails; then it resets both.
func (p *Proxy) pipe(pc *pconn, src, dst *net.TCPConn, g *gate, dead chan struct{}) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		if !g.pass(dead) {
			break
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !g.pass(dead) {
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			if err == io.EOF && pc.halves.Add(1) < 2 {
				_ = dst.CloseWrite() // pass the half-close on; the other way goes on
				return
			}
			break
		}
	}
	p.drop(pc, dead)
}

func (p *Proxy) drop(pc *pconn, dead chan struct{}) {
	pc.once.Do(func() {
		close(dead)
		reset(pc.client)
		reset(pc.server)
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	})
}

// reset closes c with an RST instead of a FIN.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

func (p *Proxy) pick(rng *rand.Rand) *pconn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) == 0 {
		return nil
	}
	i := rng.IntN(len(p.conns))
	for pc := range p.conns {
		if i == 0 {
			return pc
		}
		i--
	}
	return nil
}

// Conns returns the number of open connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// ResetOne resets a random connection; false if there was none.
func (p *Proxy) ResetOne(rng *rand.Rand) bool {
	pc := p.pick(rng)
	if pc == nil {
		return false
	}
	reset(pc.client)
	reset(pc.server)
	return true
}

// open returns the open connections.
func (p *Proxy) open() []*pconn {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := make([]*pconn, 0, len(p.conns))
	for pc := range p.conns {
		all = append(all, pc)
	}
	return all
}

// ResetAll resets every connection and returns how many there were.
func (p *Proxy) ResetAll() int {
	all := p.open()
	for _, pc := range all {
		reset(pc.client)
		reset(pc.server)
	}
	return len(all)
}

// pause stops the bytes of pc in dir.
func (pc *pconn) pause(dir Direction) {
	for i, d := range []Direction{Up, Down} {
		if dir&d != 0 {
			pc.gates[i].close()
		}
	}
}

// resume lets the held bytes of pc flow on, or with doReset resets it
// and drops them.
func (pc *pconn) resume(doReset bool) {
	if doReset {
		reset(pc.client)
		reset(pc.server)
	}
	pc.gates[0].open()
	pc.gates[1].open()
}

// Pause stops the bytes of a random connection in dir and returns the
// function that ends the pause: the held bytes then flow on, or with reset
// the connection is reset and they are dropped. It returns nil if there is
// no connection.
func (p *Proxy) Pause(rng *rand.Rand, dir Direction) (end func(reset bool)) {
	pc := p.pick(rng)
	if pc == nil {
		return nil
	}
	pc.pause(dir)
	return pc.resume
}

// Close stops accepting, resets every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.ResetAll()
	p.mu.Lock()
	for pc := range p.conns {
		pc.gates[0].open()
		pc.gates[1].open()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// PauseAll stops the bytes of every open connection in dir, as Pause does
// for one.
func (p *Proxy) PauseAll(dir Direction) (end func(reset bool)) {
	all := p.open()
	for _, pc := range all {
		pc.pause(dir)
	}
	return func(doReset bool) {
		for _, pc := range all {
			pc.resume(doReset)
		}
	}
}
