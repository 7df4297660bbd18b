package supervise

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/sema-dev/sema"
)

// hold keeps the lease without a job (sema run NAME): it prints the lease
// on standard output, as the job's environment would have it, and holds it
// until a signal, the front's death or the lease's loss. It returns 0 when
// told to stop (the lease is released then), ExitLeaseLost if the lease
// was lost.
func (s *supervisor) hold(l *sema.Lease) int {
	var b strings.Builder
	for _, kv := range jobEnv(nil, l) {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "%s=%s\n", k, shellQuote(v))
	}
	if _, err := os.Stdout.WriteString(b.String()); err != nil {
		s.out.msg("cannot print the lease (%v): releasing it", err)
		return ExitInternal
	}
	if !s.cfg.Quiet {
		s.out.msg("holding %q (token %d) until interrupted", s.cfg.Name, l.Token())
	}
	for {
		select {
		case b := <-s.cmds:
			if b == ctlCont || b == 0 || b > 64 {
				continue
			}
			return 0
		case sig := <-s.sigs:
			if sig != syscall.SIGPIPE {
				return 0
			}
		case <-s.frontGone:
			return 0
		case <-l.Done():
			s.out.msg("lease on %q lost (%v)", s.cfg.Name, l.Err())
			return ExitLeaseLost
		}
	}
}

// shellQuote quotes v for a POSIX shell if it needs it.
func shellQuote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+,-") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
