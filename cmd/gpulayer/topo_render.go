package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/topology"
)

// numaGroup is the GPUs that share one NUMA affinity ("" when unknown).
type numaGroup struct {
	numa string
	gpus []int
}

// numaGroups groups GPUs by NUMA affinity, in order of their lowest GPU.
func numaGroups(m *topology.Matrix) []numaGroup {
	var groups []numaGroup
	at := map[string]int{}
	for i := 0; i < m.GPUs(); i++ {
		key := ""
		if i < len(m.NUMAAffinity) {
			key = m.NUMAAffinity[i].String()
		}
		g, ok := at[key]
		if !ok {
			g = len(groups)
			at[key] = g
			groups = append(groups, numaGroup{numa: key})
		}
		groups[g].gpus = append(groups[g].gpus, i)
	}
	return groups
}

// topoSummary is the one-line description: `8 GPUs, all NV12; NUMA 0:
// GPU0-3, NUMA 1: GPU4-7; 8 NICs`.
func topoSummary(m *topology.Matrix) string {
	n := m.GPUs()
	var parts []string
	head := plural(n, "GPU")
	if n >= 2 {
		head += ", " + linkCounts(m)
	}
	parts = append(parts, head)
	islands := m.NVLinkIslands()
	if len(islands) > 0 && !(len(islands) == 1 && islands[0].Len() == n) {
		names := make([]string, len(islands))
		for i, is := range islands {
			names[i] = gpuList(is.Indices())
		}
		word := "NVLink islands"
		if len(islands) == 1 {
			word = "NVLink island"
		}
		parts = append(parts, word+" "+strings.Join(names, ", "))
	}
	groups := numaGroups(m)
	if len(groups) == 1 && groups[0].numa == "" {
		parts = append(parts, "NUMA unknown")
	} else {
		names := make([]string, len(groups))
		for i, g := range groups {
			label := g.numa
			if label == "" {
				label = "unknown"
			}
			names[i] = fmt.Sprintf("NUMA %s: %s", label, gpuList(g.gpus))
		}
		parts = append(parts, strings.Join(names, ", "))
	}
	if len(m.NICs) == 0 {
		parts = append(parts, "no NICs")
	} else {
		parts = append(parts, plural(len(m.NICs), "NIC"))
	}
	return strings.Join(parts, "; ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// linkCounts says "all NV12" or counts GPU pairs per link, fastest first:
// "NV2 x8, NV1 x8, SYS x12".
func linkCounts(m *topology.Matrix) string {
	n := m.GPUs()
	count := map[topology.Link]int{}
	var kinds []topology.Link
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			l := m.Links[i][j]
			if count[l] == 0 {
				kinds = append(kinds, l)
			}
			count[l]++
		}
	}
	if len(kinds) == 1 {
		return "all " + linkToken(kinds[0])
	}
	for i := 1; i < len(kinds); i++ {
		for j := i; j > 0 && kinds[j].Score() > kinds[j-1].Score(); j-- {
			kinds[j], kinds[j-1] = kinds[j-1], kinds[j]
		}
	}
	out := make([]string, len(kinds))
	for i, l := range kinds {
		out[i] = fmt.Sprintf("%s x%d", linkToken(l), count[l])
	}
	return strings.Join(out, ", ")
}

// cell is one table cell: its text, and the text with styling, which may
// be longer because of escape codes.
type cell struct {
	text, styled string
}

func plainCell(s string) cell { return cell{s, s} }

// renderTable aligns cells in columns two spaces apart, padding by the
// unstyled width in characters (a sanitized name holds U+FFFD, three
// bytes wide in UTF-8 and one column on the terminal).
func renderTable(rows [][]cell) string {
	var widths []int
	for _, r := range rows {
		for c, x := range r {
			if c >= len(widths) {
				widths = append(widths, 0)
			}
			widths[c] = max(widths[c], utf8.RuneCountInString(x.text))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for c, x := range r {
			line.WriteString(x.styled)
			if c < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[c]-utf8.RuneCountInString(x.text)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// renderTopoShow is the human view of a matrix: the summary line, then the
// link matrix with each GPU's NVLink island, NUMA affinity (GPU labels
// coloured by NUMA group) and CPU affinity.
func renderTopoShow(m *topology.Matrix, st topoStyles) string {
	n := m.GPUs()
	island := make([]int, n)
	for i := range island {
		island[i] = -1
	}
	for k, is := range m.NVLinkIslands() {
		for _, g := range is.Indices() {
			island[g] = k
		}
	}
	groupOf := make([]int, n)
	for k, g := range numaGroups(m) {
		for _, i := range g.gpus {
			groupOf[i] = k
		}
	}
	nics := make([]string, len(m.NICs))
	for i, name := range m.NICs {
		nics[i] = iostreams.Sanitize(name, false)
	}

	head := []cell{plainCell("")}
	for i := 0; i < n; i++ {
		h := fmt.Sprintf("GPU%d", i)
		head = append(head, cell{h, st.header(h)})
	}
	for _, name := range nics {
		head = append(head, cell{name, st.header(name)})
	}
	for _, h := range []string{"NVLink", "NUMA", "CPU Affinity"} {
		head = append(head, cell{h, st.header(h)})
	}
	rows := [][]cell{head}
	for i := 0; i < n; i++ {
		label := fmt.Sprintf("GPU%d", i)
		row := []cell{{label, st.group(groupOf[i], label)}}
		for j := 0; j < n; j++ {
			row = append(row, linkCell(m.Links[i][j], st))
		}
		for c := range nics {
			l := topology.Link{}
			if i < len(m.NICLinks) && c < len(m.NICLinks[i]) {
				l = m.NICLinks[i][c]
			}
			row = append(row, linkCell(l, st))
		}
		if island[i] >= 0 {
			name := fmt.Sprintf("island %d", island[i]+1)
			row = append(row, cell{name, st.group(island[i], name)})
		} else {
			row = append(row, cell{"-", st.faint("-")})
		}
		numa := "?"
		if i < len(m.NUMAAffinity) && m.NUMAAffinity[i] != nil {
			numa = m.NUMAAffinity[i].String()
		}
		row = append(row, cell{numa, st.group(groupOf[i], numa)})
		cpu := "?"
		if i < len(m.CPUAffinity) && m.CPUAffinity[i] != "" {
			cpu = iostreams.Sanitize(m.CPUAffinity[i], false)
		}
		row = append(row, plainCell(cpu))
		rows = append(rows, row)
	}
	return topoSummary(m) + "\n\n" + renderTable(rows)
}

func linkCell(l topology.Link, st topoStyles) cell {
	t := linkToken(l)
	return cell{t, st.link(l, t)}
}

// notProvenOptimal is what the human view says of a pick whose search ran
// out of topology.PickBudget.
var notProvenOptimal = fmt.Sprintf("best found within the search budget (%d nodes); not proven optimal", topology.PickBudget)

// renderTopoPick is the human view of a pick: the chosen GPUs, the numbers
// that ranked them with what each means, what stays free, and the
// CUDA_VISIBLE_DEVICES line for them.
func renderTopoPick(m *topology.Matrix, r topoPickResult, st topoStyles) string {
	var b strings.Builder
	p := r.pick
	fmt.Fprintf(&b, "Picked %s (%d of %d free GPUs", gpuList(p.GPUs), len(p.GPUs), r.free.Len())
	if len(r.busy) > 0 {
		fmt.Fprintf(&b, "; busy: %s", gpuList(r.busy))
	}
	b.WriteString(")\n")
	if !p.Optimal {
		b.WriteString(st.faint(notProvenOptimal) + "\n")
	}
	b.WriteString("\n")
	var rows [][]cell
	if len(p.GPUs) >= 2 {
		rows = append(rows, []cell{plainCell("bottleneck"), linkCell(p.Bottleneck, st), plainCell("the slowest link inside the set decides collective speed")})
		pairs := len(p.GPUs) * (len(p.GPUs) - 1) / 2
		rows = append(rows, []cell{plainCell("total"), plainCell(fmt.Sprint(p.Total)), plainCell(fmt.Sprintf("link points over %s (SYS 1 ... PIX 5, NV<n> 10n)", plural(pairs, "pair")))})
	}
	if r.multiNode {
		rows = append(rows, []cell{plainCell("NIC-local"), plainCell(fmt.Sprint(p.NICLocal)), plainCell("GPUs with a NIC at PIX or PXB, for traffic between machines")})
	}
	if p.NUMANodes == 0 && len(p.GPUs) > 0 {
		rows = append(rows, []cell{plainCell("NUMA nodes"), plainCell("?"), plainCell("the GPUs' NUMA affinity is unknown")})
	} else {
		rows = append(rows, []cell{plainCell("NUMA nodes"), plainCell(fmt.Sprint(p.NUMANodes)), plainCell("NUMA nodes the set's GPUs are attached to")})
	}
	rows = append(rows, []cell{plainCell("cross"), plainCell(fmt.Sprint(p.Cross)), plainCell("link points to the GPUs left free: lower keeps NVLink islands whole")})
	rows = append(rows, []cell{plainCell("left free"), plainCell(gpuList(r.freeAfter.Indices())), plainCell("")})
	for _, row := range rows {
		row[0] = cell{row[0].text, st.header(row[0].text)}
		if row[2].text != "" {
			row[2] = cell{row[2].text, st.faint(row[2].text)}
		}
	}
	for _, line := range strings.SplitAfter(renderTable(rows), "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
	}
	idx := make([]string, len(p.GPUs))
	for i, g := range p.GPUs {
		idx[i] = fmt.Sprint(g)
	}
	fmt.Fprintf(&b, "\nCUDA_VISIBLE_DEVICES=%s\n", strings.Join(idx, ","))
	return b.String()
}
