package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers/sandbox"
	"github.com/gpulayer/gpulayer/reconcile/probe"
	"github.com/gpulayer/gpulayer/ssh"
)

type sandboxOptions struct {
	f           *factory
	hosts       int
	dir         string
	once        bool
	json        bool
	parallelism int
	shell       string
	nvlDomain   int
}

func newCmdSandbox(f *factory, runF func(*sandboxOptions) error) *cobra.Command {
	opts := &sandboxOptions{f: f}
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run simulated GPU machines on this computer, to try gpulayer without GPUs",
		Long: `sandbox starts N simulated GPU machines on 127.0.0.1. Each is a real SSH server
with its own host key, a recorded GPU topology (DGX A100, HGX H100, a two-socket
PCIe box, 2x RTX 3090 with NVLink, ...), a region, zone and network group, a
torch version and an nvidia-smi that answers from its recording. Processes
launched on a machine are real local processes; the GPUs they name in
CUDA_VISIBLE_DEVICES show as busy.

It writes into --dir a configuration (sandbox.hcl), a known_hosts file and a
client key, prints how to use them, and runs until interrupted. --dir must be
the current user's own and writable by no one else: the machines run its
programs as this user.

Each machine runs its commands with a shell interpreted inside this process
(--shell in-process, the default), so a fleet of hundreds answers without a
process per command; programs that are not the sandbox's own sh scripts still
run as real processes. --shell /bin/sh runs every command, nvidia-smi and
python3 as real processes, as a real machine would.

--nvlink-domain N adds N machines (at most 18) that share one multi-node NVLink
domain, as the compute trays of a GB200 NVL72 rack do: nvl-01, nvl-02, ... in
fleet nvl72, one zone and network group, their nvidia-smi -q reporting every
GPU registered with one fabric clique. A policy with group_locality =
"nvlink_domain" places a job on them.

--once starts the machines, probes them as 'gpulayer probe' does, prints the
result and stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.hosts < 1 || opts.hosts > sandbox.MaxHosts {
				return fmt.Errorf("--hosts must be from 1 to %d, got %d", sandbox.MaxHosts, opts.hosts)
			}
			if opts.nvlDomain < 0 || opts.nvlDomain > sandbox.MaxNVLinkDomain {
				return fmt.Errorf("--nvlink-domain must be from 0 to %d, got %d", sandbox.MaxNVLinkDomain, opts.nvlDomain)
			}
			if opts.parallelism < 1 {
				return fmt.Errorf("--parallelism must be at least 1, got %d", opts.parallelism)
			}
			if runF != nil {
				return runF(opts)
			}
			return sandboxRun(opts)
		},
	}
	cmd.Flags().IntVar(&opts.hosts, "hosts", 8, "simulate `N` machines")
	cmd.Flags().StringVar(&opts.dir, "dir", "", "write the configuration, known_hosts and key into `DIR` (default: a temporary directory, removed on exit)")
	cmd.Flags().BoolVar(&opts.once, "once", false, "probe the machines once, print the result and stop")
	cmd.Flags().BoolVar(&opts.json, "json", false, "with --once: print the facts document as JSON")
	cmd.Flags().IntVar(&opts.parallelism, "parallelism", probe.DefaultParallelism, "with --once: probe at most `N` hosts at once")
	cmd.Flags().StringVar(&opts.shell, "shell", sandbox.InProcess, "how machines run commands: `in-process` or the path of a POSIX shell such as /bin/sh")
	cmd.Flags().IntVar(&opts.nvlDomain, "nvlink-domain", 0, "also simulate `N` GB200 NVL72 compute trays in one NVLink domain (0 to 18)")
	return cmd
}

func sandboxRun(opts *sandboxOptions) (err error) {
	io := opts.f.IO
	dir := opts.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "gpulayer-sandbox-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	// SIGHUP too (the terminal closed, the ssh session to this computer
	// dropped): its default would end the process with the servers, the
	// launched processes and the temporary directory with its private key
	// left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	// This process does little but serve the machines (with --once, also
	// probes them once).
	sandbox.TuneGC()
	sb, err := sandbox.Start(sandbox.Options{Hosts: opts.hosts, Dir: dir, Shell: opts.shell, NVLinkDomain: opts.nvlDomain})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sb.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	if opts.once {
		// The same path as `gpulayer probe DIR`: load the configuration the
		// sandbox wrote, then probe every host it declares.
		cfg, diags := config.Load(sb.Dir, config.LoadOptions{Environ: os.Environ()})
		if diags.HasErrors() {
			_ = config.WriteDiagnostics(io.ErrOut, diags, cfg.Files, config.RenderOptions{Color: io.ColorEnabled()})
			return fmt.Errorf("the sandbox wrote a configuration gpulayer cannot load (a bug)")
		}
		machines, err := probe.Machines(cfg)
		if err != nil {
			return err
		}
		doc := probeMachines(ctx, io, machines, opts.parallelism, probe.DefaultTimeout)
		return reportFacts(io, doc, "", opts.json)
	}

	printSandboxUsage(opts.f, sb, opts.dir == "")
	<-ctx.Done()
	fmt.Fprintln(io.ErrOut, "\nstopping the sandbox machines…")
	return nil
}

func printSandboxUsage(f *factory, sb *sandbox.Sandbox, temporary bool) {
	out := f.IO.Out
	regions := map[string]bool{}
	var names []string
	for _, m := range sb.Machines {
		if !regions[m.Region] {
			regions[m.Region] = true
			names = append(names, m.Region)
		}
	}
	fmt.Fprintf(out, "Sandbox: %d simulated GPU machines on 127.0.0.1 in %s.\n\n", len(sb.Machines), strings.Join(names, " and "))
	fmt.Fprintf(out, "  configuration  %s\n", sb.ConfigPath())
	fmt.Fprintf(out, "  known_hosts    %s\n", sb.KnownHostsPath())
	fmt.Fprintf(out, "  client key     %s\n\n", sb.KeyPath())
	fmt.Fprintf(out, "From another terminal:\n\n")
	fmt.Fprintf(out, "  gpulayer probe %s\n", ssh.Quote(sb.Dir))
	m := sb.Machines[0]
	fmt.Fprintf(out, "  ssh -i %s -o UserKnownHostsFile=%s -p %d %s@127.0.0.1 nvidia-smi topo -m\n\n",
		ssh.Quote(sb.KeyPath()), ssh.Quote(sb.KnownHostsPath()), m.Port, sb.User)
	if temporary {
		fmt.Fprintf(out, "The directory is removed when the sandbox stops; use --dir to keep it.\n")
	}
	fmt.Fprintf(out, "Press Ctrl-C to stop the machines.\n")
}
