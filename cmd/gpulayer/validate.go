package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
)

type validateOptions struct {
	f       *factory
	dir     string
	json    bool
	vars    []config.VarArg // --var and --var-file, in command-line order
	environ []string
}

func newCmdValidate(f *factory, runF func(*validateOptions) error) *cobra.Command {
	opts := &validateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check the configuration in DIR (default: the current directory) and report every problem",
		Long: `validate reads every *.hcl and *.hcl.json file of DIR, resolves variables,
locals and references, and reports every problem it finds in one run, each
with its file and line. It contacts no machine.

A required variable (one without a default) that is given no value is not
an error here, as in terraform validate: its value is unknown, what is
computed from it is checked as far as it can be without it, and its
validation rules are skipped. So a CI job without the secrets can validate.
plan, apply and the other commands that need values still require them.

Exit status: 0 when the configuration is valid (warnings allowed), 1 when not.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dir = "."
			if len(args) == 1 {
				opts.dir = args[0]
			}
			opts.environ = os.Environ()
			if runF != nil {
				return runF(opts)
			}
			return validateRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the result as JSON")
	addVarFlags(cmd, &opts.vars)
	return cmd
}

// addVarFlags adds --var and --var-file, which share one list so that a
// later flag wins over an earlier one whichever kind each is (Terraform's
// rule).
func addVarFlags(cmd *cobra.Command, vars *[]config.VarArg) {
	cmd.Flags().Var(&varArgFlag{args: vars}, "var", "set an input variable: `NAME=VALUE` (repeatable)")
	cmd.Flags().Var(&varArgFlag{args: vars, file: true}, "var-file", "read input variables from `FILE` (repeatable)")
}

type varArgFlag struct {
	args *[]config.VarArg
	file bool
}

func (v *varArgFlag) String() string { return "" }

func (v *varArgFlag) Type() string {
	if v.file {
		return "file"
	}
	return "name=value"
}

func (v *varArgFlag) Set(s string) error {
	if v.file {
		*v.args = append(*v.args, config.VarArg{File: s})
	} else {
		*v.args = append(*v.args, config.VarArg{Assignment: s})
	}
	return nil
}

func validateRun(opts *validateOptions) error {
	io := opts.f.IO
	// As terraform validate does: a variable given no value is unknown, so
	// that a configuration validates without its secrets.
	cfg, diags := config.Load(opts.dir, config.LoadOptions{Vars: opts.vars, Environ: opts.environ, UnsetVariablesUnknown: true})
	if opts.json {
		if err := config.WriteDiagnosticsJSON(io.Out, diags); err != nil {
			return err
		}
	} else {
		if len(diags) > 0 {
			if err := config.WriteDiagnostics(io.ErrOut, diags, cfg.Files, config.RenderOptions{Color: io.ColorEnabled()}); err != nil {
				return err
			}
		}
		if !diags.HasErrors() {
			msg := "Success! The configuration is valid."
			if len(diags) > 0 {
				msg = "Success! The configuration is valid, but there were some warnings, shown above."
			}
			fmt.Fprintln(io.Out, msg)
		}
	}
	if diags.HasErrors() {
		return &exitError{code: 1}
	}
	return nil
}
