//go:build !linux

package topology

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
