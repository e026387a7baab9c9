// Command appliance is vmvault's single binary: the daemon, the lab demo and the
// command-line tools that drive the repository and the engines. It only wires
// flags and configuration to the packages that do the work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. Subcommands live in their own cmd_*.go file and
// register themselves in init, so adding one never touches this file.
type command struct {
	name    string // e.g. "repo init"
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv carries the process streams so that tests can run commands in
// process, and the seams those tests watch a command through (nil in main).
type cliEnv struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string

	serveReady func(addr string) // serve: called with the address once it listens
	// instant export: called with what was printed once the export serves
	instantReady func(printed string)
	demo         demoHooks
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks errors that are the caller's fault; they exit with status 2.
var errUsage = errors.New("usage")

// defaultMemoryLimit is the Go heap's soft limit unless GOMEMLIMIT says
// otherwise. The backup pipeline's live data is bounded (chunks in flight,
// read-ahead blocks, compressor state: about 100 MiB); without a limit the
// collector lets the heap double that, and buffer pools survive between
// collections. With it, peak RSS stays under 200 MiB for any disk size
// (docs/PERFORMANCE.md).
const defaultMemoryLimit = 160 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// VMVAULT_CPUPROFILE=FILE writes a CPU profile of the command, for
	// `go tool pprof` when a benchmark number needs explaining.
	if path := os.Getenv("VMVAULT_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
		}
	}
	code := run(ctx, &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	// VMVAULT_MEMPROFILE=FILE writes the heap as the command ends.
	if path := os.Getenv("VMVAULT_MEMPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

// run dispatches to the longest registered command name that prefixes args.
func run(ctx context.Context, env *cliEnv, args []string) int {
	var cmd *command
	var rest []string
	for n := min(len(args), 3); n >= 1; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			cmd, rest = c, args[n:]
			break
		}
	}
	if cmd == nil {
		switch {
		case len(args) == 0:
			// No command is a mistake (a script that lost its arguments):
			// usage on stderr and status 2, as for an unknown command.
			usage(env.stderr)
			return 2
		case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
			usage(env.stdout)
			return 0
		}
		return unknownCommand(env.stderr, args)
	}
	if err := cmd.run(ctx, env, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(env.stderr, "appliance %s: %v\n", cmd.name, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// unknownCommand answers a command that is not one: a group alone
// ("appliance repo") lists its commands; a near miss ("repo lst") says
// what was meant; anything else gets the whole list. Status 2.
func unknownCommand(w io.Writer, args []string) int {
	var group []string
	for n := range commands {
		if strings.HasPrefix(n, args[0]+" ") {
			group = append(group, n)
		}
	}
	sort.Strings(group)
	typed := strings.Join(args[:min(len(args), 3)], " ")
	best, bestD := "", 3
	for n := range commands {
		if len(group) > 0 && !strings.HasPrefix(n, args[0]+" ") {
			continue // "repo lst" means a repo command, never "demo"
		}
		words := len(strings.Fields(n))
		if words > len(args) {
			continue
		}
		if d := editDistance(strings.Join(args[:words], " "), n); d < bestD {
			best, bestD = n, d
		}
	}
	switch {
	case best != "":
		fmt.Fprintf(w, "appliance: unknown command %q; did you mean %q?\n", typed, best)
		fmt.Fprintf(w, "Run 'appliance %s -h' for its flags, or 'appliance help' for every command.\n", best)
	case len(group) > 0:
		if len(args) == 1 {
			fmt.Fprintf(w, "appliance %s: a group of commands; say which:\n\n", args[0])
		} else {
			fmt.Fprintf(w, "appliance: unknown command %q; the %s commands are:\n\n", typed, args[0])
		}
		for _, n := range group {
			fmt.Fprintf(w, "  %-22s %s\n", n, commands[n].summary)
		}
		fmt.Fprintln(w, "\nRun 'appliance COMMAND -h' for the flags of a command.")
	default:
		fmt.Fprintf(w, "appliance: unknown command %q\n\n", typed)
		usage(w)
	}
	return 2
}

// editDistance is the Levenshtein distance of a and b (short strings).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: appliance COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-22s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'appliance COMMAND -h' for the flags of a command.")
}

// newFlagSet returns a flag set that reports errors instead of exiting, so
// that a bad flag is a usage error the caller sees with exit status 2.
func newFlagSet(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("appliance "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// (`image backup --repo R img1 --json`), which scripts tend to do.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
