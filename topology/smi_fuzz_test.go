package topology

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseSMI checks that no input makes ParseSMI panic, that every
// failure names a line inside the input, and that every success is a
// consistent matrix. Its seeds are the recordings
// (testdata/fuzz/FuzzParseSMI, written by TestFuzzSeedsMatchRecordings
// with -update).
func FuzzParseSMI(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ParseSMI(text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if n := strings.Count(text, "\n") + 2; pe.Line < 1 || pe.Line > n {
				t.Fatalf("error on line %d of %d", pe.Line, n)
			}
			return
		}
		n := m.GPUs()
		if n < 1 || len(m.NICLinks) != n || len(m.CPUAffinity) != n || len(m.NUMAAffinity) != n || len(m.GPUNUMAID) != n {
			t.Fatalf("inconsistent matrix sizes for %d GPUs", n)
		}
		for i := 0; i < n; i++ {
			if len(m.Links[i]) != n || len(m.NICLinks[i]) != len(m.NICs) {
				t.Fatalf("row %d has %d links and %d NIC links", i, len(m.Links[i]), len(m.NICLinks[i]))
			}
			for j := 0; j < n; j++ {
				if (i == j) != (m.Links[i][j].Kind == LinkSelf) || m.Links[i][j] != m.Links[j][i] {
					t.Fatalf("GPU%d-GPU%d = %v, GPU%d-GPU%d = %v", i, j, m.Links[i][j], j, i, m.Links[j][i])
				}
			}
			for k := 1; k < len(m.NUMAAffinity[i]); k++ {
				if m.NUMAAffinity[i][k] <= m.NUMAAffinity[i][k-1] {
					t.Fatalf("GPU%d NUMA set %v not sorted", i, m.NUMAAffinity[i])
				}
			}
		}
	})
}
