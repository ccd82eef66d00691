package facts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// lineByLineFabric is the probe's Fabric filter as it was before it cut
// the -q output at GPU lines: every line looked at in turn. The filter
// must print what this one printed, for any output.
const lineByLineFabric = `
gpulayer_fabric_line_by_line() {
	gpulayer_q=$(gpulayer_bounded 20 nvidia-smi -q)
	gpulayer_s=$?
	case $gpulayer_q in
	*'    Fabric'*) ;;
	*) return "$gpulayer_s" ;;
	esac
	gpulayer_in=
	gpulayer_ifs=$IFS
	IFS='
'
	set -f
	for gpulayer_line in $gpulayer_q; do
		case $gpulayer_line in
		'        '*) [ -z "$gpulayer_in" ] || printf '%s\n' "$gpulayer_line" ;;
		'GPU '*)
			gpulayer_in=
			printf '%s\n' "$gpulayer_line"
			;;
		'    Fabric'*)
			gpulayer_in=1
			printf '%s\n' "$gpulayer_line"
			;;
		*) gpulayer_in= ;;
		esac
	done
	set +f
	IFS=$gpulayer_ifs
	return "$gpulayer_s"
}
`

// fabricFilterHarness runs both filters on each -q output file named in
// its arguments, framing what each printed and its status.
const fabricFilterHarness = `
gpulayer_timeout=
for gpulayer_test_f in "$@"; do
	SMIQ=$gpulayer_test_f
	export SMIQ
	printf '==gpulayer-test:new\n'
	gpulayer_fabric
	printf '==gpulayer-test:status %s\n' "$?"
	printf '==gpulayer-test:old\n'
	gpulayer_fabric_line_by_line
	printf '==gpulayer-test:status %s\n' "$?"
	printf '==gpulayer-test:end\n'
done
`

// fabricInputs are -q outputs to compare the filters on: the whole output
// of a GB200 tray, and random ones made of the lines that could confuse a
// filter (GPU and Fabric look-alikes, indents one short or long, empty
// and blank lines, no GPU line before a Fabric one, none at the end).
func fabricInputs() []string {
	vocab := []string{
		"GPU 00000000:01:00.0", "GPU 00000000:02:00.0", "GPU ", "GPU", "GPUs : 2", " GPU 3", "\tGPU 4",
		"    Fabric", "    Fabric Manager : x", "    Fabricated", "   Fabric", "     Fabric", "        Fabric",
		"        State                             : Completed", "        Status : Success",
		"        CliqueId : 32766", "        Health", "            Bandwidth : Full", "        ", "       x",
		"    Product Name : NVIDIA H100", "    GPU UUID : GPU-1", "Attached GPUs : 8",
		"==============NVSMI LOG==============", "", "", " ", "  *", "$x '\\' %s",
	}
	r := rand.New(rand.NewPCG(19, 6))
	out := []string{wholeQ}
	for range 120 {
		var b strings.Builder
		if r.IntN(4) == 0 {
			b.WriteString("\n")
		}
		n := r.IntN(24)
		for i := range n {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(vocab[r.IntN(len(vocab))])
		}
		for range r.IntN(3) {
			b.WriteString("\n")
		}
		out = append(out, b.String())
	}
	return out
}

// TestFabricFilterPrintsWhatTheLineByLineFilterPrinted runs the probe's
// filter and the line-by-line one on the same outputs in each shell a
// machine may have as sh, and in the sandbox's interpreter.
func TestFabricFilterPrintsWhatTheLineByLineFilterPrinted(t *testing.T) {
	defs := strings.TrimSuffix(strings.TrimRight(Script(), "\n"), `gpulayer_probe "$@" </dev/null`)
	if defs == strings.TrimRight(Script(), "\n") {
		t.Fatal("probe.sh no longer ends with its call of gpulayer_probe; update the test")
	}
	program := defs + lineByLineFabric + fabricFilterHarness
	inputs := fabricInputs()
	dir := t.TempDir()
	var files []string
	for i, in := range inputs {
		f := filepath.Join(dir, fmt.Sprintf("q%03d", i))
		if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	bin := binWith(t, "cat")
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte("#!/bin/sh\ncat \"$SMIQ\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin}
	runs := map[string]func() (string, error){
		"in-process": func() (string, error) {
			prog, err := syntax.NewParser().Parse(strings.NewReader(program), "probe.sh")
			if err != nil {
				return "", err
			}
			var out strings.Builder
			r, err := interp.New(interp.Env(expand.ListEnviron(env...)), interp.StdIO(nil, &out, os.Stderr),
				interp.Params(append([]string{"--"}, files...)...))
			if err != nil {
				return "", err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = r.Run(ctx, prog)
			return out.String(), err
		},
	}
	for _, shell := range []string{"dash", "bash", "busybox"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed; .ci/run installs it", shell)
			}
			continue
		}
		runs[shell] = func() (string, error) {
			args := append([]string{"-s", "--"}, files...)
			if shell == "busybox" {
				args = append([]string{"sh"}, args...)
			}
			cmd := exec.Command(path, args...)
			cmd.Stdin = strings.NewReader(program)
			cmd.Env = env
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			return string(out), err
		}
	}
	for shell, run := range runs {
		t.Run(shell, func(t *testing.T) {
			out, err := run()
			if err != nil {
				t.Fatal(err)
			}
			cases := strings.Split(out, "==gpulayer-test:end\n")
			if len(cases) != len(inputs)+1 || cases[len(inputs)] != "" {
				t.Fatalf("%d outputs for %d inputs:\n%s", len(cases)-1, len(inputs), out)
			}
			printed := 0
			for i, c := range cases[:len(inputs)] {
				newOut, oldOut, ok := strings.Cut(strings.TrimPrefix(c, "==gpulayer-test:new\n"), "==gpulayer-test:old\n")
				if !ok {
					t.Fatalf("input %d: no old output in %q", i, c)
				}
				if newOut != oldOut {
					t.Errorf("input %d %q:\nprinted\n%s\nthe line-by-line filter printed\n%s", i, inputs[i], newOut, oldOut)
				}
				if !strings.HasPrefix(newOut, "==gpulayer-test:status") {
					printed++
				}
			}
			// The inputs exercise the filter: most print something.
			if printed < len(inputs)/2 {
				t.Errorf("only %d of %d inputs printed anything", printed, len(inputs))
			}
		})
	}
}
