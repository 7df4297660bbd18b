package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sema-dev/sema/internal/supervise"
)

// errUsage marks an error in the command line: exit code ExitUsage.
var errUsage = errors.New("usage")

// usageError wraps errUsage with a message for the user.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// newFlagSet returns a FlagSet that reports errors instead of exiting. Its
// output is discarded: parseFlags reports errors in one line, and -h prints
// the usage (synopsis, help text, flags) to w.
func newFlagSet(name, synopsis string, w io.Writer) *flag.FlagSet {
	return newFlagSetHelp(name, synopsis, "", w)
}

// newFlagSetHelp is newFlagSet with a help text printed between the synopsis
// and the flags.
func newFlagSetHelp(name, synopsis, help string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sema "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagOut.Store(fs, w)
	fs.Usage = func() {} // errors are reported by parseFlags, help by printHelp
	flagHelp.Store(fs, func() {
		fmt.Fprintf(w, "usage: %s\n", synopsis)
		if help != "" {
			fmt.Fprint(w, help)
		}
		if hasFlags(fs) {
			fmt.Fprintln(w, "\nflags:")
			fs.SetOutput(w)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	})
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// flagOut maps a FlagSet made by newFlagSet to its command's stderr.
var flagOut sync.Map // *flag.FlagSet → io.Writer

// flagHelp maps a FlagSet made by newFlagSet to its help printer.
var flagHelp sync.Map // *flag.FlagSet → func()

// parseFlags parses args into fs. done is true when the command must stop
// with code: ExitOK after -h (usage printed), ExitUsage after a bad flag
// (reported in one line on the writer given to newFlagSet).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := parseFlagsErr(fs, args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return ExitOK, true
	}
	if w, ok := flagOut.Load(fs); ok {
		fmt.Fprintf(w.(io.Writer), "%s: %s\n", fs.Name(), errMessage(err))
	}
	return ExitUsage, true
}

// parseFlagsErr parses args into fs and prints the usage on -h. Errors other
// than flag.ErrHelp wrap errUsage and say where to find help.
func parseFlagsErr(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if help, ok := flagHelp.Load(fs); ok {
			help.(func())()
		}
		return err
	}
	return usageError("%s (see '%s -h')", err.Error(), fs.Name())
}

// durationFlag is a time.Duration flag that remembers whether it was set.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (try 30s, 5m, 1h30m)")
	}
	if d < 0 {
		return fmt.Errorf("must not be negative")
	}
	f.d, f.set = d, true
	return nil
}

// exitCodeFor maps an error from the command line, the library or the
// backend to an exit code.
func exitCodeFor(err error) int {
	if errors.Is(err, errUsage) {
		return ExitUsage
	}
	return supervise.ExitCode(err)
}

// errMessage renders err for the user without the internal usage marker.
func errMessage(err error) string {
	return strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
}
