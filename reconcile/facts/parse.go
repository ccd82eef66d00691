package facts

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/topology"
)

// Section names of the probe script's output.
const (
	sectionHostname    = "hostname"
	sectionUname       = "uname"
	sectionProductName = "product_name"
	sectionGCEZone     = "gce_zone"
	sectionEC2Location = "ec2_location"
	sectionAzureLoc    = "azure_location"
	sectionTorch       = "torch"
	sectionTorchrun    = "torchrun"
	sectionGPUs        = "gpus"
	sectionComputeApps = "compute_apps"
	sectionTopo        = "topo"
	sectionRunIDs      = "run_ids"
	sectionAppsRecheck = "compute_apps_recheck"
	sectionClaims      = "claims"
	sectionActivity    = "activity"
	sectionPIDs        = "pids"
	// sectionLogPrefix starts the name of each section holding the end of
	// a gone process's log: "log.4211".
	sectionLogPrefix = "log."
	sectionBootID    = "boot_id"
)

// Exit statuses the script's sections report.
const (
	exitTimeout  = 124 // timeout(1) stopped the command
	exitNotFound = 127 // the command is not installed
	exitNoTorch  = 3   // python3 runs but torch is not installed
)

// section is one framed part of the script's output.
type section struct {
	text     string // the command's standard output, verbatim
	exit     int    // its exit status; -1 when the frame was cut off
	complete bool
}

// Parse reads the output of the probe script run with nonce and returns
// the host as the machine describes itself: hostname, kernel, GPUs and so
// on, Status ok, and a warning for every section that is missing, failed or
// could not be read. A machine that prints garbage gets a Host full of
// warnings; only output with none of the script's sections, which no run
// of the script prints, is StatusFailed. What is kept is bounded by the
// limits of limits.go. Location holds only the metadata service's claim
// (GCE, EC2 or Azure), when there is one; the caller merges it with the
// configuration's (ResolveLocation). Name, Address and ProbedAt are the caller's to set.
func Parse(output []byte, nonce string) Host {
	h := Host{Status: StatusOK, GPUs: []GPU{}, FreeGPUs: []int{}}
	if len(output) > MaxOutputBytes {
		h.warn("the probe's output is %d bytes, more than %d: only the first %d are read", len(output), MaxOutputBytes, MaxOutputBytes)
		output = output[:MaxOutputBytes]
	}
	secs, done, warns := splitSections(string(output), nonce)
	if len(secs) == 0 && !done {
		// The script always prints its sections, even on a machine where
		// every command fails: this was not the script running (a forced
		// command, a shell that is not sh, a login banner and exit).
		h.Status = StatusFailed
		h.Error = "the probe's output has none of its sections" + quoteStart(output)
		return h
	}
	for _, w := range warns {
		h.warn("%s", w)
	}
	if !done {
		h.warn("the probe's output ended before its end marker: facts may be incomplete")
	}
	need := func(name string) (section, bool) {
		s, ok := secs[name]
		if !ok {
			h.warn("section %s is missing from the probe's output", name)
		}
		return s, ok
	}

	if s, ok := need(sectionHostname); ok {
		h.Hostname = h.field("hostname", firstLine(s.text))
	}
	if s, ok := need(sectionUname); ok {
		f := strings.Fields(s.text)
		if s.exit != 0 || len(f) < 3 {
			h.warn("uname -srm: unexpected output %q (exit %d)", clip(s.text), s.exit)
		} else {
			h.Kernel = h.field("kernel", strings.Join(f[:len(f)-1], " "))
			h.Arch = h.field("arch", f[len(f)-1])
		}
	}
	if s, ok := need(sectionProductName); ok {
		h.ProductName = h.field("product name", firstLine(s.text))
	}
	h.parseGCEZone(secs)
	if s, ok := secs[sectionEC2Location]; ok {
		h.parseEC2Location(s)
	}
	if s, ok := secs[sectionAzureLoc]; ok {
		h.parseAzureLocation(s)
	}
	if s, ok := need(sectionTorch); ok {
		h.parseTorch(s)
	}
	// Not needed: output recorded before the probe asked has no such
	// section, and its hosts' torchrun is unknown, not missing.
	if s, ok := secs[sectionTorchrun]; ok {
		h.parseTorchrun(s)
	}
	if s, ok := need(sectionGPUs); ok && h.parseGPUs(s) {
		if s, ok := need(sectionComputeApps); ok {
			h.parseComputeApps(s)
			if s, ok := secs[sectionRunIDs]; ok {
				recheck, asked := secs[sectionAppsRecheck]
				h.parseRunIDs(s, recheck, asked)
			} else if busy(h.GPUs) {
				h.warn("section %s is missing from the probe's output: the GPU processes' runs are unknown", sectionRunIDs)
			}
		}
		if s, ok := need(sectionTopo); ok {
			h.parseTopology(s)
		}
		// Not needed: output recorded before the probe asked has no
		// such section, and its machines are in no NVLink domain.
		if s, ok := secs[sectionFabric]; ok {
			h.parseFabric(s)
		}
		if s, ok := secs[sectionClaims]; ok {
			h.parseClaims(s)
		}
	}
	for _, g := range h.GPUs {
		if len(g.Processes) == 0 {
			h.FreeGPUs = append(h.FreeGPUs, g.Index)
		}
	}
	if s, ok := need(sectionPIDs); ok {
		h.parsePIDs(s)
		if s, ok := secs[sectionActivity]; ok {
			h.parseActivity(s)
		}
		for i := range h.PIDs {
			p := &h.PIDs[i]
			if s, ok := secs[sectionLogPrefix+strconv.Itoa(p.PID)]; ok && !p.Alive {
				p.LogTail = LogTail(s.text)
			}
		}
	}
	if s, ok := need(sectionBootID); ok {
		h.BootID = h.field("boot id", firstLine(s.text))
	}
	return h
}

// warn adds a warning, up to MaxWarnings and one that says more were
// dropped, so that a machine printing a million bad lines costs a hundred.
func (h *Host) warn(format string, args ...any) {
	switch {
	case len(h.Warnings) < MaxWarnings:
		h.Warnings = append(h.Warnings, fmt.Sprintf(format, args...))
	case len(h.Warnings) == MaxWarnings:
		h.Warnings = append(h.Warnings, warningsDropped)
	}
}

// quoteStart is ": it printed \"...\"" with the start of output, or
// ": it printed nothing", for an error.
func quoteStart(output []byte) string {
	s := firstLine(string(output[:min(len(output), 1024)]))
	if s == "" {
		return ": it printed nothing"
	}
	return fmt.Sprintf(": it printed %q", clip(s))
}

// splitSections cuts output into its framed sections. done reports whether
// the script's end marker was seen.
func splitSections(out, nonce string) (secs map[string]section, done bool, warns []string) {
	secs = map[string]section{}
	prefix := "==gpulayer:" + nonce + ":"
	begin := prefix + "begin:"
	rest := out
	for {
		i := indexAtLineStart(rest, prefix)
		if i < 0 {
			return secs, done, warns
		}
		rest = rest[i:]
		line, after, _ := strings.Cut(rest, "\n")
		if line == prefix+"done" {
			done = true
			rest = after
			continue
		}
		name, ok := strings.CutPrefix(line, begin)
		if !ok {
			if len(warns) <= MaxWarnings {
				warns = append(warns, fmt.Sprintf("unexpected frame line %q in the probe's output", clip(line)))
			}
			rest = after
			continue
		}
		end := "\n" + prefix + "end:" + name + ":"
		j := strings.Index(after, end)
		if j < 0 {
			// Cut off: keep what arrived, so a half-printed matrix is
			// still reported, and say so.
			secs[name] = section{text: after, exit: -1}
			warns = append(warns, fmt.Sprintf("section %s was cut off", clip(name)))
			return secs, false, warns
		}
		status, next, _ := strings.Cut(after[j+len(end):], "\n")
		exit, err := strconv.Atoi(status)
		if err != nil {
			exit = -1
		}
		if _, dup := secs[name]; dup {
			if len(warns) <= MaxWarnings {
				warns = append(warns, fmt.Sprintf("section %s appears twice; the first is used", clip(name)))
			}
		} else {
			secs[name] = section{text: after[:j], exit: exit, complete: true}
		}
		rest = next
	}
}

// indexAtLineStart is strings.Index for a match that starts a line.
func indexAtLineStart(s, sub string) int {
	off := 0
	for {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			return -1
		}
		if off+i == 0 || s[off+i-1] == '\n' {
			return off + i
		}
		off += i + 1
	}
}

func (h *Host) parseTorch(s section) {
	switch s.exit {
	case 0:
		h.TorchVersion = h.field("torch version", firstLine(s.text))
	case exitNotFound:
		h.warn("python3 not found: torch version unknown")
	case exitNoTorch:
		h.warn("torch is not installed for python3")
	case exitTimeout:
		h.warn("python3 timed out reading the torch version")
	default:
		h.warn("python3 failed reading the torch version (exit %d)", s.exit)
	}
}

// parseTorchrun reads `command -v torchrun`: its path, or none when it
// failed. A section cut off says nothing.
func (h *Host) parseTorchrun(s section) {
	if !s.complete {
		return
	}
	path := ""
	if s.exit == 0 {
		path = h.field("torchrun path", firstLine(s.text))
	}
	h.Torchrun = &path
}

// parseGPUs reads `nvidia-smi --query-gpu` rows and reports whether the
// machine has a working nvidia-smi.
func (h *Host) parseGPUs(s section) bool {
	switch {
	case s.exit == exitNotFound:
		h.warn("nvidia-smi not found: no GPUs")
		return false
	case s.exit == exitTimeout:
		h.warn("nvidia-smi --query-gpu timed out: GPUs unknown")
		return false
	case s.exit != 0:
		h.warn("nvidia-smi --query-gpu failed (exit %d): %s", s.exit, clip(firstLine(s.text)))
		return false
	}
	driver := ""
	for n, line := range h.rows(s.text, "nvidia-smi --query-gpu", MaxGPUs) {
		// index, uuid, name, pci.bus_id, memory.total, memory.used,
		// driver_version; a name may itself hold commas.
		f := splitCSV(line)
		if len(f) < 7 {
			h.warn("nvidia-smi --query-gpu line %d: want 7 fields, got %d: %q", n+1, len(f), clip(line))
			continue
		}
		k := len(f)
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 || idx >= topology.MaxGPUs {
			h.warn("nvidia-smi --query-gpu line %d: bad index %q", n+1, clip(f[0]))
			continue
		}
		g := GPU{
			Index:          idx,
			UUID:           h.field(fmt.Sprintf("GPU %d uuid", idx), f[1]),
			Name:           h.field(fmt.Sprintf("GPU %d name", idx), strings.Join(f[2:k-4], ", ")),
			PCIBusID:       h.field(fmt.Sprintf("GPU %d pci.bus_id", idx), f[k-4]),
			MemoryTotalMiB: h.mib(f[k-3], "memory.total", n+1),
			MemoryUsedMiB:  h.mib(f[k-2], "memory.used", n+1),
			Processes:      []Process{},
		}
		if driver == "" {
			driver = h.field("driver_version", f[k-1])
		}
		h.GPUs = append(h.GPUs, g)
	}
	sort.SliceStable(h.GPUs, func(i, j int) bool { return h.GPUs[i].Index < h.GPUs[j].Index })
	for i := 1; i < len(h.GPUs); i++ {
		if h.GPUs[i].Index == h.GPUs[i-1].Index {
			h.warn("nvidia-smi --query-gpu lists GPU %d twice", h.GPUs[i].Index)
		}
	}
	h.CUDADriverVersion = driver
	return true
}

func (h *Host) parseComputeApps(s section) {
	if s.exit != 0 {
		h.warn("nvidia-smi --query-compute-apps failed (exit %d): busy GPUs unknown", s.exit)
		return
	}
	for n, line := range h.rows(s.text, "nvidia-smi --query-compute-apps", MaxProcesses) {
		f := splitCSV(line)
		if len(f) != 3 {
			h.warn("nvidia-smi --query-compute-apps line %d: want 3 fields, got %d: %q", n+1, len(f), clip(line))
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			h.warn("nvidia-smi --query-compute-apps line %d: bad pid %q", n+1, clip(f[1]))
			continue
		}
		var used int64
		if !notAvailable(f[2]) {
			used = h.mib(f[2], "used_memory", n+1)
		}
		g := h.gpuByUUID(f[0])
		if g == nil {
			h.warn("nvidia-smi --query-compute-apps line %d: unknown GPU %q", n+1, clip(f[0]))
			continue
		}
		g.Processes = append(g.Processes, Process{PID: pid, UsedMemoryMiB: used})
	}
	for i := range h.GPUs {
		p := h.GPUs[i].Processes
		sort.SliceStable(p, func(a, b int) bool { return p[a].PID < p[b].PID })
	}
}

// busy says some GPU has a compute process.
func busy(gpus []GPU) bool {
	for _, g := range gpus {
		if len(g.Processes) > 0 {
			return true
		}
	}
	return false
}

// parseRunIDs reads which launch each GPU process belongs to: "PID
// RUN_ID", or "PID -" for a process with none (or whose environment the
// probe could not read), or "PID gone" for one with no /proc entry. A
// gone process that nvidia-smi no longer lists when asked again
// (recheck) ended between the two looks: it holds no GPU, and is dropped.
// One still listed lives in another pid namespace and is kept, a stranger.
func (h *Host) parseRunIDs(s section, recheck section, asked bool) {
	if s.exit != 0 {
		h.warn("reading the GPU processes' run ids failed (exit %d)", s.exit)
		return
	}
	runs := map[int]string{}
	ended := map[int]bool{}
	for n, line := range h.rows(s.text, "run ids", MaxProcesses) {
		pidText, run, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			h.warn("run ids line %d: bad pid %q", n+1, clip(pidText))
			continue
		}
		switch run {
		case "-":
		case "gone":
			ended[pid] = true
		default:
			runs[pid] = h.field("run id", run)
		}
	}
	if len(ended) > 0 {
		if !asked || recheck.exit != 0 || !recheck.complete {
			// Not asked again (or it failed): every such process is
			// taken as holding its GPU.
			clear(ended)
		}
		for _, line := range h.rows(recheck.text, "compute apps recheck", MaxProcesses) {
			if f := strings.Split(line, ","); len(f) >= 2 {
				if pid, err := strconv.Atoi(strings.TrimSpace(f[1])); err == nil {
					delete(ended, pid)
				}
			}
		}
	}
	for i := range h.GPUs {
		g := &h.GPUs[i]
		g.Processes = slices.DeleteFunc(g.Processes, func(p Process) bool { return ended[p.PID] })
		for k := range g.Processes {
			p := &g.Processes[k]
			p.RunID = runs[p.PID]
		}
	}
}

// parseClaims reads the GPUs' claims: "NAME LINEAGE JOB RUN RANK PID
// LIVE" per claim file, NAME a GPU's UUID or index-N. Only live claims
// are kept, on their GPUs; the machine wrote them, so every field is
// checked before it is kept.
func (h *Host) parseClaims(s section) {
	if s.exit != 0 {
		h.warn("reading the GPU claims failed (exit %d): GPUs another configuration claimed may look free", s.exit)
		return
	}
	for n, line := range h.rows(s.text, "claims", MaxProcesses) {
		f := strings.Fields(line)
		if len(f) != 7 {
			h.warn("claims line %d: %d fields, want 7", n+1, len(f))
			continue
		}
		rank, err1 := strconv.Atoi(f[4])
		pid, err2 := strconv.Atoi(f[5])
		if err1 != nil || err2 != nil || rank < 0 || pid <= 0 {
			h.warn("claims line %d: bad rank or pid", n+1)
			continue
		}
		if f[6] != "1" {
			continue // stale: its process is gone
		}
		var g *GPU
		for i := range h.GPUs {
			if h.GPUs[i].UUID == f[0] || "index-"+strconv.Itoa(h.GPUs[i].Index) == f[0] {
				g = &h.GPUs[i]
			}
		}
		if g == nil {
			continue // a GPU this machine no longer has
		}
		g.Claim = &Claim{Lineage: h.field("claim lineage", f[1]), Job: h.field("claim job", f[2]), RunID: h.field("claim run id", f[3]), Rank: rank, PID: pid}
	}
}

func (h *Host) parseTopology(s section) {
	if s.exit != 0 {
		h.warn("nvidia-smi topo -m failed (exit %d): GPU links unknown", s.exit)
		return
	}
	h.TopologyRaw = s.text
	m, err := topology.ParseSMI(s.text)
	if err != nil {
		h.warn("nvidia-smi topo -m: %v", err)
		return
	}
	h.Topology = m
	if m.GPUs() != len(h.GPUs) {
		h.warn("nvidia-smi topo -m shows %d GPUs but --query-gpu lists %d", m.GPUs(), len(h.GPUs))
	}
}

func (h *Host) parsePIDs(s section) {
	for n, line := range h.rows(s.text, "pids", MaxPIDRows) {
		pidText, stat, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			h.warn("pids line %d: bad pid %q", n+1, clip(pidText))
			continue
		}
		p := PID{PID: pid}
		if rest, gone := strings.CutPrefix(stat, "- "); gone {
			// "STATUS [FILE...]": the files named are the node's that
			// are there but are not regular files, left unread.
			f := strings.Fields(rest)
			if len(f) > 0 {
				if v, err := strconv.Atoi(f[0]); err == nil && v >= 0 {
					p.ExitStatus = &v
				}
			}
			for _, file := range f[min(len(f), 1):] {
				if a, ok := strings.CutPrefix(file, "age="); ok {
					if v, err := strconv.ParseInt(a, 10, 64); err == nil && v >= 0 {
						p.EndedAgoSeconds = &v
					}
					continue
				}
				if file != NodeFileExit && file != NodeFileLog {
					h.warn("pid %d: unknown file %q", pid, clip(file))
					continue
				}
				if !slices.Contains(p.NotRegular, file) {
					p.NotRegular = append(p.NotRegular, file)
					h.warn("process %d ended, and its %s file is not a regular file (a FIFO, a device or a link to one): it was not read", pid, file)
				}
			}
		} else if stat != "-" {
			state, start, err := parseStat(stat)
			if err != nil {
				h.warn("pid %d: /proc/%d/stat: %v", pid, pid, err)
			}
			p.Alive = state != "Z" && state != "X"
			p.StartTime = start
		}
		h.PIDs = append(h.PIDs, p)
	}
}

// parseActivity reads "PID LOG_AGE HEARTBEAT_AGE" lines (ages in
// seconds, - for none) onto the running pids they name.
func (h *Host) parseActivity(s section) {
	if s.exit != 0 {
		h.warn("reading the nodes' activity failed (exit %d): stalls cannot be seen", s.exit)
		return
	}
	age := func(v string) *int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil // "-", or a file from the future
		}
		return &n
	}
	for n, line := range h.rows(s.text, "activity", MaxPIDRows) {
		f := strings.Fields(line)
		if len(f) != 3 {
			h.warn("activity line %d: want PID LOG_AGE HEARTBEAT_AGE", n+1)
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			h.warn("activity line %d: want PID LOG_AGE HEARTBEAT_AGE", n+1)
			continue
		}
		for i := range h.PIDs {
			if h.PIDs[i].PID == pid && h.PIDs[i].Alive {
				h.PIDs[i].LogAgeSeconds, h.PIDs[i].HeartbeatAgeSeconds = age(f[1]), age(f[2])
			}
		}
	}
}

// parseStat reads the state (field 3) and start time (field 22) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(stat string) (state string, start uint64, err error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, fmt.Errorf("no command name in %q", clip(stat))
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", 0, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return f[0], 0, fmt.Errorf("start time %q: %v", clip(f[19]), err)
	}
	return f[0], start, nil
}

func (h *Host) gpuByUUID(uuid string) *GPU {
	for i := range h.GPUs {
		if h.GPUs[i].UUID == uuid {
			return &h.GPUs[i]
		}
	}
	return nil
}

// mib reads a memory amount printed with nounits (MiB); a value nvidia-smi
// cannot know ("[N/A]") is 0 with a warning.
func (h *Host) mib(v, field string, line int) int64 {
	if notAvailable(v) {
		// GPUs that share the host's memory (DGX Spark's GB10, Jetson)
		// have no memory of their own to report.
		h.warn("nvidia-smi line %d: %s is %s (memory shared with the CPU?): counted as 0 MiB", line, field, v)
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		h.warn("nvidia-smi line %d: %s %q is not a MiB count", line, field, clip(v))
		return 0
	}
	return n
}

func notAvailable(v string) bool {
	return v == "[N/A]" || v == "N/A" || v == "[Not Supported]"
}

// splitCSV splits a `--format=csv,noheader` line: fields separated by ", ".
func splitCSV(line string) []string {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// lines returns the non-blank lines of text, without their line endings.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func firstLine(text string) string {
	l, _, _ := strings.Cut(strings.TrimLeft(text, "\r\n"), "\n")
	return strings.TrimSpace(l)
}

// clip shortens untrusted text quoted in a warning.
func clip(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
