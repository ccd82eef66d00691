//go:build !(linux && cgo && nvml)

package nvmltopo

import "github.com/gpulayer/gpulayer/topology"

// LocalFabric would read this machine's GPUs' NVLink fabric registrations
// through NVML; this build has none (see Local), so it always returns
// ErrUnavailable with Local's reason.
func LocalFabric() ([]topology.GPUFabric, error) {
	_, err := Local()
	return nil, err
}
