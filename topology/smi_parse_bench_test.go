package topology

import (
	"os"
	"testing"
)

// BenchmarkParseSMI parses an 8-GPU machine's `nvidia-smi topo -m` (an
// HGX H200 with 10 NICs), as a probe does once per machine: a probe of
// 500 machines does it 500 times on the client.
func BenchmarkParseSMI(b *testing.B) {
	text, err := os.ReadFile("../testdata/topo/hgx-h200-8x-nv18-10nic-raw-tabs.txt")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSMI(string(text)); err != nil {
			b.Fatal(err)
		}
	}
}
