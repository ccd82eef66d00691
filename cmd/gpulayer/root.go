package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

// factory carries what every command needs from its surroundings. Commands
// take it instead of reaching for os.Stdout or the environment, so each one
// runs in tests against buffers.
type factory struct {
	IO *iostreams.IOStreams
}

func newCmdRoot(f *factory) *cobra.Command {
	var chdir string
	var noColor bool
	root := &cobra.Command{
		Use:   "gpulayer",
		Short: "Declare distributed GPU jobs in HCL, plan their placement, apply the plan",
		Long: `gpulayer reads the fleets, policies and jobs declared in *.hcl files,
probes the machines over SSH, places each job on the tightest group of machines
and the best-connected free GPUs, and launches it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if noColor {
				f.IO.DisableColor()
			}
			if chdir != "" {
				if err := os.Chdir(chdir); err != nil {
					return fmt.Errorf("--chdir: %w", err)
				}
			}
			return nil
		},
	}
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.PersistentFlags().StringVar(&chdir, "chdir", "", "switch to `DIR` before doing anything else")
	root.PersistentFlags().BoolVar(&noColor, "no-color", false, "disable colour in output (also: NO_COLOR=1)")

	root.AddCommand(newCmdVersion(f, nil))
	root.AddCommand(newCmdValidate(f, nil), newCmdFmt(f, nil))
	root.AddCommand(newCmdTopo(f))
	root.AddCommand(newCmdProbe(f, nil), newCmdSandbox(f, nil))
	root.AddCommand(newCmdPlan(f, nil), newCmdShow(f, nil), newCmdApply(f, nil), newCmdDestroy(f, nil))
	root.AddCommand(newCmdStatus(f, nil), newCmdWait(f, nil), newCmdLogs(f, nil), newCmdWatch(f, nil), newCmdForceUnlock(f, nil))
	root.AddCommand(newCmdDemo(f, nil), newCmdState(f))
	return root
}
