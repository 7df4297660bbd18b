package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema/internal/human"
	"github.com/sema-dev/sema/internal/supervise"
)

// errUsage marks an error in the command line: exit code ExitUsage.
var errUsage = errors.New("usage")

// usageError wraps errUsage with a message for the user.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// newFlagSet returns an empty FlagSet for c that reports errors instead of
// printing them or exiting.
func (c *command) newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("sema "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse registers c's flags with register and parses args the way getopt
// users expect: "-nq" is "-n -q", "-w5" is "-w 5", and --name equals -name.
// Flags may follow the arguments when c.interspersed ("sema status NAME
// --json"); "--" ends the flags. On -h or --help it prints c's help on
// env.Stdout and returns done with ExitOK; on a bad flag it prints one line
// on env.Stderr and returns done with ExitUsage.
func (c *command) parse(env *Env, args []string, register func(*flag.FlagSet)) (rest []string, code int, done bool) {
	fs := c.newFlagSet()
	register(fs)
	rest, err := parseArgs(fs, args, c.interspersed)
	switch {
	case err == nil:
		return rest, 0, false
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(env.Stdout)
		return nil, ExitOK, true
	}
	fmt.Fprintf(env.Stderr, "sema %s: %s (see 'sema help %s')\n", c.name, err, c.name)
	return nil, ExitUsage, true
}

// parseArgs parses args into fs and returns the arguments that are not
// flags.
func parseArgs(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	args = expandShort(fs, args)
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		ended := len(left) < len(args) && args[len(args)-len(left)-1] == "--"
		if !interspersed || ended || len(left) == 0 {
			return append(rest, left...), nil
		}
		rest, args = append(rest, left[0]), expandShort(fs, left[1:]) // a positional argument: keep it, parse on
	}
}

// expandShort rewrites getopt-style clusters of one-letter flags ("-nq",
// "-w5", "-nw5") into separate flags, up to the first argument that is not a
// flag or "--". Arguments that name a defined flag are left alone.
func expandShort(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil || strings.HasPrefix(a, "--") || len(a) == 2 {
			out = append(out, a)
			if f != nil && !hasValue && !isBool(f) && i+1 < len(args) {
				i++
				out = append(out, args[i]) // the flag's value, whatever it looks like
			}
			continue
		}
		exp, ok := expandCluster(fs, a[1:])
		if !ok {
			out = append(out, a) // fs.Parse will say what is wrong
			continue
		}
		out = append(out, exp...)
		if last := fs.Lookup(strings.TrimPrefix(exp[len(exp)-1], "-")); last != nil && !isBool(last) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// expandCluster splits "nw5" into "-n", "-w", "5" when every letter up to a
// flag that takes a value is a one-letter flag.
func expandCluster(fs *flag.FlagSet, s string) ([]string, bool) {
	var out []string
	for i, r := range s {
		f := fs.Lookup(string(r))
		if f == nil {
			return nil, false
		}
		out = append(out, "-"+string(r))
		if !isBool(f) {
			if v := s[i+len(string(r)):]; v != "" {
				out = append(out, v)
			}
			return out, true
		}
	}
	return out, true
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagGroup is one flag and its aliases (the names that share its Value).
type flagGroup struct {
	names []string // one-letter names first, then long ones, each sorted
	arg   string   // the value's name ("" for a boolean flag)
	usage string
	def   string // default, if worth showing
}

// flagGroups returns fs's flags, aliases grouped, sorted by their first
// long name.
func flagGroups(fs *flag.FlagSet) []*flagGroup {
	var groups []*flagGroup
	byValue := map[flag.Value]*flagGroup{}
	fs.VisitAll(func(f *flag.Flag) {
		g := byValue[f.Value]
		if g == nil {
			g = &flagGroup{}
			byValue[f.Value] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, f.Name)
		if f.Usage != "" {
			g.arg, g.usage = flag.UnquoteUsage(f)
			if isBool(f) {
				g.arg = ""
			}
			if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" && !strings.Contains(f.Usage, "(default") {
				g.def = d
			}
		}
	})
	for _, g := range groups {
		sort.Slice(g.names, func(i, j int) bool {
			a, b := g.names[i], g.names[j]
			if (len(a) == 1) != (len(b) == 1) {
				return len(a) == 1
			}
			return a < b
		})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].long() < groups[j].long() })
	return groups
}

// long is the group's first long name, else its one-letter name.
func (g *flagGroup) long() string {
	for _, n := range g.names {
		if len(n) > 1 {
			return n
		}
	}
	return g.names[0]
}

// spelled is the group's names as typed: "-w, --timeout, --wait".
func (g *flagGroup) spelled() string {
	s := make([]string, len(g.names))
	for i, n := range g.names {
		if len(n) == 1 {
			s[i] = "-" + n
		} else {
			s[i] = "--" + n
		}
	}
	return strings.Join(s, ", ")
}

// printFlags prints fs's flags for a help text.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	for _, g := range flagGroups(fs) {
		head := "  " + g.spelled()
		if len(g.names) == 1 && len(g.names[0]) > 1 {
			head = "      " + g.spelled() // align long-only flags after "-x, "
		}
		if g.arg != "" {
			head += " " + g.arg
		}
		usage := g.usage
		if g.def != "" {
			usage += " (default " + g.def + ")"
		}
		fmt.Fprintf(w, "%s\n        %s\n", head, strings.ReplaceAll(usage, "\n", "\n        "))
	}
}

// durationFlag is a duration flag: a plain number is seconds, as flock(1)
// takes them ("10", "0.5"); Go durations work too ("1m30s"). It remembers
// whether it was set.
type durationFlag struct {
	d   time.Duration
	set bool
}

// durationVar defines a duration flag with default def.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*plainDuration)(p), name, usage)
}

// plainDuration is a time.Duration flag that takes plain seconds too.
type plainDuration time.Duration

func (d *plainDuration) String() string {
	if d == nil || *d == 0 {
		return "0s"
	}
	return time.Duration(*d).String()
}

func (d *plainDuration) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = plainDuration(v)
	return nil
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// parseDuration reads seconds ("10", "2.5") or a Go duration ("1m30s"),
// not negative.
func parseDuration(s string) (time.Duration, error) {
	var d time.Duration
	if secs, err := strconv.ParseFloat(s, 64); err == nil && strings.Trim(s, "-0123456789.") == "" {
		if secs > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("too long")
		}
		d = time.Duration(secs * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("not a duration (seconds, or 30s, 5m, 1h30m)")
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	return d, nil
}

// exitCodeFor maps an error from the command line, the library or the
// backend to an exit code.
func exitCodeFor(err error) int {
	if errors.Is(err, errUsage) {
		return ExitUsage
	}
	return supervise.ExitCode(err)
}

// errMessage renders err for the user: without the internal usage marker,
// and without the "sema: " of the library's sentinels, which a message
// printed as "sema CMD: …" would otherwise repeat.
func errMessage(err error) string {
	return human.Message(strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
}
