package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpulayer/gpulayer/ssh"
)

// machineEnv names the variable every session of a machine carries: the
// machine's directory. Its tools read their records there, and the
// machine's processes are found by it.
const machineEnv = "GPULAYER_SANDBOX_MACHINE"

// A tool is a program of a sandbox machine implemented in Go: getenv reads
// the environment it was started with.
type tool func(getenv func(string) string, args []string, stdout, stderr io.Writer) int

// tools are the machines' programs implemented in Go, by their names in
// bin/. nvidia-smi is one because it is most of a probe's work: as a sh
// script it cost ~14 ms of interpreter per probe, in Go ~0.1 ms.
var tools = map[string]tool{
	"nvidia-smi": nvidiaSMI,
}

// toolFlag, followed by a tool's name, is the first argument with which a
// machine's bin/ shim starts the program that runs the sandbox, busybox
// style, so that a real shell (--shell /bin/sh, or OpenSSH's sshd serving
// a prepared machine) runs the same implementation the in-process shell
// calls directly. A program that does not know the flag, such as a test
// binary of a package that does not link this one, rejects it at once.
const toolFlag = "--gpulayer-sandbox-tool="

// init answers as a tool when the program was started by a shim. It is an
// init function, not a call each main must remember: the shim names the
// executable that wrote it, which links this package, so every program
// that can start a sandbox (gpulayer, the benchmarks, any test binary) can
// serve its tools. A forgotten call would instead run a test binary's
// tests again from inside a probe.
func init() {
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[1], toolFlag) {
		return
	}
	name := strings.TrimPrefix(os.Args[1], toolFlag)
	t, ok := tools[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "gpulayer sandbox: no tool named %q\n", name)
		os.Exit(127)
	}
	os.Exit(t(os.Getenv, os.Args[2:], os.Stdout, os.Stderr))
}

// toolShim is the sh script at bin/NAME that runs tool name in program exe.
func toolShim(name, exe string) []byte {
	return fmt.Appendf(nil, `#!/bin/sh
# %[1]s of a gpulayer sandbox machine. It is implemented in Go in package
# providers/sandbox, inside the program that started the sandbox, which
# answers as %[1]s when its first argument is %[2]s%[1]s.
exec %[3]s %[4]s "$@"
`, name, toolFlag, ssh.Quote(exe), ssh.Quote(toolFlag+name))
}

// writeToolShims writes a shim in bin for every tool, pointing at this
// program.
func writeToolShims(bin string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sandbox: finding this program for the machines' nvidia-smi: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return fmt.Errorf("sandbox: finding this program for the machines' nvidia-smi: %w", err)
	}
	for name := range tools {
		if err := writeFile(filepath.Join(bin, name), toolShim(name, exe), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// toolAt returns the tool whose shim is at path, if path is one in bin.
func toolAt(bin, path string) (tool, bool) {
	if filepath.Dir(path) != bin {
		return nil, false
	}
	t, ok := tools[filepath.Base(path)]
	return t, ok
}
