//go:build !(linux && cgo)

package nvmltopo

import (
	"fmt"
	"runtime"

	"github.com/gpulayer/gpulayer/topology"
)

// Local would read this machine's GPUs through NVML, but this build has no
// NVML: go-nvml needs cgo on Linux. It always returns ErrUnavailable.
func Local() (*topology.Matrix, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: NVML is read on Linux only (this is %s/%s)", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
	}
	return nil, fmt.Errorf("%w: gpulayer was built without cgo (CGO_ENABLED=0), and go-nvml needs it", ErrUnavailable)
}
