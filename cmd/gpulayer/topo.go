package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/nvmltopo"
)

// maxTopoInput bounds what topo reads from a file or stdin: real
// `nvidia-smi topo -m` output is a few kilobytes.
const maxTopoInput = 4 << 20

// localTopoTimeout bounds how long reading this machine's topology may take.
const localTopoTimeout = 20 * time.Second

func newCmdTopo(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Show a machine's GPU topology and pick the best-connected GPUs",
		Long: `topo reads the links between a machine's GPUs, as nvidia-smi topo -m prints
them, from a FILE, from stdin (-), or from this machine.`,
	}
	cmd.AddCommand(newCmdTopoShow(f, nil))
	cmd.AddCommand(newCmdTopoPick(f, nil))
	return cmd
}

// topoSource says where a command reads the topology from and how this
// machine's is read.
type topoSource struct {
	file  string // "" for this machine, "-" for stdin
	local func(ctx context.Context, note io.Writer) (*topology.Matrix, error)
}

type topoShowOptions struct {
	f    *factory
	src  topoSource
	json bool
	// fabric reads this machine's GPUs' NVLink fabric registrations,
	// asked only without FILE.
	fabric fabricReader
}

func newCmdTopoShow(f *factory, runF func(*topoShowOptions) error) *cobra.Command {
	opts := &topoShowOptions{f: f, src: topoSource{local: localMatrix}, fabric: nvmltopo.LocalFabric}
	cmd := &cobra.Command{
		Use:   "show [FILE|-]",
		Short: "Show the GPU link matrix, NVLink islands and NUMA groups",
		Example: `  gpulayer topo show
  nvidia-smi topo -m | gpulayer topo show -
  gpulayer topo show recorded.txt --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.src.file = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return topoShowRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print as JSON")
	return cmd
}

type topoPickOptions struct {
	f         *factory
	src       topoSource
	count     int
	busy      []int
	multiNode bool
	json      bool
}

func newCmdTopoPick(f *factory, runF func(*topoPickOptions) error) *cobra.Command {
	opts := &topoPickOptions{f: f, src: topoSource{local: localMatrix}}
	cmd := &cobra.Command{
		Use:   "pick [FILE|-] --count K",
		Short: "Pick the best-connected free GPUs and say why",
		Long: `pick chooses K free GPUs: the set whose slowest link is fastest, then the most
total link speed, then (with --multi-node) the most GPUs next to a NIC, then
the fewest NUMA nodes, then the fewest links to the GPUs left free (so intact
NVLink islands stay free), then the lowest indices.`,
		Example: `  gpulayer topo pick --count 4
  gpulayer topo pick recorded.txt --count 2 --busy 0,3 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.src.file = args[0]
			}
			if opts.multiNode {
				opts.src.local = localMatrixWithNICs
			}
			if runF != nil {
				return runF(opts)
			}
			return topoPickRun(opts)
		},
	}
	cmd.Flags().IntVar(&opts.count, "count", 0, "how many GPUs to pick")
	cmd.Flags().IntSliceVar(&opts.busy, "busy", nil, "GPU indices already in use, e.g. 0,3")
	cmd.Flags().BoolVar(&opts.multiNode, "multi-node", false, "the job spans machines: prefer GPUs with a NIC at PIX or PXB")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print as JSON")
	_ = cmd.MarkFlagRequired("count")
	return cmd
}

// load reads and parses the topology. Every failure, a parse error
// included, ends the command with exit code 1 and a message naming the
// input.
func (s topoSource) load(streams *iostreams.IOStreams) (*topology.Matrix, error) {
	var name string
	var r io.Reader
	switch s.file {
	case "":
		ctx, cancel := context.WithTimeout(context.Background(), localTopoTimeout)
		defer cancel()
		m, err := s.local(ctx, streams.ErrOut)
		if err != nil {
			return nil, &exitError{code: 1, err: err}
		}
		return m, nil
	case "-":
		name, r = "stdin", streams.In
	default:
		file, err := os.Open(s.file)
		if err != nil {
			return nil, &exitError{code: 1, err: err}
		}
		defer file.Close()
		name, r = s.file, file
	}
	b, err := readAtMost(r, maxTopoInput)
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: %w", name, err)}
	}
	m, err := topology.ParseSMI(string(b))
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: %w", name, err)}
	}
	return m, nil
}

func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("more than %d bytes: not nvidia-smi topo -m output", limit)
	}
	return b, nil
}

// topoShowJSON is `topo show --json`. Links use the canonical tokens ("X"
// on the diagonal, SYS for old drivers' SOC, N/A where the source said
// so); unknown affinities are null.
type topoShowJSON struct {
	GPUs         int        `json:"gpus"`
	Links        [][]string `json:"links"`
	NICs         []string   `json:"nics"`
	GPUNICLinks  [][]string `json:"gpu_nic_links"`
	NUMAAffinity []*string  `json:"numa_affinity"`
	CPUAffinity  []*string  `json:"cpu_affinity"`
	GPUNUMAID    []*int     `json:"gpu_numa_id"`
	// NVLinkDomain and NVLinkFabricError are this machine's multi-node
	// NVLink domain as NVML reports it, or why it is in none; without
	// FILE only, and absent without a fabric.
	NVLinkDomain      string `json:"nvlink_domain,omitempty"`
	NVLinkFabricError string `json:"nvlink_fabric_error,omitempty"`
}

func showJSON(m *topology.Matrix) topoShowJSON {
	n := m.GPUs()
	out := topoShowJSON{
		GPUs:         n,
		Links:        make([][]string, n),
		NICs:         make([]string, len(m.NICs)),
		GPUNICLinks:  make([][]string, n),
		NUMAAffinity: make([]*string, n),
		CPUAffinity:  make([]*string, n),
		GPUNUMAID:    make([]*int, n),
	}
	for i, name := range m.NICs {
		out.NICs[i] = iostreams.Sanitize(name, false)
	}
	for i := 0; i < n; i++ {
		out.Links[i] = make([]string, n)
		for j := 0; j < n; j++ {
			out.Links[i][j] = linkToken(m.Links[i][j])
		}
		out.GPUNICLinks[i] = []string{}
		if i < len(m.NICLinks) {
			for _, l := range m.NICLinks[i] {
				out.GPUNICLinks[i] = append(out.GPUNICLinks[i], linkToken(l))
			}
		}
		if i < len(m.NUMAAffinity) && m.NUMAAffinity[i] != nil {
			s := m.NUMAAffinity[i].String()
			out.NUMAAffinity[i] = &s
		}
		if i < len(m.CPUAffinity) && m.CPUAffinity[i] != "" {
			s := iostreams.Sanitize(m.CPUAffinity[i], false)
			out.CPUAffinity[i] = &s
		}
		if i < len(m.GPUNUMAID) && m.GPUNUMAID[i] >= 0 {
			id := m.GPUNUMAID[i]
			out.GPUNUMAID[i] = &id
		}
	}
	return out
}

// linkToken is the link as nvidia-smi writes it, N/A when unknown.
func linkToken(l topology.Link) string {
	if l.Kind == topology.LinkUnknown {
		return "N/A"
	}
	return l.String()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func topoShowRun(opts *topoShowOptions) error {
	m, err := opts.src.load(opts.f.IO)
	if err != nil {
		return err
	}
	var domain string
	var ferr error
	if opts.src.file == "" {
		ctx, cancel := context.WithTimeout(context.Background(), localTopoTimeout)
		domain, ferr = opts.fabric.domain(ctx)
		cancel()
	}
	if opts.json {
		js := showJSON(m)
		js.NVLinkDomain = domain
		if ferr != nil {
			js.NVLinkFabricError = iostreams.Sanitize(ferr.Error(), false)
		}
		return writeJSON(opts.f.IO.Out, js)
	}
	_, err = io.WriteString(opts.f.IO.Out, renderTopoShow(m, newTopoStyles(opts.f.IO))+fabricLine(domain, ferr))
	return err
}

// topoPickJSON is `topo pick --json`: the chosen GPUs, the numbers that
// ranked them, whether the search proved them best, and what the job asked
// for. bottleneck is null for fewer than two GPUs.
type topoPickJSON struct {
	GPUs       []int   `json:"gpus"`
	Bottleneck *string `json:"bottleneck"`
	Total      int     `json:"total"`
	NUMANodes  int     `json:"numa_nodes"`
	NICLocal   int     `json:"nic_local"`
	Cross      int     `json:"cross"`
	Optimal    bool    `json:"optimal"`
	FreeAfter  []int   `json:"free_after"`
	Count      int     `json:"count"`
	Busy       []int   `json:"busy"`
	MultiNode  bool    `json:"multi_node"`
}

// topoPickResult is one pick and what it was asked, read by both views.
type topoPickResult struct {
	pick      topology.Pick
	free      topology.DeviceSet
	freeAfter topology.DeviceSet
	count     int
	busy      []int
	multiNode bool
}

func (r topoPickResult) json() topoPickJSON {
	out := topoPickJSON{
		GPUs:      r.pick.GPUs,
		Total:     r.pick.Total,
		NUMANodes: r.pick.NUMANodes,
		NICLocal:  r.pick.NICLocal,
		Cross:     r.pick.Cross,
		Optimal:   r.pick.Optimal,
		FreeAfter: r.freeAfter.Indices(),
		Count:     r.count,
		Busy:      r.busy,
		MultiNode: r.multiNode,
	}
	if len(r.pick.GPUs) >= 2 {
		b := linkToken(r.pick.Bottleneck)
		out.Bottleneck = &b
	}
	return out
}

func topoPickRun(opts *topoPickOptions) error {
	m, err := opts.src.load(opts.f.IO)
	if err != nil {
		return err
	}
	n := m.GPUs()
	if opts.count < 0 {
		return &exitError{code: 1, err: fmt.Errorf("--count %d: want 0 or more GPUs", opts.count)}
	}
	free := topology.AllDevices(n)
	busy := []int{}
	for _, b := range opts.busy {
		if b < 0 || b >= n {
			return &exitError{code: 1, err: fmt.Errorf("--busy %d: this machine has GPU0 to GPU%d", b, n-1)}
		}
		if free.Has(b) {
			busy = append(busy, b)
		}
		free &^= topology.DeviceSetOf(b)
	}
	p, err := topology.PickDevices(m, free, opts.count, topology.PickOptions{MultiNode: opts.multiNode})
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	sortInts(busy)
	res := topoPickResult{
		pick:      p,
		free:      free,
		freeAfter: free &^ topology.DeviceSetOf(p.GPUs...),
		count:     opts.count,
		busy:      busy,
		multiNode: opts.multiNode,
	}
	if opts.json {
		return writeJSON(opts.f.IO.Out, res.json())
	}
	_, err = io.WriteString(opts.f.IO.Out, renderTopoPick(m, res, newTopoStyles(opts.f.IO)))
	return err
}

func sortInts(s []int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// gpuList writes GPU indices compactly: "GPU0-3,6".
func gpuList(idx []int) string {
	if len(idx) == 0 {
		return "none"
	}
	return "GPU" + topology.FormatList(idx)
}

// topoStyles colours the human views. Without colour every style is the
// identity, so the plain view is the same text.
type topoStyles struct {
	color  bool
	link   func(topology.Link, string) string
	group  func(int, string) string // the n-th NUMA group or NVLink island
	header func(string) string
	faint  func(string) string
}

func newTopoStyles(streams *iostreams.IOStreams) topoStyles {
	if !streams.ColorEnabled() {
		return plainTopoStyles()
	}
	return colorTopoStyles(lipgloss.NewRenderer(streams.Out))
}

func plainTopoStyles() topoStyles {
	same := func(s string) string { return s }
	return topoStyles{
		link:   func(_ topology.Link, s string) string { return s },
		group:  func(_ int, s string) string { return s },
		header: same,
		faint:  same,
	}
}

// groupColors tell NUMA groups and NVLink islands apart.
var groupColors = []string{"4", "5", "6", "3", "2", "1", "12", "13"}

func colorTopoStyles(r *lipgloss.Renderer) topoStyles {
	nv := r.NewStyle().Foreground(lipgloss.Color("2")).Bold(true)
	near := r.NewStyle().Foreground(lipgloss.Color("6"))
	mid := r.NewStyle().Foreground(lipgloss.Color("3"))
	far := r.NewStyle().Foreground(lipgloss.Color("1"))
	faint := r.NewStyle().Faint(true)
	bold := r.NewStyle().Bold(true)
	return topoStyles{
		color: true,
		link: func(l topology.Link, s string) string {
			switch l.Kind {
			case topology.LinkNV:
				return nv.Render(s)
			case topology.LinkPIX, topology.LinkPXB:
				return near.Render(s)
			case topology.LinkPHB, topology.LinkNODE:
				return mid.Render(s)
			case topology.LinkSYS:
				return far.Render(s)
			}
			return faint.Render(s)
		},
		group: func(g int, s string) string {
			return r.NewStyle().Foreground(lipgloss.Color(groupColors[g%len(groupColors)])).Bold(true).Render(s)
		},
		header: func(s string) string { return bold.Render(s) },
		faint:  func(s string) string { return faint.Render(s) },
	}
}
