// Command gpulayer declares distributed GPU jobs in HCL, plans where they run
// from what the machines report over SSH, and applies the plan.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

func main() {
	os.Exit(run(os.Args[1:], iostreams.System()))
}

// run executes one command line and returns the process exit code. Commands
// report failures as errors; an *exitError carries a specific code (validate
// uses 1 for an invalid configuration, fmt --check uses 3 as Terraform does).
func run(args []string, io *iostreams.IOStreams) int {
	root := newCmdRoot(&factory{IO: io})
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(io.ErrOut, "Error: %s\n", iostreams.Sanitize(ee.err.Error(), true))
		}
		return ee.code
	}
	fmt.Fprintf(io.ErrOut, "Error: %s\n", iostreams.Sanitize(err.Error(), true))
	return 1
}

// exitError ends a command with a given code. err, when set, is printed;
// commands that have already printed their own report (validate's
// diagnostics) leave it nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e *exitError) Unwrap() error { return e.err }
