package topology

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseError is a problem in `nvidia-smi topo -m` text, with the 1-based
// line it was found on.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// errAt makes a ParseError. Text from the input is clipped, so a damaged
// file cannot turn one message into kilobytes.
func errAt(line int, format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = clip(s)
		}
	}
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// clip shortens s to at most 40 bytes, at a character boundary, marking the
// cut with "...".
func clip(s string) string {
	const most = 40
	if len(s) <= most {
		return s
	}
	cut := most - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Limits that keep hostile input from costing much; real machines are far
// below them.
const (
	maxSMIDevices = 1024    // GPUs plus NICs in one matrix
	maxNUMANode   = 1 << 16 // highest NUMA node id accepted
	maxNUMASet    = 4096    // most nodes in one affinity list
)

// smiField is one whitespace-separated word of a line. col is its column
// once tabs are expanded to 8-character stops, which is how the terminal
// that nvidia-smi wrote for aligned them; afterOneSpace says it followed a
// single literal space, which inside a header joins words of one name
// ("CPU Affinity") rather than separating columns.
type smiField struct {
	text          string
	col           int
	afterOneSpace bool
}

// smiLine is one input line with CR, ANSI escapes and control bytes removed.
type smiLine struct {
	no     int
	fields []smiField
}

func (l smiLine) blank() bool { return len(l.fields) == 0 }

// attrKind says which per-GPU column an attribute header names.
type attrKind int

const (
	attrOther attrKind = iota // a column this parser does not know; its values are skipped
	attrCPU
	attrNUMA
	attrGPUNUMAID
)

type attrColumn struct {
	name string
	kind attrKind
	col  int
}

// knownAttrs are the per-GPU column names nvidia-smi prints after the device
// columns. They contain spaces, so the header is matched against them word
// by word.
var knownAttrs = []struct {
	words []string
	kind  attrKind
}{
	{[]string{"CPU", "Affinity"}, attrCPU},
	{[]string{"NUMA", "Affinity"}, attrNUMA},
	{[]string{"GPU", "NUMA", "ID"}, attrGPUNUMAID},
}

// ParseSMI reads the output of `nvidia-smi topo -m`: a header naming the
// device columns (GPU0.., then NICs as NIC0.. or mlx5_0..) and per-GPU
// attribute columns (CPU Affinity, NUMA Affinity, GPU NUMA ID), one row per
// device, then optionally a legend and a NIC Legend mapping NIC0 to its
// name. It accepts raw tabs or tab-expanded spaces (or no-break spaces from
// a web page), CRLF or CR line ends, ANSI escapes, a header without leading
// whitespace, re-spaced columns, empty or N/A cells, and columns it does not
// know (their values are skipped). Lines before the header are ignored; the
// matrix ends at a blank line, a legend or a line that cannot be a row.
// Damaged input gets a *ParseError naming the line and what was expected;
// an asymmetric matrix counts as damaged, since that is how a shifted cell
// shows.
func ParseSMI(text string) (*Matrix, error) {
	lines := splitSMILines(text)

	h := -1
	for i, l := range lines {
		for _, f := range l.fields {
			if f.text == "GPU0" {
				h = i
				break
			}
		}
		if h >= 0 {
			break
		}
	}
	if h < 0 {
		return nil, errAt(1, "no header naming GPU0: expected the output of `nvidia-smi topo -m`")
	}
	header := lines[h]

	// Rows run from the line after the header to the first blank line,
	// legend ("Legend:", "NIC Legend:") or line that cannot be a row (a
	// shell prompt pasted after a matrix-only copy). A line labelled like a
	// device stays a row, so a damaged one is reported where it is.
	inHeader := make(map[string]bool, len(header.fields))
	for _, f := range header.fields {
		inHeader[f.text] = true
	}
	var rows []smiLine
	end := len(lines)
	for i := h + 1; i < len(lines); i++ {
		l := lines[i]
		if l.blank() || endsMatrix(l, inHeader) {
			end = i
			break
		}
		rows = append(rows, l)
	}
	if len(rows) == 0 {
		return nil, errAt(header.no+1, "expected a row GPU0 after the header on line %d", header.no)
	}
	if len(rows) > maxSMIDevices {
		return nil, errAt(rows[maxSMIDevices].no, "more than %d devices", maxSMIDevices)
	}

	labelRow := make(map[string]int, len(rows))
	for i, r := range rows {
		label := r.fields[0].text
		if _, dup := labelRow[label]; dup {
			return nil, errAt(r.no, "second row labelled %s", label)
		}
		labelRow[label] = i
	}

	// Device columns: the header's leading words that label rows.
	var devices []string
	hf := header.fields
	for len(hf) > 0 {
		if _, ok := labelRow[hf[0].text]; !ok {
			break
		}
		devices = append(devices, hf[0].text)
		hf = hf[1:]
	}
	if len(devices) == 0 {
		return nil, errAt(header.no, "the header's first column %q labels no row", header.fields[0].text)
	}
	seen := make(map[string]bool, len(devices))
	for _, d := range devices {
		if seen[d] {
			return nil, errAt(header.no, "column %s named twice", d)
		}
		seen[d] = true
	}
	for _, r := range rows {
		if !seen[r.fields[0].text] {
			if isGPULabel(r.fields[0].text) || isNICLabel(r.fields[0].text) || len(hf) == 0 {
				return nil, errAt(r.no, "row %s has no column in the header on line %d", r.fields[0].text, header.no)
			}
			return nil, errAt(r.no, "row %s has no column in the header on line %d (found %q where a device column was expected)", r.fields[0].text, header.no, hf[0].text)
		}
	}
	attrs, err := parseAttrHeader(header.no, hf)
	if err != nil {
		return nil, err
	}

	// GPU indices come from the labels: GPU0..GPU(n-1), each once.
	colOf := make(map[string]int, len(devices))
	for c, d := range devices {
		colOf[d] = c
	}
	nGPU := 0
	for _, d := range devices {
		if isGPULabel(d) {
			nGPU++
		}
	}
	if err := CheckGPUCount(nGPU); err != nil {
		return nil, errAt(header.no, "%v", err)
	}
	gpuCol := make([]int, nGPU)
	for i := 0; i < nGPU; i++ {
		c, ok := colOf["GPU"+strconv.Itoa(i)]
		if !ok {
			return nil, errAt(header.no, "expected a column GPU%d: the header names %d GPUs", i, nGPU)
		}
		gpuCol[i] = c
	}
	var nicCol []int
	var nicLabels []string
	for c, d := range devices {
		if !isGPULabel(d) {
			nicCol = append(nicCol, c)
			nicLabels = append(nicLabels, d)
		}
	}

	// Every row holds one link per device column.
	cells := make([][]Link, len(devices)) // by column index of the row's device
	extra := make([][]smiField, len(devices))
	for _, r := range rows {
		label := r.fields[0].text
		rc := colOf[label]
		rest := r.fields[1:]
		if len(rest) < len(devices) {
			return nil, errAt(r.no, "row %s has %d link cells, expected %d (one per device column of line %d)", label, len(rest), len(devices), header.no)
		}
		links := make([]Link, len(devices))
		for c := range devices {
			tok := rest[c].text
			var l Link
			if tok == "N/A" {
				l = Link{}
			} else {
				l, err = ParseLink(tok)
				if err != nil {
					return nil, errAt(r.no, "row %s, column %s: unknown link %q (want X, NV<n>, PIX, PXB, PHB, NODE, SYS, SOC or N/A)", label, devices[c], tok)
				}
			}
			if (c == rc) != (l.Kind == LinkSelf) {
				if c == rc {
					return nil, errAt(r.no, "row %s, column %s: expected X (the device itself), found %q", label, devices[c], tok)
				}
				return nil, errAt(r.no, "row %s, column %s: X outside the diagonal", label, devices[c])
			}
			links[c] = l
		}
		cells[rc] = links
		extra[rc] = rest[len(devices):]
	}
	// A matrix read correctly is symmetric; a cell that is not usually
	// means the columns were shifted.
	for a := range devices {
		for b := a + 1; b < len(devices); b++ {
			if cells[a][b] != cells[b][a] {
				ra, rb := rows[labelRow[devices[a]]], rows[labelRow[devices[b]]]
				return nil, errAt(rb.no, "row %s, column %s is %s but row %s (line %d) says %s: expected a symmetric matrix",
					devices[b], devices[a], cells[b][a], devices[a], ra.no, cells[a][b])
			}
		}
	}

	m := &Matrix{
		Links:        make([][]Link, nGPU),
		NICLinks:     make([][]Link, nGPU),
		CPUAffinity:  make([]string, nGPU),
		NUMAAffinity: make([]NUMASet, nGPU),
		GPUNUMAID:    make([]int, nGPU),
	}
	for i, c := range gpuCol {
		m.Links[i] = make([]Link, nGPU)
		for j, cj := range gpuCol {
			m.Links[i][j] = cells[c][cj]
		}
		m.NICLinks[i] = make([]Link, len(nicCol))
		for n, cn := range nicCol {
			m.NICLinks[i][n] = cells[c][cn]
		}
		m.GPUNUMAID[i] = -1
		r := rows[labelRow[devices[c]]]
		if err := fillAttrs(m, i, r, attrs, extra[c], header, devices); err != nil {
			return nil, err
		}
	}
	m.NICs = nicNames(nicLabels, lines[end:])
	return m, nil
}

// splitSMILines splits text into lines and words, dropping CR, ANSI escape
// sequences and other control bytes, and computing each word's column with
// tabs expanded to 8.
func splitSMILines(text string) []smiLine {
	sep := "\n"
	if !strings.Contains(text, "\n") && strings.Contains(text, "\r") {
		sep = "\r" // classic Mac line ends
	}
	raw := strings.Split(text, sep)
	out := make([]smiLine, 0, len(raw))
	// Every line's fields are appended to one array, sized for the words
	// of text (any byte after a space, tab or line end), rather than each
	// line growing its own.
	words, after := 0, true
	for i := 0; i < len(text); i++ {
		c := text[i]
		blank := c == ' ' || c == '\t' || c == '\n' || c == '\r'
		if after && !blank {
			words++
		}
		after = blank
	}
	all := make([]smiField, 0, words)
	for i, s := range raw {
		n := len(all)
		all = splitSMIFields(s, all)
		out = append(out, smiLine{no: i + 1, fields: all[n:len(all):len(all)]})
	}
	return out
}

// splitSMIFields appends the words of the line s to fields.
func splitSMIFields(s string, fields []smiField) []smiField {
	first := len(fields)
	col := 0
	start := -1    // byte offset of the current word in s
	startCol := 0  // its column
	gap := 0       // characters of the gap before the current word
	gapSpaces := 0 // of which literal spaces
	// A word is most often a run of s as it is: it is then s[start:end],
	// not a copy (a probe of 500 machines parses 500 matrices of a few
	// hundred words). Only a word with bytes dropped inside it (an escape
	// sequence, a control byte) is built in word.
	var word []byte
	end := -1 // where the word's run of s ends; -1 once it is built in word
	flush := func() {
		if start >= 0 {
			var text string
			if end >= 0 {
				text = s[start:end]
			} else {
				text = string(word)
			}
			fields = append(fields, smiField{text: text, col: startCol, afterOneSpace: len(fields) > first && gap == 1 && gapSpaces == 1})
			word = word[:0]
			start = -1
			gap, gapSpaces = 0, 0
		}
	}
	// appendWord adds the size bytes of s at i to the current word: while
	// the word is a run of s ending at i, it extends the run; after a
	// dropped byte it copies the run into word and appends from then on.
	appendWord := func(i, size int) {
		if end == i {
			end = i + size
			return
		}
		if end >= 0 {
			word = append(word[:0], s[start:end]...)
			end = -1
		}
		word = append(word, s[i:i+size]...)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b:
			// CSI: ESC [ parameters... final byte in 0x40-0x7e. Other
			// escapes: ESC and the next byte.
			if i+1 < len(s) && s[i+1] == '[' {
				j := i + 2
				for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
					j++
				}
				i = j
			} else {
				i++
			}
		case c == '\t':
			flush()
			gap++
			col = (col/8 + 1) * 8
		case c == ' ':
			flush()
			gap++
			gapSpaces++
			col++
		case c < 0x20 || c == 0x7f:
			// CR and other control bytes: dropped, as if absent.
		case c >= 0x80:
			// Copies from web pages bring no-break spaces and a BOM; they
			// separate cells like a space. C1 controls are dropped.
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == '\ufeff' || r != utf8.RuneError && unicode.IsSpace(r):
				flush()
				gap++
				gapSpaces++
				col++
			case r != utf8.RuneError && unicode.IsControl(r):
			default:
				if start < 0 {
					start, startCol, end = i, col, i
				}
				appendWord(i, size)
				col++
			}
			i += size - 1
		default:
			if start < 0 {
				start, startCol, end = i, col, i
			}
			appendWord(i, 1)
			col++
		}
	}
	flush()
	return fields
}

// endsMatrix reports whether a non-blank line after the header is not a
// matrix row: a legend, or a first word that neither names a header column
// nor looks like a device name.
func endsMatrix(l smiLine, inHeader map[string]bool) bool {
	label := l.fields[0].text
	if strings.HasSuffix(label, ":") || label == "Legend" || label == "NIC" && len(l.fields) > 1 && strings.HasPrefix(l.fields[1].text, "Legend") {
		return true
	}
	if inHeader[label] {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return true
		}
	}
	return false
}

func isGPULabel(s string) bool { return hasNumberSuffix(s, "GPU") }
func isNICLabel(s string) bool { return hasNumberSuffix(s, "NIC") }

func hasNumberSuffix(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" || len(rest) > 4 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return rest == "0" || rest[0] != '0'
}

// parseAttrHeader names the per-GPU columns after the device columns. Known
// names are matched word by word, so "CPU Affinity    NUMA Affinity" and
// "CPU Affinity NUMA Affinity" both read as two columns; an unknown name
// runs over words joined by single spaces.
func parseAttrHeader(line int, fs []smiField) ([]attrColumn, error) {
	var cols []attrColumn
	for len(fs) > 0 {
		if isGPULabel(fs[0].text) || isNICLabel(fs[0].text) {
			return nil, errAt(line, "column %s has no row", fs[0].text)
		}
		matched := false
		for _, k := range knownAttrs {
			if len(fs) < len(k.words) {
				continue
			}
			ok := true
			for w, word := range k.words {
				if !strings.EqualFold(fs[w].text, word) || w > 0 && !fs[w].afterOneSpace {
					ok = false
					break
				}
			}
			if ok {
				cols = append(cols, attrColumn{name: strings.Join(k.words, " "), kind: k.kind, col: fs[0].col})
				fs = fs[len(k.words):]
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		n := 1
		for n < len(fs) && fs[n].afterOneSpace && !startsKnownAttr(fs[n:]) {
			n++
		}
		words := make([]string, n)
		for w := range words {
			words[w] = fs[w].text
		}
		cols = append(cols, attrColumn{name: strings.Join(words, " "), kind: attrOther, col: fs[0].col})
		fs = fs[n:]
	}
	seen := map[attrKind]bool{}
	for _, c := range cols {
		if c.kind != attrOther && seen[c.kind] {
			return nil, errAt(line, "column %q named twice", c.name)
		}
		seen[c.kind] = true
	}
	return cols, nil
}

func startsKnownAttr(fs []smiField) bool {
	for _, k := range knownAttrs {
		if len(fs) >= len(k.words) && strings.EqualFold(fs[0].text, k.words[0]) && strings.EqualFold(fs[1].text, k.words[1]) {
			return true
		}
	}
	return false
}

// fillAttrs reads GPU i's attribute cells. When there are as many values as
// columns they are taken in order, which survives re-spaced or misaligned
// copies; when some cells are empty, each value goes to the column it sits
// under.
func fillAttrs(m *Matrix, i int, r smiLine, attrs []attrColumn, vals []smiField, header smiLine, devices []string) error {
	label := r.fields[0].text
	if len(vals) > len(attrs) {
		if len(attrs) == 0 {
			return errAt(r.no, "row %s has %d cells after its %d links, but the header (line %d) names no columns after the devices", label, len(vals), len(devices), header.no)
		}
		return errAt(r.no, "row %s has %d cells after its %d links, expected at most %d (%s)", label, len(vals), len(devices), len(attrs), attrNames(attrs))
	}
	assigned := make([]int, len(vals)) // attribute column of each value
	if len(vals) == len(attrs) {
		for v := range vals {
			assigned[v] = v
		}
	} else {
		// Headers copied without their leading whitespace sit one label
		// column to the left of the rows.
		shift := 0
		if header.fields[0].col == 0 && r.fields[0].col == 0 && len(r.fields) > 1 {
			shift = r.fields[1].col / 8 * 8
		}
		prev := -1
		for v, f := range vals {
			a := prev + 1
			for a+1 < len(attrs) && attrs[a+1].col+shift <= f.col+1 && len(attrs)-(a+1) >= len(vals)-v {
				a++
			}
			assigned[v] = a
			prev = a
		}
	}
	for v, f := range vals {
		a := attrs[assigned[v]]
		switch a.kind {
		case attrCPU:
			if f.text == "N/A" {
				continue
			}
			if _, err := parseIDList(f.text, -1); err != nil {
				return errAt(r.no, "row %s, CPU Affinity %q: %v", label, f.text, err)
			}
			m.CPUAffinity[i] = f.text
		case attrNUMA:
			if f.text == "N/A" {
				continue
			}
			set, err := parseIDList(f.text, maxNUMANode)
			if err != nil {
				return errAt(r.no, "row %s, NUMA Affinity %q: %v", label, f.text, err)
			}
			m.NUMAAffinity[i] = set
		case attrGPUNUMAID:
			if f.text == "N/A" {
				continue
			}
			id, err := strconv.Atoi(f.text)
			if err != nil || id < 0 || id > maxNUMANode {
				return errAt(r.no, "row %s, GPU NUMA ID %q: expected a NUMA node number or N/A", label, f.text)
			}
			m.GPUNUMAID[i] = id
		}
	}
	return nil
}

func attrNames(attrs []attrColumn) string {
	names := make([]string, len(attrs))
	for i, a := range attrs {
		names[i] = a.name
	}
	return strings.Join(names, ", ")
}

// parseIDList reads a Linux cpulist ("0-31,64-95", "0,5-11"). With limit >= 0
// it returns the sorted distinct ids, refusing ids above limit; with limit
// < 0 it only checks the syntax (CPU lists are kept as printed).
func parseIDList(s string, limit int) (NUMASet, error) {
	var ids NUMASet
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseID(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parseID(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %s runs backwards", part)
			}
		}
		if limit < 0 {
			continue
		}
		if b > limit {
			return nil, fmt.Errorf("node %d is above %d", b, limit)
		}
		if len(ids)+(b-a+1) > maxNUMASet {
			return nil, fmt.Errorf("more than %d nodes", maxNUMASet)
		}
		for x := a; x <= b; x++ {
			ids = append(ids, x)
		}
	}
	if limit < 0 {
		return nil, nil
	}
	sort.Ints(ids)
	out := ids[:0]
	for i, x := range ids {
		if i == 0 || x != ids[i-1] {
			out = append(out, x)
		}
	}
	return out, nil
}

func parseID(s string) (int, error) {
	if s == "" || len(s) > 9 {
		return 0, fmt.Errorf("expected a list of numbers and ranges like 0-31,64-95")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("expected a list of numbers and ranges like 0-31,64-95")
		}
	}
	return strconv.Atoi(s)
}

// nicNames maps NIC row labels to names: a NIC Legend line "NIC0: mlx5_0"
// renames NIC0; old-style labels (mlx5_0) are names already.
func nicNames(labels []string, after []smiLine) []string {
	legend := map[string]string{}
	for _, l := range after {
		if len(l.fields) >= 2 {
			if k, ok := strings.CutSuffix(l.fields[0].text, ":"); ok && isNICLabel(k) {
				words := make([]string, len(l.fields)-1)
				for i, f := range l.fields[1:] {
					words[i] = f.text
				}
				legend[k] = strings.Join(words, " ")
			}
		}
	}
	names := make([]string, len(labels))
	for i, lab := range labels {
		if n, ok := legend[lab]; ok {
			names[i] = n
		} else {
			names[i] = lab
		}
	}
	return names
}
