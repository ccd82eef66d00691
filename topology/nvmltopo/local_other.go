//go:build !(linux && cgo && nvml)

package nvmltopo

import (
	"fmt"
	"runtime"

	"github.com/gpulayer/gpulayer/topology"
)

// Local would read this machine's GPUs through NVML, but this build has no
// NVML: go-nvml needs cgo on Linux, and gpulayer compiles it in only with
// the nvml build tag (the release build; docs/nvml.md). It always returns
// ErrUnavailable.
func Local() (*topology.Matrix, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: NVML is read on Linux only (this is %s/%s)", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
	}
	return nil, fmt.Errorf("%w: this gpulayer was built without NVML (build with -tags nvml and cgo for it)", ErrUnavailable)
}
