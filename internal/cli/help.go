package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sema-dev/sema"
)

// helpCommand prints the help of a command or a topic.
func helpCommand() *command {
	return &command{
		name:     "help",
		summary:  "print the help of a command or a topic",
		synopsis: "sema help [COMMAND | TOPIC]",
		args: func() []string {
			var words []string
			for _, c := range commands() {
				if !c.hidden {
					words = append(words, c.name)
				}
			}
			for _, t := range topics() {
				words = append(words, t.name)
			}
			return words
		},
		run: func(_ context.Context, env *Env, args []string) int {
			switch {
			case len(args) == 1 && (args[0] == "-h" || args[0] == "--help"):
				helpCommand().printHelp(env.Stdout)
				return ExitOK
			case len(args) == 0:
				usage(env.Stdout)
				return ExitOK
			case len(args) > 1:
				fmt.Fprintln(env.Stderr, "sema help: one COMMAND or TOPIC at most (see 'sema help')")
				return ExitUsage
			}
			if c := lookup(args[0]); c != nil && !c.hidden {
				c.printHelp(env.Stdout)
				return ExitOK
			}
			for _, t := range topics() {
				if t.name == args[0] {
					t.print(env.Stdout)
					return ExitOK
				}
			}
			fmt.Fprintf(env.Stderr, "sema help: no command or topic %q (see 'sema help')\n", args[0])
			return ExitUsage
		},
	}
}

// topic is a help text that is not a command's.
type topic struct {
	name, summary string
	print         func(w io.Writer)
}

func topics() []topic {
	return []topic{
		{"backends", "the backend URLs and what each one guarantees", printBackends},
		{"exit-codes", "what sema's exit statuses mean", printExitCodes},
		{"environment", "the environment variables sema reads and sets", printEnvironment},
		{"output", "what goes to standard output, standard error and the logs", printOutput},
	}
}

// exitCode is one of sema's own exit statuses.
type exitCode struct {
	code    int
	meaning string
}

// exitCodes is the table the help prints; the constants are in cli.go.
func exitCodes() []exitCode {
	return []exitCode{
		{ExitOK, "success (sema run: the job's own status passes through, 128+N if signal N killed it)"},
		{ExitFailure, "nothing to act on (sema release: nothing held)"},
		{ExitUsage, "bad flags or arguments (EX_USAGE)"},
		{ExitBackend, "the backend is unreachable or failing (EX_UNAVAILABLE)"},
		{ExitInternal, "a bug in sema (EX_SOFTWARE)"},
		{ExitNotAcquired, "sema run: not acquired: held, with --nonblock or when --timeout expired (EX_TEMPFAIL; -E sets another)"},
		{ExitLeaseLost, "sema run: the lease was lost (expired, force-released, --max-hold) and the job was terminated"},
		{ExitCannotExec, "sema run: the command cannot be executed (as in the shell)"},
		{ExitNotFound, "sema run: the command was not found (as in the shell)"},
	}
}

func printExitCodes(w io.Writer) {
	fmt.Fprintln(w, "Exit statuses of sema (sema run passes its job's own status through):")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range exitCodes() {
		fmt.Fprintf(tw, "  %d\t%s\n", e.code, e.meaning)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nA job's own exit status 75 or 76 cannot be told from sema's; give -E another\ncode if the job may exit with 75 (flock(1) has the same caveat).")
}

// envVar is an environment variable sema reads or sets.
type envVar struct {
	name, meaning string
}

func envVars() []envVar {
	return []envVar{
		{sema.EnvBackend, "the backend URL when --backend is not given (see 'sema help backends')"},
		{sema.EnvAuthToken, "the bearer token sent to a sema server (http, https)"},
		{"XDG_STATE_HOME", "the default file:// directory is $XDG_STATE_HOME/sema/locks (sema serve: .../sema/server)"},
		{"HOME", "without XDG_STATE_HOME: ~/.local/state/sema/locks (and ~/.local/state/sema/server)"},
		{"LOGNAME, USER", "the user in sema run's default owner label (USER@HOST:PID CMD)"},
		{"GOMAXPROCS", "sema serve: the CPUs its Go code runs on, unless --procs"},
	}
}

func jobVars() []envVar {
	return []envVar{
		{"SEMA_NAME", "the semaphore's name"},
		{"SEMA_TOKEN", "the fencing token: strictly increasing per name; hand it to what you guard"},
		{"SEMA_LEASE_ID", "the lease's ID (sema status shows it; sema release --lease takes it)"},
		{"SEMA_LIMIT", "the semaphore's limit"},
		{"SEMA_WEIGHT", "the permits this lease holds"},
	}
}

func printEnvironment(w io.Writer) {
	fmt.Fprintln(w, "sema reads:")
	fmt.Fprintln(w)
	printVars(w, envVars())
	fmt.Fprintln(w, "\nsema run sets, in its job's environment (and prints, for sema run NAME without a job):")
	fmt.Fprintln(w)
	printVars(w, jobVars())
	fmt.Fprintln(w, "\nGo programs open the same backend as the sema command with sema.OpenEnv, which\nreads SEMA_BACKEND and SEMA_AUTH_TOKEN the same way.")
}

func printVars(w io.Writer, vs []envVar) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, v := range vs {
		fmt.Fprintf(tw, "  %s\t%s\n", v.name, v.meaning)
	}
	tw.Flush()
}

// backendDoc describes one kind of backend URL.
type backendDoc struct {
	url, scope, notes string
}

func backendDocs() []backendDoc {
	return []backendDoc{
		{"file:///abs/dir", "processes of one host, no daemon", "the default: $XDG_STATE_HOME/sema/locks or ~/.local/state/sema/locks; a holder that dies frees its permits at once (Linux)"},
		{"http://host:port", "many hosts, through sema serve", "https:// with TLS; the token in $SEMA_AUTH_TOKEN"},
		{"redis://host:port/db", "many hosts, through Redis 7+", "rediss:// with TLS; ?addr=…&addr=… or ?cluster=true for a Redis Cluster"},
		{"postgres://user@host/db", "many hosts, through PostgreSQL", "a lease table; expiry on the database's clock"},
		{"etcd://h1:2379,h2:2379/prefix", "many hosts, through etcd", "etcds:// with TLS; linearizable"},
		{"mem://", "one process", "refused by run, ls, status and release: each sema process would have its own memory and exclude nothing; sema serve --backend mem:// serves one memory to all its clients (state and fencing tokens are lost when it stops)"},
	}
}

func printBackends(w io.Writer) {
	fmt.Fprintln(w, "--backend URL, else $SEMA_BACKEND, else file:// in the user's state directory.")
	fmt.Fprintln(w)
	for _, b := range backendDocs() {
		fmt.Fprintf(w, "  %s\n      %s: %s\n", b.url, b.scope, b.notes)
	}
	fmt.Fprintf(w, "\nSchemes this binary knows: %s.\n", strings.Join(sema.Schemes(), ", "))
	fmt.Fprintln(w, "A URL without a scheme is refused with a suggestion: host:port → http://host:port,\na path → file:///abs/path.")
}

func printOutput(w io.Writer) {
	fmt.Fprint(w, `Standard output carries a command's result: the tables and JSON of ls and
status, what release released, the lease of "sema run NAME" (without a job),
the version, completion scripts, and help asked for.

Standard error carries messages for people, one line each, starting with
"sema COMMAND: ": errors, what sema run waits for (not with -q), why a job
was terminated. Warnings of the library and the backends are written as such
lines too. sema run's job writes to the same standard output and error.

sema serve is a service: once started, every line it writes on standard error
is a log record (slog, logfmt: time=… level=… msg=…), at --log-level; only a
bad command line is reported as a plain line before that.
`)
}
