package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/providers/sandbox/recordings"
	"github.com/gpulayer/gpulayer/topology"
)

// MaxNVLinkDomain is the most machines of the simulated NVLink domain: the
// 18 compute trays of a GB200 NVL72 rack.
const MaxNVLinkDomain = 18

// fabricFile holds one line per GPU of a machine whose `nvidia-smi -q`
// prints Fabric sections: state|status|clique id|cluster UUID. A machine
// without one prints none.
const fabricFile = "fabric"

// Fabric is the NVLink fabric clique a machine's GPUs are registered with.
type Fabric struct {
	ClusterUUID string
	CliqueID    uint32
}

// domainFabric is the clique of the sandbox's simulated NVL72 rack: a
// cluster UUID made from a fixed name (so every sandbox's rack is the same
// domain) and 32766, the clique of an NVL72's default partition.
func domainFabric() *Fabric {
	h := sha256.Sum256([]byte("gpulayer sandbox NVL72"))
	return &Fabric{ClusterUUID: fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]), CliqueID: 32766}
}

// GPUFabric is what the machine's nvidia-smi -q says of GPU g's NVLink
// fabric, as the probe reads it; nil when it prints no Fabric section.
func (m *Machine) GPUFabric(g int) *topology.GPUFabric {
	switch {
	case m.Fabric != nil:
		return &topology.GPUFabric{Index: g, State: topology.FabricCompleted, Status: topology.FabricSuccess,
			CliqueID: m.Fabric.CliqueID, ClusterUUID: m.Fabric.ClusterUUID}
	case m.Model.Fabric == recordings.FabricSingleNode:
		return &topology.GPUFabric{Index: g, State: topology.FabricCompleted, Status: topology.FabricSuccess,
			ClusterUUID: "00000000-0000-0000-0000-000000000000"}
	case m.Model.Fabric == recordings.FabricNA:
		return &topology.GPUFabric{Index: g, State: "N/A", Status: "N/A"}
	}
	return nil
}

// fabricRecord is the machine's fabric file; "" for a machine without
// Fabric sections.
func fabricRecord(m *Machine) string {
	var b strings.Builder
	for g := range m.GPUUUIDs {
		f := m.GPUFabric(g)
		if f == nil {
			return ""
		}
		clique, cluster := strconv.FormatUint(uint64(f.CliqueID), 10), f.ClusterUUID
		if f.State != topology.FabricCompleted {
			clique, cluster = "N/A", "N/A"
		}
		fmt.Fprintf(&b, "%s|%s|%s|%s\n", f.State, f.Status, clique, cluster)
	}
	return b.String()
}

// queryAll answers `nvidia-smi -q` with what the probe reads of it, in
// nvidia-smi's layout: the log header, and per GPU its line, name, UUID
// and, where the machine has one, its Fabric section.
func queryAll(out *bytes.Buffer, stderr io.Writer, machine string, gpus []sandboxGPU) int {
	fabric, err := readFabric(filepath.Join(machine, fabricFile))
	if err != nil {
		fmt.Fprintf(stderr, "nvidia-smi (sandbox): %v\n", err)
		return 2
	}
	row := func(indent, key, value string) { fmt.Fprintf(out, "%s%-*s: %s\n", indent, 42-len(indent), key, value) }
	out.WriteString("\n==============NVSMI LOG==============\n\n")
	if len(gpus) > 0 {
		row("", "Driver Version", gpus[0].driver)
	}
	out.WriteString("\n")
	row("", "Attached GPUs", strconv.Itoa(len(gpus)))
	for i, g := range gpus {
		fmt.Fprintf(out, "GPU %s\n", g.busID)
		row("    ", "Product Name", g.name)
		row("    ", "GPU UUID", g.uuid)
		if i < len(fabric) {
			f := fabric[i]
			out.WriteString("    Fabric\n")
			row("        ", "State", f[0])
			row("        ", "Status", f[1])
			row("        ", "CliqueId", f[2])
			row("        ", "ClusterUUID", f[3])
			out.WriteString("        Health\n")
			row("            ", "Bandwidth", "N/A")
		}
	}
	return 0
}

// readFabric reads a machine's fabric file; none for a machine without.
func readFabric(path string) ([][4]string, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][4]string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		parts := strings.Split(sc.Text(), "|")
		if len(parts) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 fields separated by |, got %d", path, line, len(parts))
		}
		out = append(out, [4]string(parts))
	}
	return out, sc.Err()
}
