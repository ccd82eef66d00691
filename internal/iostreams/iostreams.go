// Package iostreams is the one place that knows where a command's output goes,
// whether it is a terminal, and whether colour is on. Commands write through
// an IOStreams value, so tests run them against buffers without a terminal.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams carries a command's input and outputs and the facts about them
// that decide how output looks.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY  bool
	stdoutTTY bool
	stderrTTY bool
	noColor   bool
}

// System returns streams bound to the process's stdin, stdout and stderr.
// Colour is off when NO_COLOR is set (to any value, https://no-color.org) or
// when stdout is not a terminal.
func System() *IOStreams {
	s := &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: isTerminal(os.Stdout),
		stderrTTY: isTerminal(os.Stderr),
	}
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		s.noColor = true
	}
	return s
}

// Test returns streams over in-memory buffers: not a terminal, no colour.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, noColor: true}, in, out, errOut
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// IsStdinTTY reports whether stdin is a terminal: a person can answer a
// question there.
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// SetStdinTTY lets tests pretend a person is typing.
func (s *IOStreams) SetStdinTTY(v bool) { s.stdinTTY = v }

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether stderr is a terminal; progress output is shown
// only then.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStdoutTTY and SetStderrTTY let tests pretend to be on a terminal.
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// DisableColor turns colour off (the --no-color flag).
func (s *IOStreams) DisableColor() { s.noColor = true }

// ColorEnabled reports whether styled output may use colour: only on a
// terminal, and never with NO_COLOR or --no-color.
func (s *IOStreams) ColorEnabled() bool { return s.stdoutTTY && !s.noColor }
