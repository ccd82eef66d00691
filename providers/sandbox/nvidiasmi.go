package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The files of a machine's directory (GPULAYER_SANDBOX_MACHINE) that its
// nvidia-smi answers from.
const (
	// gpusFile holds one line per GPU:
	// index|uuid|name|pci.bus_id|memory.total MiB|driver_version.
	gpusFile = "gpus"
	// topoFile is the recorded `nvidia-smi topo -m` output.
	topoFile = "topo.txt"
	// launchedFile exists once a session mentioned CUDA_VISIBLE_DEVICES
	// (bin/sandbox-shell creates it); until then no process can hold a
	// GPU, and nvidia-smi does not read /proc.
	launchedFile = "launched"
)

// processMiB is the memory a process is said to use on each GPU it sees.
const processMiB = 1024

// sandboxGPU is one line of a machine's gpus file.
type sandboxGPU struct {
	index, uuid, name, busID, driver string
	totalMiB                         int
}

// busyProcess is a live process of the machine and the GPUs it sees.
type busyProcess struct {
	pid     int
	devices []string // CUDA_VISIBLE_DEVICES, split at commas
}

func (p busyProcess) sees(g sandboxGPU) bool {
	for _, d := range p.devices {
		if d == g.index || d == g.uuid {
			return true
		}
	}
	return false
}

// nvidiaSMI is the nvidia-smi of a sandbox machine: it answers the queries
// gpulayer's probe makes (--query-gpu, --query-compute-apps, topo -m, -L,
// and -q for the GPUs' NVLink fabric)
// from the machine's files, and reports as busy the GPUs named by
// CUDA_VISIBLE_DEVICES (by index or UUID) of live processes started on the
// machine. Anything else is refused with status 2, as nvidia-smi refuses
// what it does not know. It runs in the sandbox's process for the
// in-process shell, and as the program behind bin/nvidia-smi otherwise
// (tools.go), so both shells share it.
func nvidiaSMI(getenv func(string) string, args []string, stdout, stderr io.Writer) int {
	var out bytes.Buffer
	status := answerNvidiaSMI(getenv(machineEnv), args, &out, stderr)
	// One write: an SSH channel or a pipe, not a byte at a time.
	if _, err := stdout.Write(out.Bytes()); err != nil && status == 0 {
		return 1
	}
	return status
}

func answerNvidiaSMI(machine string, args []string, out *bytes.Buffer, stderr io.Writer) int {
	if machine == "" {
		fmt.Fprintln(stderr, "nvidia-smi: not a gpulayer sandbox machine ("+machineEnv+" is not set)")
		return 2
	}
	var kind, query string
	format := csvFormat{header: true, units: true}
	for _, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--query-gpu="):
			kind, query = "gpu", strings.TrimPrefix(arg, "--query-gpu=")
		case strings.HasPrefix(arg, "--query-compute-apps="):
			kind, query = "apps", strings.TrimPrefix(arg, "--query-compute-apps=")
		case strings.HasPrefix(arg, "--format="):
			if err := format.set(strings.TrimPrefix(arg, "--format=")); err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
		case arg == "topo":
			kind = "topo"
		case arg == "-m" || arg == "--matrix":
			if kind != "topo" {
				kind = "unsupported"
			}
		case arg == "-L" || arg == "--list-gpus":
			kind = "list"
		case arg == "-q" || arg == "--query":
			kind = "query"
		default:
			kind = "unsupported"
		}
	}
	if kind == "unsupported" || kind == "" {
		fmt.Fprintln(stderr, "nvidia-smi (sandbox): only --query-gpu, --query-compute-apps, topo -m, -L and -q are simulated")
		return 2
	}
	if kind == "topo" {
		text, err := os.ReadFile(filepath.Join(machine, topoFile))
		if err != nil {
			fmt.Fprintf(stderr, "nvidia-smi (sandbox): %v\n", err)
			return 2
		}
		out.Write(text)
		if len(text) > 0 && text[len(text)-1] != '\n' {
			out.WriteByte('\n')
		}
		return 0
	}
	gpus, err := readGPUs(filepath.Join(machine, gpusFile))
	if err != nil {
		fmt.Fprintf(stderr, "nvidia-smi (sandbox): %v\n", err)
		return 2
	}
	switch kind {
	case "list":
		for _, g := range gpus {
			fmt.Fprintf(out, "GPU %s: %s (UUID: %s)\n", g.index, g.name, g.uuid)
		}
		return 0
	case "query":
		return queryAll(out, stderr, machine, gpus)
	case "gpu":
		return queryGPUs(out, stderr, format, query, gpus, busyProcesses(machine))
	default:
		return queryApps(out, stderr, format, query, gpus, busyProcesses(machine))
	}
}

// csvFormat is what --format=csv[,noheader][,nounits] asks for.
type csvFormat struct{ header, units bool }

func (f *csvFormat) set(spec string) error {
	for part := range strings.SplitSeq(spec, ",") {
		switch part {
		case "csv":
		case "noheader":
			f.header = false
		case "nounits":
			f.units = false
		default:
			return fmt.Errorf("nvidia-smi (sandbox): unsupported format %s", part)
		}
	}
	return nil
}

// memoryField reports whether a field is an amount of memory, in MiB.
func memoryField(field string) bool {
	switch field {
	case "memory.total", "memory.used", "memory.free", "used_memory", "used_gpu_memory":
		return true
	}
	return false
}

// writeHeader writes the header line of a query: its fields, with units.
func (f csvFormat) writeHeader(out *bytes.Buffer, fields []string) {
	if !f.header {
		return
	}
	for i, field := range fields {
		if i > 0 {
			out.WriteString(", ")
		}
		out.WriteString(field)
		if f.units && memoryField(field) {
			out.WriteString(" [MiB]")
		}
	}
	out.WriteByte('\n')
}

func (f csvFormat) mib(n int) string {
	if f.units {
		return strconv.Itoa(n) + " MiB"
	}
	return strconv.Itoa(n)
}

func writeRow(out *bytes.Buffer, values []string) {
	out.WriteString(strings.Join(values, ", "))
	out.WriteByte('\n')
}

func invalidField(stderr io.Writer, field string) int {
	fmt.Fprintf(stderr, "Field \"%s\" is not a valid field to query.\n", field)
	return 2
}

// queryGPUs answers --query-gpu: one row per GPU.
func queryGPUs(out *bytes.Buffer, stderr io.Writer, f csvFormat, query string, gpus []sandboxGPU, busy []busyProcess) int {
	fields := strings.Split(query, ",")
	rows := make([][]string, len(gpus))
	for i, g := range gpus {
		used := 0
		for _, p := range busy {
			if p.sees(g) {
				used += processMiB
			}
		}
		used = min(used, g.totalMiB)
		for _, field := range fields {
			var v string
			switch field {
			case "index":
				v = g.index
			case "uuid", "gpu_uuid":
				v = g.uuid
			case "name", "gpu_name":
				v = g.name
			case "pci.bus_id", "gpu_bus_id":
				v = g.busID
			case "memory.total":
				v = f.mib(g.totalMiB)
			case "memory.used":
				v = f.mib(used)
			case "memory.free":
				v = f.mib(g.totalMiB - used)
			case "driver_version":
				v = g.driver
			case "count":
				v = strconv.Itoa(len(gpus))
			default:
				return invalidField(stderr, field)
			}
			rows[i] = append(rows[i], v)
		}
	}
	f.writeHeader(out, fields)
	for _, row := range rows {
		writeRow(out, row)
	}
	return 0
}

// queryApps answers --query-compute-apps: one row per process and GPU it
// sees.
func queryApps(out *bytes.Buffer, stderr io.Writer, f csvFormat, query string, gpus []sandboxGPU, busy []busyProcess) int {
	fields := strings.Split(query, ",")
	for _, field := range fields {
		switch field {
		case "gpu_uuid", "gpu_name", "gpu_bus_id", "pid", "used_memory", "used_gpu_memory", "process_name", "name":
		default:
			return invalidField(stderr, field)
		}
	}
	f.writeHeader(out, fields)
	for _, p := range busy {
		for _, g := range gpus {
			if !p.sees(g) {
				continue
			}
			row := make([]string, 0, len(fields))
			for _, field := range fields {
				var v string
				switch field {
				case "gpu_uuid":
					v = g.uuid
				case "gpu_name":
					v = g.name
				case "gpu_bus_id":
					v = g.busID
				case "pid":
					v = strconv.Itoa(p.pid)
				case "used_memory", "used_gpu_memory":
					v = f.mib(processMiB)
				case "process_name", "name":
					v = processName(p.pid)
				}
				row = append(row, v)
			}
			writeRow(out, row)
		}
	}
	return 0
}

// processName is what /proc says a process is called, as nvidia-smi
// reports it.
func processName(pid int) string {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSuffix(string(comm), "\n")
}

// readGPUs reads a machine's gpus file.
func readGPUs(path string) ([]sandboxGPU, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var gpus []sandboxGPU
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		parts := strings.Split(sc.Text(), "|")
		if len(parts) != 6 {
			return nil, fmt.Errorf("%s:%d: want 6 fields separated by |, got %d", path, line, len(parts))
		}
		total, err := strconv.Atoi(parts[4])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: memory.total %q is not a number of MiB", path, line, parts[4])
		}
		gpus = append(gpus, sandboxGPU{index: parts[0], uuid: parts[1], name: parts[2], busID: parts[3], totalMiB: total, driver: parts[5]})
	}
	return gpus, sc.Err()
}

// busyProcesses lists the live processes of machine that set
// CUDA_VISIBLE_DEVICES, by pid. Until something was launched there, it
// reads nothing, so a probe of an idle fleet does not walk /proc.
func busyProcesses(machine string) []busyProcess {
	if _, err := os.Stat(filepath.Join(machine, launchedFile)); err != nil {
		return nil
	}
	var busy []busyProcess
	for _, p := range machineProcesses(func(dir []byte) bool { return string(dir) == machine }) {
		devices, ok := p.getenv("CUDA_VISIBLE_DEVICES")
		if !ok || devices == "" {
			continue
		}
		busy = append(busy, busyProcess{pid: p.pid, devices: strings.Split(devices, ",")})
	}
	return busy
}
